"""agentfold memory: multi-scale folding (condense latest step / merge summaries)."""
from jitlab.modules.memory import MultiScaleFoldingMemory


class Memory(MultiScaleFoldingMemory):
    pass
