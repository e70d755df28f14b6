"""Rule patch (jitlab engineer rules): block_after=8."""
from dataclasses import dataclass

@dataclass
class Hooks(jitlab.modules.hooks):
    block_after: int = 8
