"""realised_react (ReAct) action: one Thought/Action completion per step, mapped to an admissible command."""
from jitlab.modules.basic import ReActAction


class Action(ReActAction):
    pass
