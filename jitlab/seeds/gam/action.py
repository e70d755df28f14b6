"""gam action: ReAct."""
from jitlab.modules.action import ReActAction


class Action(ReActAction):
    pass
