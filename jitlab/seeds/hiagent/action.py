"""hiagent action: ReAct toward the current subgoal."""
from jitlab.modules.action import ReActAction


class Action(ReActAction):
    pass
