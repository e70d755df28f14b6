"""aorchestra memory: coordinator history (delegations + reports)."""
from jitlab.modules.memory import CoordinatorHistory


class Memory(CoordinatorHistory):
    pass
