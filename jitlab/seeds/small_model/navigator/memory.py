"""navigator memory: the recent history (the current view matters most)."""
from dataclasses import dataclass, field

from jitlab.modules.basic import FullHistory


@dataclass
class Memory(FullHistory):
    max_chars: int = field(default=1200, metadata={"help": "characters of transcript shown (old lines dropped in "
                                                           "chunks of half of it: a stable prefix)"})
