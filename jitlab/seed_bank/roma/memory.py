"""roma memory: context isolation per sub-task."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip
from jitlab.protocol import Ctx, Event, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.basic.history_text
def history_text(events: list[Event], max_chars: int) -> str:
    """Render events as a transcript of at most ``max_chars`` characters (plus a ``...`` line when cut).

    Old lines are dropped in whole chunks, not one character at a time: the transcript starts at the first
    line at or after a fixed cut point (a multiple of ``max_chars // 2`` characters into the full transcript),
    and the cut point moves only when the transcript outgrows it. So the text keeps the same start for
    several steps and only grows at its end, which a backbone's prefix (KV) cache reuses; a tail cut would
    shift it every step and make every call re-read it all. Shown: between about half and all of
    ``max_chars``. A single line longer than ``max_chars`` falls back to keeping the last characters."""
    lines = []
    for e in events:
        prefix = {"observation": "Observation", "action": "Action", "tool_result": "Result"}.get(e.kind, e.kind.title())
        lines.append(f"{prefix}: {e.content.strip()}")
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text
    chunk = max(1, max_chars // 2)
    cut = -(-(len(text) - max_chars) // chunk) * chunk   # the smallest cut point that leaves <= max_chars
    offset = 0
    for line in lines:
        if offset >= cut:
            return "...\n" + text[offset:]
        offset += len(line) + 1
    return "...\n" + text[-max_chars:]


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
