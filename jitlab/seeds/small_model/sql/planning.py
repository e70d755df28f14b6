"""sql planner: none (the task text names the table and its columns)."""
from jitlab.modules.basic import NoPlanner


class Planner(NoPlanner):
    pass
