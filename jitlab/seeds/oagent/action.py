"""oagent action: ensemble voting (K=3, majority)."""
from jitlab.modules.action import EnsembleVote


class Action(EnsembleVote):
    pass
