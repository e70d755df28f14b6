"""gearbox memory: phase-aware memory (transcript / findings+recent / findings schema)."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip, is_failure
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


# library: jitlab.modules.case_studies._names
def _names(csv: str) -> list[str]:
    return [n.strip() for n in str(csv).split(",") if n.strip()]


# library: jitlab.modules.case_studies._last_seen
def _last_seen(events: list[Event]) -> str:
    return next((e.content for e in reversed(events) if e.kind in ("observation", "tool_result")), "")


# library: jitlab.modules.case_studies.PhaseAwareMemory
@dataclass
class PhaseAwareMemory:
    """M (Gearbox phase-aware schema): one event store shown in a schema chosen by the phase register: ``transcript`` (the
    recent turns), ``findings+recent`` (one line per informative result, then the last turns) or
    ``findings`` (the evidence only). ``view.data['schema']`` says which was used."""
    schemas: str = field(default="explore:transcript,verify:findings+recent,answer:findings",
                         metadata={"help": "phase:schema pairs (schemas: transcript, findings+recent, findings)"})
    max_chars: int = field(default=1800, metadata={"help": "characters of transcript in the transcript schema"})
    recent_chars: int = field(default=500, metadata={"help": "characters of recent turns beside the findings"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.findings: list[str] = []

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        if _informative(event):
            self.findings.append(f"[s{event.step}] {clip(event.content, 120)}")

    def schema(self, phase: str) -> str:
        table = dict(p.split(":", 1) for p in _names(self.schemas) if ":" in p)
        return table.get(phase, "transcript").strip()

    def view(self, ctx: Ctx) -> View:
        phase = str(ctx.state.get("phase", ""))
        schema = self.schema(phase)
        findings = "Findings:\n" + ("\n".join(self.findings[-8:]) or "(none yet)")
        if schema == "findings":
            text = f"{findings}\nLatest: {clip(_last_seen(self.events), 300)}"
        elif schema == "findings+recent":
            text = f"{findings}\nRecent:\n{history_text(self.events, self.recent_chars)}"
        else:
            text = history_text(self.events, self.max_chars)
        return View(text, list(self.events), {"schema": schema, "phase": phase})


# ---- the harness's own code ----

class Memory(PhaseAwareMemory):
    pass
