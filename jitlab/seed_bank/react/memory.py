"""ReAct memory: the full interaction history."""
from __future__ import annotations

from dataclasses import dataclass, field

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


# library: jitlab.modules.basic.FullHistory
@dataclass
class FullHistory:
    """M: keep every event; the view is the whole transcript (tail-capped to fit the context)."""
    max_chars: int = field(default=3000, metadata={"help": "characters of transcript shown (most recent kept)"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)

    def view(self, ctx: Ctx) -> View:
        return View(history_text(self.events, self.max_chars), list(self.events))


# ---- the harness's own code ----

class Memory(FullHistory):
    pass
