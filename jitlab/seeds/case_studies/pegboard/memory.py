"""pegboard memory: candidate x clue evidence matrix, a source id per cell."""
from jitlab.modules.case_studies import EvidenceMatrixMemory


class Memory(EvidenceMatrixMemory):
    pass
