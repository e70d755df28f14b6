"""Rule patch (jitlab engineer rules): loop_after=3 + hint_after=40."""
from dataclasses import dataclass

from jitlab.modules.hooks import RuleHooks


@dataclass
class Hooks(RuleHooks):
    hint_after: int = 40
    loop_after: int = 3
