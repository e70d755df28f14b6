"""explorer_quantity planner: the explorer's (goal words, recipe checklist, map) plus the quantity prior: the object a
goal's order by quantity or its arithmetic problem asks for, read and computed in code."""
from jitlab.modules.quantities import QuantityPlanner


class Planner(QuantityPlanner):
    pass
