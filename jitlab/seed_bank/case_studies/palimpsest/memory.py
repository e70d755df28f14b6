"""palimpsest memory: memory of reusable artifacts and reasoning state."""
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


# library: jitlab.modules.case_studies.ArtifactMemory
@dataclass
class ArtifactMemory:
    """M (Palimpsest artifact store): a short transcript plus two stores: artifacts (each informative result keyed by the
    action that produced it, shown so it is reused instead of recomputed) and reasoning state (the latest
    thoughts)."""
    max_chars: int = field(default=1200, metadata={"help": "characters of recent transcript shown"})
    max_artifacts: int = field(default=6, metadata={"help": "artifacts shown (most recent kept)"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.artifacts: dict[str, dict] = {}
        self.thoughts: list[str] = []

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        if event.kind == "action" and event.data.get("thought"):
            self.thoughts.append(clip(event.data["thought"], 100))
        elif _informative(event):
            action = next((e.content for e in reversed(self.events) if e.kind == "action"), "")
            self.artifacts.pop(action, None)  # re-insert: the latest result of an action comes last
            self.artifacts[action] = {"result": clip(event.content, 160), "source": f"s{event.step}"}

    def view(self, ctx: Ctx) -> View:
        shown = list(self.artifacts.items())[-self.max_artifacts:]
        text = ("Artifacts (reuse, do not recompute):\n" + "\n".join(f"- {a} -> {v['result']}" for a, v in shown) + "\n"
                if shown else "")
        text += ("Reasoning so far: " + " | ".join(self.thoughts[-3:]) + "\n") if self.thoughts else ""
        return View(text + history_text(self.events, self.max_chars), list(self.events),
                    {"artifacts": dict(shown), "thoughts": self.thoughts[-3:]})


# ---- the harness's own code ----

class Memory(ArtifactMemory):
    pass
