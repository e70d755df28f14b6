"""memobrain planner: none."""
from jitlab.modules.planning import NoPlanner


class Planner(NoPlanner):
    pass
