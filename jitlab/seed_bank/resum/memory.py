"""resum memory: periodic summary (evidence, gaps, next) + restart."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip, render_prompt, sections, step_pairs, user
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


# library: jitlab.modules.memory._overdue
def _overdue(fresh: list[Event], step: int, last_step: int, every: int, limit_chars: int) -> bool:
    """Compaction is due every ``every`` steps, or sooner when the fresh transcript outgrows ``limit_chars``."""
    if every and step - last_step >= every:
        return True
    return len(history_text(fresh, 10 ** 9)) > limit_chars


# library: jitlab.modules.memory._step_line
def _step_line(pair: dict, obs_chars: int = 80) -> str:
    if not pair["action"]:
        return f"start: {clip(pair['observation'], obs_chars)}"
    return f"{clip(pair['action'], 40)} -> {clip(pair['observation'], obs_chars)}"


# library: jitlab.modules.memory._heuristic_facts
def _heuristic_facts(events: list[Event], max_items: int = 4) -> tuple[list[str], list[str]]:
    """(verified evidence, actions tried): observations that came with a reward count as verified."""
    pairs = step_pairs(events)
    verified = [_step_line(p) for p in pairs if p["reward"] > 0][-max_items:]
    tried = [clip(p["action"], 40) for p in pairs if p["action"]][-max_items * 2:]
    return verified, tried


# library: jitlab.modules.memory.PeriodicSummaryMemory
@dataclass
class PeriodicSummaryMemory:
    """M (ReSum): every k steps summarize verified evidence, gaps and next steps, then restart the
    context from question + summary (plus the latest observation)."""
    every_k: int = field(default=5, metadata={"help": "summarize every k steps (0: only on length)"})
    trigger_chars: int = field(default=2000, metadata={"help": "also summarize when the unsummarized transcript is longer"})
    restart: bool = field(default=True, metadata={"help": "True: drop summarized events (ReSum restart); "
                                                          "False: keep keep_recent events under the summary"})
    keep_recent: int = field(default=4, metadata={"help": "events kept verbatim below the summary when restart=False"})
    max_new_tokens: int = field(default=64, metadata={"help": "tokens the backbone may write per summary"})
    section_chars: int = field(default=160, metadata={"help": "characters kept per summary section"})
    max_chars: int = field(default=2500, metadata={"help": "characters of recent transcript shown"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.start = 0                 # first event not yet covered by a summary
        self.summary = ""
        self.verified: list[str] = []
        self.tried: list[str] = []
        self.last_summary_step = 0
        self.summaries = 0

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)

    def _due(self, ctx: Ctx) -> bool:
        fresh = self.events[self.start:]
        if ctx.step <= self.last_summary_step or len(fresh) < 3:
            return False
        return _overdue(fresh, ctx.step, self.last_summary_step, self.every_k, self.trigger_chars)

    def summarize(self, ctx: Ctx) -> None:
        fresh = self.events[self.start:]
        prompt = render_prompt(ctx.prompts, "summary", task=ctx.task.public(), summary=self.summary,
                               transcript=history_text(fresh, self.max_chars))
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
        verified, tried = _heuristic_facts(fresh)
        self.verified = (self.verified + verified)[-6:]
        self.tried = (self.tried + tried)[-8:]
        parts = sections(reply, ("Evidence", "Gaps", "Next"))
        lines = [f"Verified: {'; '.join(self.verified)}" if self.verified else "Verified: nothing yet",
                 f"Tried: {', '.join(self.tried)}"]
        lines += [f"{k}: {clip(v, self.section_chars)}" for k, v in parts.items()]
        self.summary = "\n".join(lines)
        self.start = max(len(self.events) - 1, 0)   # the latest observation stays verbatim
        self.last_summary_step = ctx.step
        self.summaries += 1

    def view(self, ctx: Ctx) -> View:
        if self._due(ctx):
            self.summarize(ctx)
        begin = self.start if self.restart else max(0, self.start - self.keep_recent)
        recent = self.events[begin:]
        transcript = history_text(recent, self.max_chars)
        text = f"Progress summary:\n{self.summary}\n\nRecent:\n{transcript}" if self.summary else transcript
        return View(text, recent, {"summary": self.summary, "summaries": self.summaries})


# ---- the harness's own code ----

class Memory(PeriodicSummaryMemory):
    pass
