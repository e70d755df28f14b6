"""realised_react (ReAct) has no planner: reasoning happens inside the action step."""
from jitlab.modules.basic import NoPlanner


class Planner(NoPlanner):
    pass
