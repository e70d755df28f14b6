"""roma planner: atomizer + recursive DAG decomposition (depth <= 3)."""
from jitlab.modules.planning import RecursiveDAGPlanner


class Planner(RecursiveDAGPlanner):
    pass
