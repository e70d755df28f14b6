"""Rule patch (jitlab engineer rules): block_after=1."""
from dataclasses import dataclass

from jitlab.modules.hooks import RuleHooks


@dataclass
class Hooks(RuleHooks):
    block_after: int = 1
