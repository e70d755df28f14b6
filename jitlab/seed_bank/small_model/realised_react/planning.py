"""realised_react (ReAct) has no planner: reasoning happens inside the action step."""
from __future__ import annotations

from jitlab.protocol import Ctx, Directive, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.basic.NoPlanner
class NoPlanner:
    """P: no planning; the directive is empty."""

    def reset(self, ctx: Ctx) -> None:
        pass

    def plan(self, view: View, ctx: Ctx) -> Directive:
        return Directive("")


# ---- the harness's own code ----

class Planner(NoPlanner):
    pass
