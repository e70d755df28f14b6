"""Rule patch (jitlab engineer rules): loop_after=3."""
from dataclasses import dataclass

from jitlab.modules.hooks import RuleHooks


@dataclass
class Hooks(RuleHooks):
    loop_after: int = 3
