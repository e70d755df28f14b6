"""navigator action: a likelihood choice among the six actions with the directive in view (states: whole views)."""
from dataclasses import dataclass, field

from jitlab.modules.likelihood import LikelihoodAction


@dataclass
class Action(LikelihoodAction):
    state: str = field(default="text", metadata={"help": "a state is the whole egocentric view"})
    demote: tuple = field(default=(), metadata={"help": "no information-only commands in a grid world"})
