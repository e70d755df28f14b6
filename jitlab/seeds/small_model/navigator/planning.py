"""navigator planner: a directive toward the mission's target from the egocentric view (scan when not in view)."""
from jitlab.modules.egocentric import EgocentricPlanner


class Planner(EgocentricPlanner):
    pass
