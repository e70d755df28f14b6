"""likelihood action: one batched likelihood choice among the admissible commands untried in this room."""
from jitlab.modules.likelihood import LikelihoodAction


class Action(LikelihoodAction):
    pass
