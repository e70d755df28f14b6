"""realised_react (ReAct) exposes the full tool registry every step."""
from jitlab.modules.basic import FullRegistry


class CapabilityPolicy(FullRegistry):
    pass
