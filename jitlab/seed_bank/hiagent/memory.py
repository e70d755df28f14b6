"""hiagent memory: subgoal working memory, collapsed to a summary when the subgoal ends."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip, meaningful, render_prompt, step_pairs, user
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


# library: jitlab.modules.memory.SubgoalWorkingMemory
@dataclass
class SubgoalWorkingMemory:
    """M (HiAgent): full action-observation pairs for the current subgoal only; when a subgoal ends
    they collapse into one summary line."""
    llm_summary: bool = field(default=True, metadata={"help": "let the backbone summarize a finished subgoal (else heuristic)"})
    max_new_tokens: int = field(default=40, metadata={"help": "tokens per subgoal summary"})
    summary_chars: int = field(default=160, metadata={"help": "characters per finished-subgoal summary"})
    max_finished: int = field(default=6, metadata={"help": "most recent finished subgoals shown"})
    max_chars: int = field(default=2000, metadata={"help": "characters of working memory shown"})

    def reset(self, ctx: Ctx) -> None:
        self.finished: list[str] = []
        self.working: list[Event] = []
        self.goal: dict | None = None
        self.collapsed_id = None
        self.latest = ""

    def update(self, event: Event, ctx: Ctx) -> None:
        sg = ctx.state.get("subgoal") or {}
        if self.goal is not None and sg.get("id") != self.goal.get("id") and self.collapsed_id != self.goal.get("id"):
            self.collapse(ctx, self.goal, done=False)
        self.goal = dict(sg) if sg else None
        self.working.append(event)
        if event.kind in ("observation", "tool_result"):
            self.latest = event.content
            if sg.get("done") and self.collapsed_id != sg.get("id"):
                self.collapse(ctx, sg, done=True)

    def collapse(self, ctx: Ctx, goal: dict, done: bool) -> None:
        pairs = [p for p in step_pairs(self.working) if p["action"]]
        summary = ""
        if self.llm_summary and pairs:
            prompt = render_prompt(ctx.prompts, "subgoal_summary", task=ctx.task.public(), subgoal=goal.get("text", ""),
                                   transcript=history_text(self.working, 1200))
            reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
            summary = clip(reply, self.summary_chars) if meaningful(reply) else ""
        if not summary:
            summary = (f"did {', '.join(clip(p['action'], 30) for p in pairs[-4:])}; ended with: "
                       f"{clip(pairs[-1]['observation'], 70)}") if pairs else "no actions"
        status = "done" if done else "left"
        self.finished.append(f"Subgoal '{clip(goal.get('text', ''), 60)}' ({status}): {summary}")
        self.working = []
        self.collapsed_id = goal.get("id")

    def view(self, ctx: Ctx) -> View:
        sg = ctx.state.get("subgoal") or {}
        lines = []
        if self.finished:
            lines.append("Finished subgoals:")
            lines += [f"{i + 1}. {s}" for i, s in enumerate(self.finished[-self.max_finished:])]
        if sg and not sg.get("done"):
            lines.append(f"Current subgoal: {sg.get('text', '')}")
        if self.working:
            lines.append("Working memory:")
            lines.append(history_text(self.working, self.max_chars))
        if not self.working or self.working[-1].kind != "observation":
            lines.append(f"Current observation: {self.latest}")
        return View("\n".join(lines), list(self.working), {"finished": len(self.finished)})


# ---- the harness's own code ----

class Memory(SubgoalWorkingMemory):
    pass
