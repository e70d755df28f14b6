"""palimpsest memory: memory of reusable artifacts and reasoning state."""
from jitlab.modules.case_studies import ArtifactMemory


class Memory(ArtifactMemory):
    pass
