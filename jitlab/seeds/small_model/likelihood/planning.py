"""likelihood planner: none (the action's bookkeeping is all the structure it has)."""
from jitlab.modules.basic import NoPlanner


class Planner(NoPlanner):
    pass
