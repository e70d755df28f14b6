"""aggagent memory: isolated rollout histories."""
from jitlab.modules.memory import RolloutHistories


class Memory(RolloutHistories):
    pass
