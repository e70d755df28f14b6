"""aorchestra memory: coordinator history (delegations + reports)."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip
from jitlab.protocol import Ctx, Event, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.memory.CoordinatorHistory
@dataclass
class CoordinatorHistory:
    """M (AOrchestra): the coordinator's history holds only delegations and the sub-agents' reports
    (plus its own direct actions and the latest observation); sub-agents' inner steps stay with them."""
    report_chars: int = field(default=200, metadata={"help": "characters per sub-agent report"})
    max_records: int = field(default=8, metadata={"help": "most recent delegations shown"})

    def reset(self, ctx: Ctx) -> None:
        self.first = ""
        self.latest = ""
        self.direct: list[str] = []
        self.hidden = 0

    def update(self, event: Event, ctx: Ctx) -> None:
        active = bool((ctx.state.get("subagent") or {}).get("active"))
        if event.kind in ("observation", "tool_result"):
            self.first = self.first or event.content
            self.latest = event.content
        if event.kind == "action":
            if event.data.get("agent") or active:
                self.hidden += 1
            else:
                self.direct.append(f"step {event.step}: {clip(event.content, 60)}")

    def view(self, ctx: Ctx) -> View:
        records = (ctx.state.get("delegations") or [])[-self.max_records:]
        lines = [f"Task start: {clip(self.first, 300)}"]
        if records:
            lines.append("Delegations so far:")
            for i, r in enumerate(records):
                report = clip(r.get("report") or "(running)", self.report_chars)
                lines.append(f"{i + 1}. [{', '.join(r.get('tools', []))}] {clip(r.get('instruction', ''), 80)} => {report}")
        if self.direct:
            lines.append("Direct actions: " + "; ".join(self.direct[-4:]))
        lines.append(f"Current observation: {self.latest}")
        return View("\n".join(lines), [], {"delegations": len(records), "hidden_steps": self.hidden})


# ---- the harness's own code ----

class Memory(CoordinatorHistory):
    pass
