"""pegboard capability policy: final-answer tool hidden until verification."""
from dataclasses import dataclass, field

from jitlab.modules.case_studies import EvidenceGatedPolicy


@dataclass
class CapabilityPolicy(EvidenceGatedPolicy):
    state_key: str = field(default="verify", metadata={"help": "opened by the planner's switch to verification"})
