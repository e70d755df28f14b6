"""roma memory: context isolation per sub-task."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip
from jitlab.protocol import Ctx, Event, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.basic.history_text
def history_text(events: list[Event], max_chars: int) -> str:
    """Render events as a transcript, keeping the most recent ``max_chars`` characters."""
    lines = []
    for e in events:
        prefix = {"observation": "Observation", "action": "Action", "tool_result": "Result"}.get(e.kind, e.kind.title())
        lines.append(f"{prefix}: {e.content.strip()}")
    text = "\n".join(lines)
    return text if len(text) <= max_chars else "...\n" + text[-max_chars:]


# library: jitlab.modules.memory.IsolatedContextMemory
@dataclass
class IsolatedContextMemory:
    """M (context isolation): each sub-task (``ctx.state['subtask']``) sees only its own history plus
    the results handed to it (``ctx.state['context_results']``), never its siblings' steps."""
    max_chars: int = field(default=2000, metadata={"help": "characters of the sub-task's own history shown"})
    result_chars: int = field(default=160, metadata={"help": "characters per handed-in result"})

    def reset(self, ctx: Ctx) -> None:
        self.by_task: dict[str, list[Event]] = {}
        self.latest = ""

    def update(self, event: Event, ctx: Ctx) -> None:
        self.by_task.setdefault(str(ctx.state.get("subtask", "root")), []).append(event)
        if event.kind in ("observation", "tool_result"):
            self.latest = event.content

    def view(self, ctx: Ctx) -> View:
        sid = str(ctx.state.get("subtask", "root"))
        own = self.by_task.get(sid, [])
        results = ctx.state.get("context_results") or {}
        lines = []
        if results:
            lines.append("Results handed to this sub-task:")
            lines += [f"* {clip(k, 60)}: {clip(v, self.result_chars)}" for k, v in results.items()]
        lines.append(f"History of sub-task {sid}:" if own else f"Sub-task {sid} starts now.")
        if own:
            lines.append(history_text(own, self.max_chars))
        if not own or own[-1].kind != "observation":
            lines.append(f"Current observation: {self.latest}")
        return View("\n".join(lines), list(own), {"subtask": sid, "tasks": len(self.by_task)})


# ---- the harness's own code ----

class Memory(IsolatedContextMemory):
    pass
