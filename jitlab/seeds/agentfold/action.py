"""agentfold action: ReAct + fold directive."""
from jitlab.modules.action import ReActFoldAction


class Action(ReActFoldAction):
    pass
