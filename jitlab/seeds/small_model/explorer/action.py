"""explorer action: one batched likelihood choice among the admissible commands untried in this room; when only
look/examine/inventory are left untried, the least-tried other commands (where the map's way back applies)."""
from dataclasses import dataclass, field

from jitlab.modules.likelihood import LikelihoodAction


@dataclass
class Action(LikelihoodAction):
    info_last: bool = field(default=False, metadata={"help": "a room exhausted: move on rather than read"})
