"""Rule patch (jitlab engineer rules): (loop_after=30, hint_after=6): loop_after=1."""
from dataclasses import dataclass

from jitlab.modules.hooks import RuleHooks


@dataclass
class Hooks(RuleHooks):
    loop_after: int = 3
    hint_after: int = 1
