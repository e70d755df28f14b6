"""Rule patch (jitlab engineer rules): stop_trait=5."""
from dataclasses import dataclass

from jitlab.modules.hooks import RuleHooks


@dataclass
class Hooks(RuleHooks):
    stop_trait: int = 5
