"""turnstile capability policy: final-answer tool hidden until the checklist is complete."""
from jitlab.modules.case_studies import EvidenceGatedPolicy


class CapabilityPolicy(EvidenceGatedPolicy):
    pass
