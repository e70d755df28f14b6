"""Interventions mined by jitlab.engineer.interventions from 6 episodes (253 steps) of llamacpp:gemma3-270m.

Step shares: {"refused": 0.0, "repeated_action": 0.6601, "repeated_state": 0.7668}
"""
from dataclasses import dataclass

from jitlab.modules.hooks import InterventionHooks


@dataclass
class Hooks(InterventionHooks):
    block_after: int = 1
    loop_after: int = 3
    rerank: str = 'untried'
