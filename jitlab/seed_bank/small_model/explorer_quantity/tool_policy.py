"""explorer capability policy: the full registry."""
from __future__ import annotations

from jitlab.protocol import Capability, Ctx, Directive, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.basic.FullRegistry
class FullRegistry:
    """F: expose every tool of the task, in registry order."""

    def reset(self, ctx: Ctx) -> None:
        pass

    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]:
        return list(registry)


# ---- the harness's own code ----

class CapabilityPolicy(FullRegistry):
    pass
