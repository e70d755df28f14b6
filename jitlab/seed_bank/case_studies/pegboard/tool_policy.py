"""pegboard capability policy: final-answer tool hidden until verification."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.protocol import Capability, Ctx, Directive, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.case_studies._ANSWER_TOOLS
_ANSWER_TOOLS = "commit_answer,answer,finish,submit"


# library: jitlab.modules.case_studies._names
def _names(csv: str) -> list[str]:
    return [n.strip() for n in str(csv).split(",") if n.strip()]


# library: jitlab.modules.case_studies.EvidenceGatedPolicy
@dataclass
class EvidenceGatedPolicy:
    """F (evidence-gated final answer; Turnstile, Pegboard): the final-answer tools stay hidden until the evidence is complete
    (``ctx.state[state_key]`` is true, set by an evidence memory or planner); everything is exposed in
    the last ``open_before_end`` steps of the task's budget."""
    gated: str = field(default=_ANSWER_TOOLS, metadata={"help": "comma-separated tools hidden until the evidence is complete"})
    state_key: str = field(default="checklist_complete", metadata={"help": "ctx.state flag that opens the gate"})
    open_before_end: int = field(default=2, metadata={"help": "expose everything in the last n steps of the budget"})

    def reset(self, ctx: Ctx) -> None:
        self.opened_at: int | None = None

    def is_open(self, ctx: Ctx) -> bool:
        return bool(ctx.state.get(self.state_key)) or ctx.step >= max(1, ctx.task.max_steps - self.open_before_end)

    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]:
        if self.is_open(ctx):
            self.opened_at = ctx.step if self.opened_at is None else self.opened_at
            return list(registry)
        hidden = set(_names(self.gated))
        return [c for c in registry if c.name not in hidden] or list(registry)


# ---- the harness's own code ----

@dataclass
class CapabilityPolicy(EvidenceGatedPolicy):
    state_key: str = field(default="verify", metadata={"help": "opened by the planner's switch to verification"})
