"""Detailed rule patch (jitlab engineer rules): block_after=1."""

from dataclasses import dataclass

from jitlab.rules.hooks import Block_after


@dataclass
class Hooks(Block_after):
    block_after: int = 1
