"""flash_searcher memory: full history."""
from jitlab.modules.memory import FullHistory


class Memory(FullHistory):
    pass
