"""trapdoor capability policy: registry + delegate while delegations are left; a running sub-agent sees only its tools."""
from __future__ import annotations

from dataclasses import dataclass

from jitlab.protocol import Capability, Ctx, Directive, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.policy.DELEGATE
DELEGATE = Capability(
    "delegate", "Create a sub-agent for a sub-task: give it an instruction, the context it needs and the "
                "tools it may use; it acts until done and reports back.",
    {"type": "object", "properties": {"instruction": {"type": "string"}, "context": {"type": "string"},
                                      "tools": {"type": "array", "items": {"type": "string"}}},
     "required": ["instruction"]})


# library: jitlab.modules.policy.AgentDelegation
@dataclass
class AgentDelegation:
    """F (AOrchestra): the coordinator sees the registry plus ``delegate``; while a sub-agent runs, only
    the sub-agent's tool subset is exposed."""

    def reset(self, ctx: Ctx) -> None:
        pass

    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]:
        sub = ctx.state.get("subagent") or {}
        if sub.get("active"):
            names = set(sub.get("tools", []))
            return [c for c in registry if c.name in names] or list(registry)
        return list(registry) + [DELEGATE]


# library: jitlab.modules.case_studies.DelegationInterceptPolicy
@dataclass
class DelegationInterceptPolicy(AgentDelegation):
    """F (Trapdoor bounded delegation): the registry plus ``delegate`` while delegations are left
    (``ctx.state['max_delegations']``); while a sub-agent runs, only its tools."""

    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]:
        chosen = super().select(directive, view, registry, ctx)
        if len(ctx.state.get("delegations") or []) < ctx.state.get("max_delegations", float("inf")):
            return chosen
        return [c for c in chosen if c.name != DELEGATE.name] or list(registry)


# ---- the harness's own code ----

class CapabilityPolicy(DelegationInterceptPolicy):
    pass
