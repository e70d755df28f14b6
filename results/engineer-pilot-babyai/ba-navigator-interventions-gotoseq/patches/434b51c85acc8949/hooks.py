"""Interventions mined by jitlab.engineer.interventions from 4 episodes (242 steps) of openvino:embedded.

Step shares: {"refused": 0.0, "repeated_action": 0.0, "repeated_state": 0.3347}
"""
from dataclasses import dataclass

from jitlab.modules.hooks import InterventionHooks


@dataclass
class Hooks(InterventionHooks):
    loop_after: int = 3
