"""plan_and_execute planner: linear roadmap + replanning."""
from jitlab.modules.planning import RoadmapPlanner


class Planner(RoadmapPlanner):
    pass
