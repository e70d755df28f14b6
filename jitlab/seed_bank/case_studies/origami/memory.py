"""origami memory: isolated subtask contexts; fold replaces only the active one by an artifact."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip, is_failure, meaningful, render_prompt, user
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


# library: jitlab.modules.case_studies._informative
def _informative(event: Event) -> bool:
    """A result worth keeping as evidence: an observation after an action that did not fail."""
    return event.kind in ("observation", "tool_result") and event.step > 0 and not is_failure(event.content)


# library: jitlab.modules.case_studies.HierarchicalFoldMemory
@dataclass
class HierarchicalFoldMemory:
    """M (Origami fold of active context): each subtask works in an isolated active context. When the planner moves on
    (``ctx.state['subtask']`` changes), a fold step replaces only the active working context by a short
    artifact (one backbone call; the last informative result if the reply is empty); the full
    trajectories and the earlier artifacts are kept unchanged. The view: the artifacts of folded subtasks,
    the active context, the latest observation."""
    fold_tokens: int = field(default=48, metadata={"help": "tokens for a fold summary"})
    active_chars: int = field(default=1200, metadata={"help": "characters of the active context shown"})

    def reset(self, ctx: Ctx) -> None:
        self.active: list[Event] = []
        self.active_id = None
        self.trajectories: dict = {}
        self.artifacts: dict = {}
        self.folds = 0
        self.latest = self.subtask_text = ""

    def update(self, event: Event, ctx: Ctx) -> None:
        self.active.append(event)
        self.trajectories.setdefault(self.active_id, []).append(event)
        if event.kind in ("observation", "tool_result"):
            self.latest = event.content

    def fold(self, ctx: Ctx) -> None:
        """Replace the active context by its artifact; nothing else changes."""
        steps = history_text(self.active, 800)
        prompt = render_prompt(ctx.prompts, "fold_context", task=ctx.task.public(),
                               subtask=(self.subtask_text or "the previous subtask"), steps=steps)
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.fold_tokens).text
        informative = [e.content for e in self.active if _informative(e)]
        summary = clip(reply, 200) if meaningful(reply) else clip(informative[-1] if informative else "no progress", 200)
        self.artifacts[self.active_id] = summary
        self.active = []
        self.folds += 1

    def view(self, ctx: Ctx) -> View:
        sub = ctx.state.get("subtask") or {}
        if sub.get("id") != self.active_id:
            if self.active_id is not None and self.active:
                self.fold(ctx)
            elif self.active_id is None:  # the opening observation belongs to the first subtask
                self.trajectories[sub.get("id")] = self.trajectories.pop(None, [])
            self.active_id = sub.get("id")
        self.subtask_text = sub.get("text", "")
        folded = "\n".join(f"- subtask {k}: {v}" for k, v in self.artifacts.items())
        text = (f"Folded subtasks:\n{folded}\n" if folded else "") + "Active context:\n" + \
            (history_text(self.active, self.active_chars) or "(new subtask)") + f"\nNow: {clip(self.latest, 300)}"
        return View(text, list(self.active), {"artifacts": dict(self.artifacts), "active": self.active_id, "folds": self.folds})


# ---- the harness's own code ----

class Memory(HierarchicalFoldMemory):
    pass
