"""gam memory: memos + page store searched on demand."""
from jitlab.modules.memory import MemoPageMemory


class Memory(MemoPageMemory):
    pass
