"""aggagent memory: isolated rollout histories."""
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


# library: jitlab.modules.memory.RolloutHistories
@dataclass
class RolloutHistories:
    """M (AggAgent): a shared transcript plus one isolated history per rollout (each rollout sees its
    own earlier proposals, not the others'), so parallel rollouts stay independent."""
    k: int = field(default=3, metadata={"help": "rollout histories kept"})
    notes_shown: int = field(default=3, metadata={"help": "earlier proposals shown to each rollout"})
    max_chars: int = field(default=1200, metadata={"help": "characters of shared transcript shown (K+1 prompts "
                                                           "carry it every step, so it is kept short)"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.notes: list[list[str]] = [[] for _ in range(self.k)]

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        if event.kind == "action":
            for i, note in enumerate((ctx.state.pop("rollout_notes", None) or [])[: self.k]):
                self.notes[i].append(f"step {event.step}: {clip(note, 100)}")

    def view(self, ctx: Ctx) -> View:
        shared = history_text(self.events, self.max_chars)
        rollouts = []
        for i, notes in enumerate(self.notes):
            own = "\n".join(notes[-self.notes_shown:])
            rollouts.append(f"{shared}\nYour earlier proposals (rollout {i + 1}):\n{own}" if own else shared)
        return View(shared, list(self.events), {"rollouts": rollouts})


# ---- the harness's own code ----

class Memory(RolloutHistories):
    pass
