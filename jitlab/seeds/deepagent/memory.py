"""deepagent memory: three-tier memory (episodic, working, tool) produced by folds."""
from jitlab.modules.memory import ThreeTierMemory


class Memory(ThreeTierMemory):
    pass
