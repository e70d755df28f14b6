"""Rule patch (jitlab engineer rules): hint_after=21."""
from dataclasses import dataclass

from jitlab.modules.hooks import RuleHooks


@dataclass
class Hooks(RuleHooks):
    hint_after: int = 21
