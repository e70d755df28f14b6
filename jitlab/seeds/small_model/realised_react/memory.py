"""realised_react (ReAct) memory: the full interaction history."""
from jitlab.modules.basic import FullHistory


class Memory(FullHistory):
    pass
