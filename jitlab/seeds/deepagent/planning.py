"""deepagent planner: none (reasoning stream)."""
from jitlab.modules.planning import NoPlanner


class Planner(NoPlanner):
    pass
