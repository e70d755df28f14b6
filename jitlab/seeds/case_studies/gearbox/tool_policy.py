"""gearbox capability policy: tools per phase (answer tools in the answer phase only)."""
from jitlab.modules.case_studies import PhaseToolPolicy


class CapabilityPolicy(PhaseToolPolicy):
    pass
