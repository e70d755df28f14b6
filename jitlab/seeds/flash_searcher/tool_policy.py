"""flash_searcher capability policy: completion-check exposure (answer tools after the DAG is done)."""
from dataclasses import dataclass, field

from jitlab.modules.policy import CompletionGate


@dataclass
class CapabilityPolicy(CompletionGate):
    require_plan_done: bool = field(default=True, metadata={"help": "also wait for the DAG to finish before answer tools appear"})
