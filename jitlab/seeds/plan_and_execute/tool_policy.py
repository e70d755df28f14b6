"""plan_and_execute capability policy: full registry."""
from jitlab.modules.policy import FullRegistry


class CapabilityPolicy(FullRegistry):
    pass
