"""flash_searcher planner: DAG of subtasks, revised periodically."""
from jitlab.modules.planning import DAGPlanner


class Planner(DAGPlanner):
    pass
