"""explorer planner: goal words, the recipe checklist and the map of rooms and exits, as a prior over commands."""
from jitlab.modules.grounding import GroundedPlanner


class Planner(GroundedPlanner):
    pass
