"""deepagent action: marker-guided execution (tool_search / fold / tool_call)."""
from jitlab.modules.action import MarkerAction


class Action(MarkerAction):
    pass
