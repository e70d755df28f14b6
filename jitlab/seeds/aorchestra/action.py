"""aorchestra action: coordinator delegating to nested ReAct sub-agents."""
from jitlab.modules.action import CoordinatorAction


class Action(CoordinatorAction):
    pass
