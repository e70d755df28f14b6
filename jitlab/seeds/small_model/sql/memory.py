"""sql memory: the full history (query results stay in view)."""
from dataclasses import dataclass, field

from jitlab.modules.basic import FullHistory


@dataclass
class Memory(FullHistory):
    max_chars: int = field(default=3000, metadata={"help": "characters of transcript shown (old lines dropped in "
                                                           "chunks of half of it: a stable prefix)"})
