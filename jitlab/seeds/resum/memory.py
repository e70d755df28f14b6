"""resum memory: periodic summary (evidence, gaps, next) + restart."""
from jitlab.modules.memory import PeriodicSummaryMemory


class Memory(PeriodicSummaryMemory):
    pass
