"""explorer_margin action: the explorer's, with the backbone deciding only where its lead over the runner-up is at
least 1.0 (normalised log-likelihood); elsewhere the prior and the bookkeeping's order decide. 1.0 was chosen on
the TextWorld dev split (0.0: 31/36, 0.5: 34/36, 1.0: 35/36; the uniform-score control 35/36)."""
from dataclasses import dataclass, field

from jitlab.modules.likelihood import LikelihoodAction


@dataclass
class Action(LikelihoodAction):
    info_last: bool = field(default=False, metadata={"help": "a room exhausted: move on rather than read"})
    margin: float = field(default=1.0, metadata={"help": "the backbone's lead it needs to decide (dev split)"})
