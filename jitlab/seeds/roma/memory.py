"""roma memory: context isolation per sub-task."""
from jitlab.modules.memory import IsolatedContextMemory


class Memory(IsolatedContextMemory):
    pass
