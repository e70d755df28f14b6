"""oagent memory: short-term window + long-term summary."""
from dataclasses import dataclass, field

from jitlab.modules.memory import PeriodicSummaryMemory


@dataclass
class Memory(PeriodicSummaryMemory):
    restart: bool = field(default=False, metadata={"help": "keep a recent window under the summary instead of restarting"})
    every_k: int = field(default=6, metadata={"help": "summarize every k steps"})
    max_chars: int = field(default=1500, metadata={"help": "characters of recent transcript shown (K samples carry it)"})
