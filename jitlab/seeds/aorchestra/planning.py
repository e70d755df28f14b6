"""aorchestra planner: none (the coordinator plans by delegating)."""
from jitlab.modules.planning import NoPlanner


class Planner(NoPlanner):
    pass
