"""pegboard memory: candidate x clue evidence matrix, a source id per cell."""
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


# library: jitlab.modules.case_studies.EvidenceMatrixMemory
@dataclass
class EvidenceMatrixMemory:
    """M (Pegboard evidence matrix): every observation gets a source id (``s<step>``) and becomes cells of a candidate x clue
    evidence matrix: for each candidate it mentions (or the single candidate ``answer``) the still empty
    clue cell it matches best; a cell keeps its first evidence and that source id. ``ctx.state['coverage']`` is the
    share of cells filled. Axes come from ``ctx.state['clues']`` / ``['matrix_candidates']`` (the planner)."""
    max_chars: int = field(default=1200, metadata={"help": "characters of recent transcript shown"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.sources: dict[str, str] = {}
        self.cells: dict[tuple[str, str], dict] = {}
        self.unsorted: list[str] = []

    def axes(self, ctx: Ctx) -> tuple[list[str], list[str]]:
        clues = list(ctx.state.get("clues") or [ctx.task.description[:80]])
        return list(ctx.state.get("matrix_candidates") or ["answer"]), clues

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        if event.kind not in ("observation", "tool_result"):
            return
        sid = f"s{event.step}" if f"s{event.step}" not in self.sources else f"s{event.step}.{len(self.sources)}"
        self.sources[sid] = clip(event.content, 200)
        if not _informative(event):
            return
        candidates, clues = self.axes(ctx)
        placed = False
        for cand in candidates:
            if cand != "answer" and not _overlap(cand, event.content):
                continue
            empty = [q for q in clues if (cand, q) not in self.cells and _overlap(q, event.content)]
            if empty:
                best = max(empty, key=lambda q: _overlap(q, event.content))
                self.cells[(cand, best)] = {"value": clip(event.content, 80), "source": sid}
                placed = True
        if not placed:
            self.unsorted.append(sid)
        ctx.state["matrix"] = {f"{c} | {q}": dict(v) for (c, q), v in self.cells.items()}
        ctx.state["coverage"] = len(self.cells) / max(1, len(candidates) * len(clues))

    def view(self, ctx: Ctx) -> View:
        candidates, clues = self.axes(ctx)
        rows = [f"- {c}: " + "; ".join(f"{q[:30]}={self.cells[(c, q)]['value'][:40]} [{self.cells[(c, q)]['source']}]"
                                       if (c, q) in self.cells else f"{q[:30]}=?" for q in clues) for c in candidates]
        text = f"Evidence matrix (coverage {ctx.state.get('coverage', 0.0):.0%}):\n" + "\n".join(rows) + "\n"
        return View(text + history_text(self.events, self.max_chars), list(self.events),
                    {"cells": {f"{c} | {q}": dict(v) for (c, q), v in self.cells.items()}})


# ---- the harness's own code ----

class Memory(EvidenceMatrixMemory):
    pass
