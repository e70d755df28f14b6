"""oagent planner: plan with periodic revision."""
from jitlab.modules.planning import RoadmapPlanner


class Planner(RoadmapPlanner):
    pass
