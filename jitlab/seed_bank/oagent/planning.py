"""oagent planner: plan with periodic revision."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip, list_items, render_prompt, user
from jitlab.protocol import Ctx, Decision, Directive, Observation, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.planning._FALLBACK
_FALLBACK = "make progress toward the task goal"


# library: jitlab.modules.planning._view_tail
def _view_tail(view: View, n: int = 800) -> str:
    return view.text[-n:]


# library: jitlab.modules.planning.RoadmapPlanner
@dataclass
class RoadmapPlanner:
    """P (Plan-and-Execute): a linear roadmap written once, followed step by step, and rewritten
    every k steps or when it runs out."""
    max_items: int = field(default=5, metadata={"help": "plan steps kept"})
    patience: int = field(default=3, metadata={"help": "env steps spent on a plan step before moving on without reward"})
    replan_every: int = field(default=6, metadata={"help": "rewrite the remaining plan every k steps (0: only when it runs out)"})
    max_new_tokens: int = field(default=64, metadata={"help": "tokens per plan/replan call"})
    item_chars: int = field(default=80, metadata={"help": "characters per plan step"})

    def reset(self, ctx: Ctx) -> None:
        self.todo: list[str] = []
        self.done: list[str] = []
        self.count = 0
        self.last_plan_step = 0
        self.plans = 0

    def _write(self, view: View, ctx: Ctx, kind: str) -> None:
        prompt = render_prompt(ctx.prompts, kind, task=ctx.task.public(), view=_view_tail(view),
                               done=self.done[-5:], todo=self.todo, max_items=self.max_items)
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
        items = [clip(i, self.item_chars) for i in list_items(reply, self.max_items)]
        if items:
            self.todo, self.count = items, 0
        elif not self.todo:
            self.todo = [_FALLBACK]
        self.last_plan_step = ctx.step
        self.plans += 1

    def plan(self, view: View, ctx: Ctx) -> Directive:
        if self.plans == 0:
            self._write(view, ctx, "plan")
        elif not self.todo or (self.replan_every and ctx.step - self.last_plan_step >= self.replan_every):
            self._write(view, ctx, "replan")
        ctx.state["plan_done"] = not self.todo
        current = self.todo[0] if self.todo else _FALLBACK
        later = "; ".join(self.todo[1:3])
        text = f"Plan step {len(self.done) + 1}: {current}" + (f" (then: {later})" if later else "")
        return Directive(text, {"current": current, "todo": list(self.todo), "done": list(self.done)})

    def post_feedback(self, ctx: Ctx, decision: Decision, obs: Observation) -> None:
        if not self.todo:
            return
        self.count += 1
        if obs.reward > 0 or self.count >= self.patience:
            self.done.append(self.todo.pop(0))
            self.count = 0


# ---- the harness's own code ----

class Planner(RoadmapPlanner):
    pass
