"""navigator planner: a directive toward the mission's target from the egocentric view (scan when not in view)."""
from dataclasses import dataclass, field

from jitlab.modules.egocentric import EgocentricPlanner


@dataclass
class Planner(EgocentricPlanner):
    bonus: float = field(default=8.0, metadata={"help": "added to the directed command's score (dev traces: at 2.0 and 4.0 "
                                                        "the model walked past a 'drop' directive)"})
