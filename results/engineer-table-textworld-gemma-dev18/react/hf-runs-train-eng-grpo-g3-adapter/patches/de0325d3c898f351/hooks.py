""" Rule patch (jitlab engineer rules (jitlab engineer engineer engineer engineerengineerlerule = 'continue-repeats' + 1))
"""
from dataclasses import dataclass

from jitlab.modules.hooks import RuleHooks


@dataclass
class Hooks(RuleHooks):
    block_after: str = "loop_after = 1"
