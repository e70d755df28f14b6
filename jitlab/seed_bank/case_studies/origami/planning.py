"""origami planner: subtasks in order with a step budget each, then aggregation."""
from __future__ import annotations

from dataclasses import dataclass, field

from jitlab.harnesskit import clip, parse_subtasks, render_prompt, user
from jitlab.protocol import Ctx, Decision, Directive, Observation, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.case_studies.SubtaskTreePlanner
@dataclass
class SubtaskTreePlanner:
    """P (Origami subtask tree): decomposes the task once into subtasks, each worked in its own context with a step
    budget; moves on when a step is rewarded or the budget is spent, then asks for aggregation.
    Writes ``ctx.state['subtask']`` ({id, text}; id 0 = aggregation) as soon as it moves on."""
    max_items: int = field(default=3, metadata={"help": "subtasks per task"})
    subtask_steps: int = field(default=3, metadata={"help": "env steps per subtask before moving on without reward"})
    max_new_tokens: int = field(default=80, metadata={"help": "tokens for the decomposition call"})

    def reset(self, ctx: Ctx) -> None:
        self.items: list[str] = []
        self.index = self.spent = 0
        self.written = False

    def current(self, ctx: Ctx) -> None:
        ctx.state["subtask"] = ({"id": self.index + 1, "text": self.items[self.index]} if self.index < len(self.items)
                                else {"id": 0, "text": "aggregate the subtasks' results"})

    def on_init(self, ctx: Ctx, obs: Observation) -> None:
        # before the first view: the memory files the opening observation under subtask 1
        self.decompose(ctx)

    def decompose(self, ctx: Ctx) -> None:
        prompt = render_prompt(ctx.prompts, "decompose", task=ctx.task.public(), goal=ctx.task.description,
                               max_items=self.max_items)
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.max_new_tokens).text
        self.items = [clip(t, 80) for t, _ in parse_subtasks(reply, self.max_items)] or ["make progress toward the task goal"]
        self.written = True
        self.current(ctx)

    def plan(self, view: View, ctx: Ctx) -> Directive:
        if not self.written:
            self.decompose(ctx)
        sub = ctx.state["subtask"]
        text = (f"Subtask {sub['id']}/{len(self.items)}: {sub['text']}" if sub["id"] else
                "All subtasks are folded: aggregate their results and finish the task.")
        return Directive(text, {"subtask": dict(sub), "subtasks": list(self.items)})

    def post_feedback(self, ctx: Ctx, decision: Decision, obs: Observation) -> None:
        if self.index >= len(self.items):
            return
        self.spent += 1
        if obs.reward > 0 or self.spent >= self.subtask_steps:
            self.index, self.spent = self.index + 1, 0
            self.current(ctx)


# ---- the harness's own code ----

class Planner(SubtaskTreePlanner):
    pass
