"""flash_searcher capability policy: completion-check exposure (answer tools after the DAG is done)."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.protocol import Capability, Ctx, Directive, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.policy.CompletionGate
@dataclass
class CompletionGate:
    """F (phase / completion-check exposure): answer-type tools stay hidden during an evidence phase and
    are exposed once a completion check passes (enough steps taken, and the plan done if required)."""
    gated: tuple = field(default=("commit_answer", "answer", "finish", "submit"),
                         metadata={"help": "tool names hidden until the check passes"})
    min_steps: int = field(default=1, metadata={"help": "evidence steps taken before gated tools appear"})
    require_plan_done: bool = field(default=False, metadata={"help": "also wait for ctx.state['plan_done'] (set by planners)"})
    open_before_end: int = field(default=3, metadata={"help": "expose everything in the last n steps of the task's budget"})

    def reset(self, ctx: Ctx) -> None:
        self.opened_at: int | None = None

    def is_open(self, ctx: Ctx) -> bool:
        if ctx.step >= max(1, ctx.task.max_steps - self.open_before_end):
            return True
        return ctx.step > self.min_steps and (not self.require_plan_done or bool(ctx.state.get("plan_done")))

    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]:
        if self.is_open(ctx):
            if self.opened_at is None:
                self.opened_at = ctx.step
            return list(registry)
        exposed = [c for c in registry if c.name not in self.gated]
        return exposed or list(registry)


# ---- the harness's own code ----

@dataclass
class CapabilityPolicy(CompletionGate):
    require_plan_done: bool = field(default=True, metadata={"help": "also wait for the DAG to finish before answer tools appear"})
