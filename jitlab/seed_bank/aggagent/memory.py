"""aggagent memory: isolated rollout histories."""
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
