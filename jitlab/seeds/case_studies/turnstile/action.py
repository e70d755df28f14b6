"""turnstile action: ReAct."""
from jitlab.modules.basic import ReActAction


class Action(ReActAction):
    pass
