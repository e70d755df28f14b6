"""explorer memory: the full history (old lines dropped in whole chunks: a stable prefix)."""
from dataclasses import dataclass, field

from jitlab.modules.basic import FullHistory


@dataclass
class Memory(FullHistory):
    max_chars: int = field(default=2000, metadata={"help": "characters of transcript shown (old lines dropped in "
                                                           "chunks of half of it: a stable prefix)"})
