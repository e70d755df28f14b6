"""memobrain memory: reasoning graph: fold finished sub-trajectories, flush low-value steps."""
from jitlab.modules.memory import ReasoningGraphMemory


class Memory(ReasoningGraphMemory):
    pass
