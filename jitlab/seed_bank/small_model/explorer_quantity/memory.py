"""explorer memory: the full history (old lines dropped in whole chunks: a stable prefix)."""
from __future__ import annotations

from dataclasses import dataclass, field

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


# library: jitlab.modules.basic.FullHistory
@dataclass
class FullHistory:
    """M: keep every event; the view is the whole transcript (capped to fit the context, old lines dropped in
    whole chunks so the view's start stays put and a prefix cache can reuse it; see ``history_text``)."""
    max_chars: int = field(default=3000, metadata={"help": "characters of transcript shown (most recent kept; old "
                                                           "lines dropped in chunks of half of it)"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)

    def view(self, ctx: Ctx) -> View:
        return View(history_text(self.events, self.max_chars), list(self.events))


# ---- the harness's own code ----

@dataclass
class Memory(FullHistory):
    max_chars: int = field(default=2000, metadata={"help": "characters of transcript shown (old lines dropped in "
                                                           "chunks of half of it: a stable prefix)"})
