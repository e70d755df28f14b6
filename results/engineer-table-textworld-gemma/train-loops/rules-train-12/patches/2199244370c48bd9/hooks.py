"""Rule patch (jitlab engineer rules): correct_invalid=True."""
from dataclasses import dataclass

from jitlab.modules.hooks import RuleHooks


@dataclass
class Hooks(RuleHooks):
    correct_invalid: bool = True
