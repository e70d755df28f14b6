"""plan_and_execute action: ReAct executor (follows the plan step)."""
from jitlab.modules.action import ReActAction


class Action(ReActAction):
    pass
