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
    """Render events as a transcript, keeping the most recent ``max_chars`` characters."""
    lines = []
    for e in events:
        prefix = {"observation": "Observation", "action": "Action", "tool_result": "Result"}.get(e.kind, e.kind.title())
        lines.append(f"{prefix}: {e.content.strip()}")
    text = "\n".join(lines)
    return text if len(text) <= max_chars else "...\n" + text[-max_chars:]


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
