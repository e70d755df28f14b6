"""palimpsest planner: request -> DAG of sub-tasks (width <= 2 ready, depth <= 3)."""
from jitlab.modules.case_studies import BoundedDAGPlanner


class Planner(BoundedDAGPlanner):
    pass
