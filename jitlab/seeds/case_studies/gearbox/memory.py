"""gearbox memory: phase-aware memory (transcript / findings+recent / findings schema)."""
from jitlab.modules.case_studies import PhaseAwareMemory


class Memory(PhaseAwareMemory):
    pass
