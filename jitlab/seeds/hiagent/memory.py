"""hiagent memory: subgoal working memory, collapsed to a summary when the subgoal ends."""
from jitlab.modules.memory import SubgoalWorkingMemory


class Memory(SubgoalWorkingMemory):
    pass
