"""trapdoor capability policy: registry + delegate while delegations are left; a running sub-agent sees only its tools."""
from jitlab.modules.case_studies import DelegationInterceptPolicy


class CapabilityPolicy(DelegationInterceptPolicy):
    pass
