"""turnstile memory: evidence checklist data store (buckets filled with source ids)."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip, is_failure, tokens
from jitlab.protocol import Ctx, Event, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.case_studies._informative
def _informative(event: Event) -> bool:
    """A result worth keeping as evidence: an observation after an action that did not fail."""
    return event.kind in ("observation", "tool_result") and event.step > 0 and not is_failure(event.content)


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


# library: jitlab.modules.case_studies._overlap
def _overlap(a: str, b: str) -> int:
    return len(set(tokens(a)) & set(tokens(b)))


# library: jitlab.modules.case_studies.EvidenceChecklistMemory
@dataclass
class EvidenceChecklistMemory:
    """M (Turnstile evidence checklist): the transcript plus a data store of evidence buckets (``ctx.state['checklist']``):
    each informative result fills the open bucket it matches best (else the first open one), with its
    source id (``s<step>``); ``ctx.state['checklist_complete']`` turns true when every bucket is filled."""
    max_chars: int = field(default=1800, metadata={"help": "characters of transcript shown (most recent kept)"})
    fallback: str = field(default="the result that answers the task",
                          metadata={"help": "';'-separated checklist used when no planner wrote one"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        if not _informative(event):
            return
        checklist = ctx.state.setdefault("checklist", [{"item": i.strip(), "done": False, "evidence": "", "source": ""}
                                                       for i in self.fallback.split(";") if i.strip()])
        open_items = [c for c in checklist if not c["done"]]
        if open_items:
            action = next((e.content for e in reversed(self.events) if e.kind == "action"), "")
            best = max(open_items, key=lambda c: _overlap(c["item"], action + " " + event.content))
            best.update(done=True, evidence=clip(event.content, 120), source=f"s{event.step}")
        ctx.state["checklist_complete"] = bool(checklist) and all(c["done"] for c in checklist)

    def view(self, ctx: Ctx) -> View:
        checklist = ctx.state.get("checklist") or []
        lines = [f"[{'x' if c['done'] else ' '}] {c['item']}" + (f" <- {c['source']}: {c['evidence']}" if c["done"] else "")
                 for c in checklist]
        text = ("Evidence checklist:\n" + "\n".join(lines) + "\n" if lines else "") + history_text(self.events, self.max_chars)
        return View(text, list(self.events), {"checklist": [dict(c) for c in checklist]})


# ---- the harness's own code ----

class Memory(EvidenceChecklistMemory):
    pass
