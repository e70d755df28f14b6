"""hiagent planner: subgoal declaration."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitlab.harnesskit import clip, render_prompt, sections, user
from jitlab.protocol import Ctx, Decision, Directive, Observation, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.planning._FALLBACK
_FALLBACK = "make progress toward the task goal"


# library: jitlab.modules.planning._view_tail
def _view_tail(view: View, n: int = 800) -> str:
    return view.text[-n:]


# library: jitlab.modules.planning.SubgoalPlanner
@dataclass
class SubgoalPlanner:
    """P (HiAgent): declare a subgoal, pursue it until it is reached (reward) or patience runs out,
    then declare the next one. The subgoal lives in ``ctx.state['subgoal']`` for the memory."""
    patience: int = field(default=3, metadata={"help": "env steps per subgoal before it is abandoned"})
    max_new_tokens: int = field(default=24, metadata={"help": "tokens per subgoal declaration"})
    subgoal_chars: int = field(default=80, metadata={"help": "characters per subgoal"})

    def reset(self, ctx: Ctx) -> None:
        self.declared = 0
        ctx.state.pop("subgoal", None)

    def declare(self, view: View, ctx: Ctx) -> dict:
        prompt = render_prompt(ctx.prompts, "subgoal", task=ctx.task.public(), view=_view_tail(view))
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
        text = sections(reply, ("Subgoal",)).get("Subgoal", "")
        if not text:
            lines = [re.sub(r"^\s*(thought|action)\s*[:：]\s*", "", l, flags=re.I) for l in reply.splitlines() if l.strip()]
            text = lines[0] if lines and len(lines[0].split()) >= 2 else _FALLBACK
        self.declared += 1
        sg = {"id": self.declared, "text": clip(text, self.subgoal_chars), "start": ctx.step, "steps": 0, "done": False}
        ctx.state["subgoal"] = sg
        return sg

    def plan(self, view: View, ctx: Ctx) -> Directive:
        sg = ctx.state.get("subgoal")
        if not sg or sg.get("done"):
            sg = self.declare(view, ctx)
        return Directive(f"Current subgoal: {sg['text']}", dict(sg))

    def post_feedback(self, ctx: Ctx, decision: Decision, obs: Observation) -> None:
        sg = ctx.state.get("subgoal")
        if not sg or sg.get("done"):
            return
        sg["steps"] += 1
        if obs.reward > 0 or sg["steps"] >= self.patience:
            sg["done"] = True


# ---- the harness's own code ----

class Planner(SubgoalPlanner):
    pass
