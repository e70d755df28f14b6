"""hiagent planner: subgoal declaration."""
from jitlab.modules.planning import SubgoalPlanner


class Planner(SubgoalPlanner):
    pass
