"""Interventions mined by jitlab.engineer.interventions from 6 episodes (78 steps) of embedded.

Step shares: {"refused": 0.0, "repeated_action": 0.5385, "repeated_state": 0.7179}
"""
from dataclasses import dataclass

from jitlab.modules.hooks import InterventionHooks


@dataclass
class Hooks(InterventionHooks):
    block_after: int = 1
    loop_after: int = 3
    prefer: tuple = (('take', 1.39),)
    rerank: str = 'untried'
