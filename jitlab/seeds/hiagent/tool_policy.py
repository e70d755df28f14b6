"""hiagent capability policy: full registry."""
from jitlab.modules.policy import FullRegistry


class CapabilityPolicy(FullRegistry):
    pass
