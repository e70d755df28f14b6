"""deepagent memory: three-tier memory (episodic, working, tool) produced by folds."""
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


# library: jitlab.modules.memory._last_observation
def _last_observation(events: list[Event]) -> str:
    return next((e.content for e in reversed(events) if e.kind in ("observation", "tool_result")), "")


# library: jitlab.modules.memory.ThreeTierMemory
@dataclass
class ThreeTierMemory:
    """M (DeepAgent): episodic, working and tool memory produced by a fold (on a <fold> marker, every
    k steps or when the transcript grows), after which reasoning restarts from the folded memory."""
    fold_every: int = field(default=6, metadata={"help": "fold every k steps (0: only on marker or length)"})
    trigger_chars: int = field(default=2000, metadata={"help": "also fold when the unfolded transcript is longer"})
    max_new_tokens: int = field(default=80, metadata={"help": "tokens per fold"})
    tier_chars: int = field(default=200, metadata={"help": "characters per tier entry"})
    max_episodes: int = field(default=5, metadata={"help": "episodic entries shown"})
    max_chars: int = field(default=2000, metadata={"help": "characters of unfolded transcript shown"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []
        self.start = 0
        self.episodic: list[str] = []
        self.working = ""
        self.tool_note = ""
        self.tools: dict[str, dict] = {}    # name -> {calls, last}
        self.last_tool: str | None = None
        self.last_fold_step = 0
        self.folds = 0

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)
        if event.kind == "action":
            self.last_tool = str(event.data.get("tool", "action"))
            self.tools.setdefault(self.last_tool, {"calls": 0, "last": ""})["calls"] += 1
        elif event.kind in ("observation", "tool_result") and self.last_tool:
            self.tools[self.last_tool]["last"] = clip(event.content, 80)
            self.last_tool = None

    def _due(self, ctx: Ctx) -> bool:
        fresh = self.events[self.start:]
        if len(fresh) < 3 or ctx.step <= self.last_fold_step:
            return False
        if ctx.state.pop("fold_requested", False):
            return True
        return _overdue(fresh, ctx.step, self.last_fold_step, self.fold_every, self.trigger_chars)

    def fold(self, ctx: Ctx) -> None:
        fresh = self.events[self.start:]
        prompt = render_prompt(ctx.prompts, "tier_fold", task=ctx.task.public(), episodic=self.episodic,
                               working=self.working, transcript=history_text(fresh, 1500))
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
        parts = sections(reply, ("Episodic", "Working", "Tool"))
        verified, tried = _heuristic_facts(fresh)
        steps = [e.step for e in fresh if e.kind == "action"]
        span = f"steps {steps[0]}-{steps[-1]}" if steps else "start"
        episode = parts.get("Episodic") or f"{', '.join(tried[-4:]) or 'no actions'}" + (f"; progress: {verified[-1]}" if verified else "")
        self.episodic.append(f"{span}: {clip(episode, self.tier_chars)}")
        self.working = clip(parts.get("Working") or _last_observation(fresh), self.tier_chars)
        self.tool_note = clip(parts.get("Tool", ""), self.tier_chars)
        self.start = max(len(self.events) - 1, 0)
        self.last_fold_step = ctx.step
        self.folds += 1

    def view(self, ctx: Ctx) -> View:
        if self._due(ctx):
            self.fold(ctx)
        ctx.state.pop("fold_requested", None)
        lines = []
        if self.episodic:
            lines.append("Episodic memory:")
            lines += [f"{i + 1}. {e}" for i, e in enumerate(self.episodic[-self.max_episodes:])]
            lines.append(f"Working memory: {self.working}")
            tools = "; ".join(f"{k}: {v['calls']} calls, last result: {v['last']}" for k, v in self.tools.items())
            lines.append(f"Tool memory: {tools}{' | ' + self.tool_note if self.tool_note else ''}")
            lines.append("Since the last fold:")
        lines.append(history_text(self.events[self.start:], self.max_chars))
        return View("\n".join(lines), self.events[self.start:], {"folds": self.folds})


# ---- the harness's own code ----

class Memory(ThreeTierMemory):
    pass
