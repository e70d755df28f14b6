"""aorchestra capability policy: agent delegation (registry + delegate; sub-agent tool subset)."""
from jitlab.modules.policy import AgentDelegation


class CapabilityPolicy(AgentDelegation):
    pass
