"""explorer_quantity action: explorer_margin's, the backbone deciding only where its lead over the runner-up is at
least 1.0 (normalised log-likelihood; chosen on the TextWorld dev split); elsewhere the prior (here with the quantity
prior) and the bookkeeping's order decide."""
from dataclasses import dataclass, field

from jitlab.modules.likelihood import LikelihoodAction


@dataclass
class Action(LikelihoodAction):
    info_last: bool = field(default=False, metadata={"help": "a room exhausted: move on rather than read"})
    margin: float = field(default=1.0, metadata={"help": "the backbone's lead it needs to decide (dev split)"})
