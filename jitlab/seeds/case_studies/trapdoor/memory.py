"""trapdoor memory: fact graph (entity -> relation -> value, with sources) + orchestrator transcript."""
from jitlab.modules.case_studies import FactGraphMemory


class Memory(FactGraphMemory):
    pass
