"""explorer capability policy: the full registry."""
from jitlab.modules.basic import FullRegistry


class CapabilityPolicy(FullRegistry):
    pass
