"""origami memory: isolated subtask contexts; fold replaces only the active one by an artifact."""
from jitlab.modules.case_studies import HierarchicalFoldMemory


class Memory(HierarchicalFoldMemory):
    pass
