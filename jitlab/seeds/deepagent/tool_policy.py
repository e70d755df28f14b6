"""deepagent capability policy: retrieval-based tool search."""
from jitlab.modules.policy import ToolSearch


class CapabilityPolicy(ToolSearch):
    pass
