"""trapdoor memory: fact graph (entity -> relation -> value, with sources) + orchestrator transcript."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitlab.harnesskit import clip
from jitlab.protocol import Ctx, Event, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.case_studies._FACT_SEE
_FACT_SEE = re.compile(r"\byou (?:see|find|notice)\s+(.{2,80})$", re.I)


# library: jitlab.modules.case_studies._FACT_IS
_FACT_IS = re.compile(r"^(?:the |a |an )?([\w' -]{2,40}?)\s+(is|are|has|have|contains|holds|leads to)\s+(.{2,80})$", re.I)


# library: jitlab.modules.case_studies._FACT_COLON
_FACT_COLON = re.compile(r"^([\w' -]{2,40}):\s*(.{1,80})$")


# library: jitlab.modules.case_studies.extract_facts
def extract_facts(text: str, source: str, max_facts: int = 6) -> list[tuple[str, str, str, str]]:
    """(subject, relation, object, source) triples read leniently from prose: "X is/has/contains Y",
    "X: Y" lines, "you see Y". Anything else yields nothing."""
    out = []
    for part in re.split(r"[.;\n]+", str(text)):
        part = part.strip()
        if not part:
            continue
        m = _FACT_SEE.search(part)
        if m:
            out.append(("you", "see", clip(m.group(1), 60), source))
        elif (m := _FACT_IS.match(part)) and m.group(1).strip().lower() not in ("it", "there", "this", "that"):
            out.append((m.group(1).strip().lower(), m.group(2).lower(), clip(m.group(3), 60), source))
        elif m := _FACT_COLON.match(part):
            out.append((m.group(1).strip().lower(), "is", clip(m.group(2), 60), source))
        if len(out) >= max_facts:
            break
    return out


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


# library: jitlab.modules.case_studies.FactGraphMemory
@dataclass
class FactGraphMemory:
    """M (Trapdoor fact graph): the orchestrator's transcript plus a fact graph (entity -> relation -> value, each edge
    with its source). Facts come from the orchestrator (``ctx.state['facts_inbox']``: what it extracted
    from a sub-agent's report and trajectory) and from the orchestrator's own observations."""
    max_chars: int = field(default=1200, metadata={"help": "characters of recent transcript shown"})
    max_facts: int = field(default=12, metadata={"help": "facts shown (most recent kept)"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.graph: dict[str, dict[str, tuple[str, str]]] = {}   # subject -> {relation object: (relation, source)}
        self.edges: list[tuple[str, str, str, str]] = []

    def add(self, fact: tuple) -> None:
        subject, relation, obj, source = fact
        key = f"{relation} {obj}"
        if key not in self.graph.setdefault(subject, {}):
            self.graph[subject][key] = (relation, source)
            self.edges.append((subject, relation, obj, source))

    def drain(self, ctx: Ctx) -> None:
        inbox = ctx.state.get("facts_inbox") or []
        while inbox:
            self.add(tuple(inbox.pop(0)))

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        self.drain(ctx)
        if event.kind in ("observation", "tool_result"):
            for fact in extract_facts(event.content, f"s{event.step}", 3):
                self.add(fact)

    def view(self, ctx: Ctx) -> View:
        self.drain(ctx)
        shown = self.edges[-self.max_facts:]
        text = ("Fact graph:\n" + "\n".join(f"- {s} --{r}--> {o} [{src}]" for s, r, o, src in shown) + "\n") if shown else ""
        return View(text + history_text(self.events, self.max_chars), list(self.events), {"facts": list(shown)})


# ---- the harness's own code ----

class Memory(FactGraphMemory):
    pass
