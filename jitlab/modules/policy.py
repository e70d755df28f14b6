"""Capability policies (F): directive + view + registry in, the tools exposed now (in order) out.

    from jitlab.modules.policy import ToolSearch
    class CapabilityPolicy(ToolSearch): pass        # in a harness folder's tool_policy.py

Also here: ``SubAgent`` and the ``DELEGATE`` capability (AOrchestra). A sub-agent is created with an
instruction, a curated context and a tool subset, and runs a nested ReAct loop over the *same*
backbone handle (``ctx.llm``) with its own isolated history: each of its env actions is one step of
the outer episode (the environment is stepped by the trusted parent, never by harness code). It
finishes when it writes ``Finish: <report>``, after ``max_steps`` actions, or when the episode ends;
its report goes back to the coordinator. ``CoordinatorAction`` (jitlab.modules.action) drives it.

Caveats: tool search is lexical (TF-IDF overlap), no embeddings; on suites with one tool every
policy returns that tool. A policy never returns an empty list (it falls back to the registry).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitlab.modules.basic import FullRegistry, history_text, parse_react, to_decision
from jitlab.modules.text import clip, lexical_rank, render_prompt
from jitlab.protocol import Capability, Context, Ctx, Decision, Directive, Event, Observation, View

__all__ = ["FullRegistry", "ToolSearch", "CompletionGate", "AgentDelegation", "SubAgent", "DELEGATE"]

DELEGATE = Capability(
    "delegate", "Create a sub-agent for a sub-task: give it an instruction, the context it needs and the "
                "tools it may use; it acts until done and reports back.",
    {"type": "object", "properties": {"instruction": {"type": "string"}, "context": {"type": "string"},
                                      "tools": {"type": "array", "items": {"type": "string"}}},
     "required": ["instruction"]})


def _latest_observation(view: View) -> str:
    obs = next((e.content for e in reversed(view.events) if e.kind in ("observation", "tool_result")), "")
    return obs or view.text[-400:]


@dataclass
class ToolSearch:
    """F (DeepAgent tool search): rank the registry by relevance to the directive, the latest
    observation, the task and any query the action asked for (``ctx.state['tool_query']``); expose the top k."""
    top_k: int = field(default=3, metadata={"help": "tools exposed per step"})
    always: tuple = field(default=(), metadata={"help": "tool names always exposed (after the ranked ones)"})
    background_weight: float = field(default=0.1, metadata={"help": "weight of the task description in the ranking"})

    def reset(self, ctx: Ctx) -> None:
        self.last: list[str] = []

    def search(self, query: str, registry: list[Capability], k: int, background: str = "") -> list[Capability]:
        """The k tools most relevant to ``query``; ``background`` (the task description) only breaks
        near-ties. Stable: equal scores keep registry order."""
        docs = [f"{c.name.replace('_', ' ')} {c.description}" for c in registry]
        scores = [q + self.background_weight * b for q, b in zip(lexical_rank(query, docs), lexical_rank(background, docs), strict=True)]
        order = sorted(range(len(registry)), key=lambda i: -scores[i])
        return [registry[i] for i in order[:k]]

    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]:
        query = " ".join([str(ctx.state.get("tool_query", "")), directive.text, _latest_observation(view)[-300:]])
        chosen = self.search(query, list(registry), self.top_k, background=ctx.task.description)
        chosen += [c for c in registry if c.name in self.always and c not in chosen]
        self.last = [c.name for c in chosen]
        return chosen or list(registry)


@dataclass
class CompletionGate:
    """F (phase / completion-check exposure): answer-type tools stay hidden during an evidence phase and
    are exposed once a completion check passes (enough steps taken, and the plan done if required)."""
    gated: tuple = field(default=("commit_answer", "answer", "finish", "submit"),
                         metadata={"help": "tool names hidden until the check passes"})
    min_steps: int = field(default=1, metadata={"help": "evidence steps taken before gated tools appear"})
    require_plan_done: bool = field(default=False, metadata={"help": "also wait for ctx.state['plan_done'] (set by planners)"})
    open_before_end: int = field(default=3, metadata={"help": "expose everything in the last n steps of the task's budget"})

    def reset(self, ctx: Ctx) -> None:
        self.opened_at: int | None = None

    def is_open(self, ctx: Ctx) -> bool:
        if ctx.step >= max(1, ctx.task.max_steps - self.open_before_end):
            return True
        return ctx.step > self.min_steps and (not self.require_plan_done or bool(ctx.state.get("plan_done")))

    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]:
        if self.is_open(ctx):
            if self.opened_at is None:
                self.opened_at = ctx.step
            return list(registry)
        exposed = [c for c in registry if c.name not in self.gated]
        return exposed or list(registry)


@dataclass
class AgentDelegation:
    """F (AOrchestra): the coordinator sees the registry plus ``delegate``; while a sub-agent runs, only
    the sub-agent's tool subset is exposed."""

    def reset(self, ctx: Ctx) -> None:
        pass

    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]:
        sub = ctx.state.get("subagent") or {}
        if sub.get("active"):
            names = set(sub.get("tools", []))
            return [c for c in registry if c.name in names] or list(registry)
        return list(registry) + [DELEGATE]


_FINISH_RE = re.compile(r"^\s*\**(finish|final report|report|done)\**\s*[:：]\s*(.*)$", re.I | re.M)


@dataclass
class SubAgent:
    """A nested ReAct agent: instruction, curated context, tool subset, isolated history, same backbone."""
    name: str
    instruction: str
    context: str
    tools: list
    max_steps: int = 3
    max_new_tokens: int = 48
    rerank: str = "similarity"
    events: list = field(default_factory=list)
    steps: int = 0
    report: str = ""
    finished: bool = False

    def act(self, observation: Observation, ctx: Ctx) -> Decision | None:
        """The sub-agent's next env action, or None once it has finished (then ``report`` is set)."""
        if self.finished or self.steps >= self.max_steps:
            self.finish()
            return None
        values = {"task": ctx.task.public(), "instruction": self.instruction, "context": self.context,
                  "history": history_text(self.events, 1500), "tools": self.tools, "observation": observation.text,
                  "candidates": observation.candidates[:30], "steps_left": self.max_steps - self.steps}
        messages = [{"role": "system", "content": render_prompt(ctx.prompts, "subagent_system", **values)},
                    {"role": "user", "content": render_prompt(ctx.prompts, "subagent_step", **values)}]
        reply = ctx.llm.chat(messages, max_new_tokens=self.max_new_tokens, stop=["\nObservation"]).text
        done = _FINISH_RE.search(reply)
        if done and self.steps > 0:
            self.finish(done.group(2))
            return None
        thought, action = parse_react(reply)
        context = Context(task=ctx.task, view=View(values["history"], list(self.events)),
                          directive=Directive(self.instruction), capabilities=list(self.tools),
                          observation=observation, step=ctx.step)
        decision = to_decision(action, thought, context, ctx, self.rerank)
        decision.data["agent"] = self.name
        return decision

    def observe(self, decision: Decision, obs: Observation, step: int) -> None:
        args = decision.args.get("command") if set(decision.args) == {"command"} else decision.args
        self.events += [Event("action", f"{decision.tool}: {args}", step), Event("observation", obs.text, step)]
        self.steps += 1
        if obs.done:
            self.finish()

    def finish(self, report: str = "") -> None:
        if self.finished:
            return
        self.finished = True
        report = report.strip()
        if len(report.split()) < 2:
            last = self.events[-1].content if self.events else "no observation"
            tried = [e.content for e in self.events if e.kind == "action"]
            report = f"did {', '.join(clip(t, 40) for t in tried) or 'nothing'}; last observation: {clip(last, 120)}"
        self.report = clip(report, 300)
