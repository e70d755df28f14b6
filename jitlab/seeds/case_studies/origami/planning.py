"""origami planner: subtasks in order with a step budget each, then aggregation."""
from jitlab.modules.case_studies import SubtaskTreePlanner


class Planner(SubtaskTreePlanner):
    pass
