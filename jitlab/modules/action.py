"""Action modules (A): the assembled context in, the next decision out.

    from jitlab.modules.action import EnsembleVote
    class Action(EnsembleVote): pass                # in a harness folder's action.py

All build on ``ReActAction`` (jitlab.modules.basic): the harness's ``prompt.yaml`` ``system``/``step``
templates (or the library's ``system.j2``/``step.j2``) render the step prompt, ``parse_react`` reads
the reply and ``to_decision`` maps free text onto a tool call of the exposed capabilities, so every
action works on one-tool text games (``act`` + admissible candidates) and on multi-tool suites
(DBBench's ``execute_sql``/``commit_answer``) alike.

Multi-sample actions (EnsembleVote, MultiRolloutAggregation) default to K=3 and vary each sample's
prompt with a sample note (and temperature/seed for i > 0) so the replay cache keeps them distinct.
They stop sampling once one decision holds a majority (``early_stop``), and the aggregator call is
skipped when the samples agree, so agreeing samples cost 2 calls instead of K+1.

Caveats: markers, fold directives and delegation lines are parsed leniently; when a reply has none,
the action falls back to plain ReAct parsing (a small model's garbage still yields an admissible action).
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from jitlab.modules.basic import RandomAction, ReActAction, parse_react, to_decision
from jitlab.modules.policy import DELEGATE, SubAgent
from jitlab.modules.text import clip, meaningful, normalize, render_prompt, user
from jitlab.protocol import Context, Ctx, Decision, Observation

__all__ = ["ReActAction", "RandomAction", "step_messages", "MarkerAction", "ReActFoldAction", "EnsembleVote",
           "MultiRolloutAggregation", "DAGParallelAction", "RecursiveExecution", "AdmissibleRerank",
           "CoordinatorAction", "majority"]


def step_messages(context: Context, ctx: Ctx, max_candidates: int = 30, **extra) -> list[dict]:
    """System + user messages from the ``system``/``step`` prompts; ``extra`` adds or overrides values."""
    values = {"task": ctx.task.public(), "view": context.view.text, "directive": context.directive.text,
              "hints": context.hints, "tools": context.capabilities,
              "candidates": context.observation.candidates[:max_candidates], "step": context.step, **extra}
    return [{"role": "system", "content": render_prompt(ctx.prompts, "system", **values)},
            {"role": "user", "content": render_prompt(ctx.prompts, "step", **values)}]


def _key(decision: Decision) -> str:
    args = {k: normalize(v) if isinstance(v, str) else v for k, v in decision.args.items()}
    return f"{decision.tool}:{json.dumps(args, sort_keys=True, default=str)}"


def majority(decisions: list[Decision]) -> tuple[Decision, dict]:
    """The most common decision (ties: the earliest) and the vote counts."""
    counts = Counter(_key(d) for d in decisions)
    best = max(counts.values())
    winner = next(d for d in decisions if counts[_key(d)] == best)
    return winner, dict(counts)


@dataclass
class _Sampled(ReActAction):
    """ReAct with K independent samples per step."""
    k: int = field(default=3, metadata={"help": "samples per step"})
    temperature: float = field(default=0.7, metadata={"help": "sampling temperature for samples after the first"})
    early_stop: bool = field(default=True, metadata={"help": "stop sampling once one decision holds a majority of k"})

    def decided(self, decisions: list[Decision]) -> bool:
        """True when the remaining samples cannot change the majority."""
        return self.early_stop and max(Counter(_key(d) for d in decisions).values()) > self.k // 2

    def sample(self, context: Context, ctx: Ctx, i: int, **extra) -> tuple[str, str, Decision]:
        messages = step_messages(context, ctx, self.max_candidates, **extra)
        if self.k > 1:
            messages[-1]["content"] += "\n" + render_prompt(ctx.prompts, "sample_note", sample=i + 1, samples=self.k)
        params = {"max_new_tokens": self.max_new_tokens, "stop": ["\nObservation"]}
        if i > 0:
            params.update(temperature=self.temperature, seed=i)
        reply = ctx.llm.chat(messages, **params).text
        thought, action = parse_react(reply)
        return thought, action, to_decision(action, thought, context, ctx, self.rerank)


@dataclass
class EnsembleVote(_Sampled):
    """A (ensemble voting): K ReAct samples, the majority decision wins."""

    def act(self, context: Context, ctx: Ctx) -> Decision:
        decisions: list[Decision] = []
        for i in range(self.k):
            decisions.append(self.sample(context, ctx, i)[2])
            if self.decided(decisions):
                break
        winner, votes = majority(decisions)
        winner.data["votes"] = votes
        return winner


@dataclass
class MultiRolloutAggregation(_Sampled):
    """A (AggAgent): K rollouts propose (each from its own isolated history when the memory provides
    ``view.data['rollouts']``); an aggregator call inspects the proposals and answers. An aggregator
    reply that is none of the proposals nor an admissible command falls back to the majority."""
    aggregator_tokens: int = field(default=32, metadata={"help": "tokens for the aggregator's answer"})
    skip_if_unanimous: bool = field(default=True, metadata={"help": "no aggregator call when all proposals agree"})

    def act(self, context: Context, ctx: Ctx) -> Decision:
        rollouts = context.view.data.get("rollouts") or []
        proposals = []
        for i in range(self.k):
            view = rollouts[i] if i < len(rollouts) else context.view.text
            thought, action, decision = self.sample(context, ctx, i, view=view)
            proposals.append({"thought": clip(thought, 120), "action": action, "decision": decision})
            if self.decided([p["decision"] for p in proposals]):
                break
        ctx.state["rollout_notes"] = [f"{p['thought']} => {p['action']}" for p in proposals]
        decisions = [p["decision"] for p in proposals]
        winner, votes = majority(decisions)
        if self.skip_if_unanimous and len(votes) == 1:
            winner.data.update(votes=votes, chosen_by="unanimous")
            return winner
        prompt = render_prompt(ctx.prompts, "aggregate", task=ctx.task.public(), view=context.view.text[-1200:],
                               proposals=[{"thought": p["thought"], "action": p["decision"].args.get("command", p["action"])}
                                          for p in proposals], candidates=context.observation.candidates[: self.max_candidates])
        reply = ctx.llm.chat(user(prompt), max_new_tokens=self.aggregator_tokens, stop=["\nObservation"]).text
        chosen = self._match(parse_react(reply), proposals, context, ctx)
        if chosen is None:
            winner.data.update(votes=votes, chosen_by="majority")
            return winner
        chosen.data.update(votes=votes, chosen_by="aggregator")
        return chosen

    def _match(self, parsed: tuple[str, str], proposals: list[dict], context: Context, ctx: Ctx) -> Decision | None:
        thought, action = parsed
        target = normalize(action)
        if not target:
            return None
        for p in proposals:
            if target in (normalize(p["action"]), normalize(p["decision"].args.get("command", ""))):
                return p["decision"]
        candidates = {normalize(c) for c in context.observation.candidates}
        if target in candidates:
            return to_decision(action, thought, context, ctx, self.rerank)
        names = {c.name for c in context.capabilities}
        if not candidates and re.match(r"^(\w+)\s*[(:\[]", action) and action.split("(")[0].split(":")[0].strip() in names:
            return to_decision(action, thought, context, ctx, self.rerank)
        return None


_FOLD_RE = re.compile(r"^\s*\**fold\**\s*[:：]\s*(condense|merge)\s*(\d+)?\s*[:\-–]?\s*(.*)$", re.I | re.M)


@dataclass
class ReActFoldAction(ReActAction):
    """A (AgentFold ReAct + fold): each reply carries Thought, an optional ``Fold: condense|merge k: summary``
    directive (how to fold the latest step into the multi-scale context) and Action. The directive is left
    in ``ctx.state['fold']`` for MultiScaleFoldingMemory; without one the memory condenses."""
    max_new_tokens: int = field(default=64, metadata={"help": "tokens the backbone may write per step"})

    def act(self, context: Context, ctx: Ctx) -> Decision:
        reply = ctx.llm.chat(step_messages(context, ctx, self.max_candidates), max_new_tokens=self.max_new_tokens,
                             stop=["\nObservation"]).text
        m = _FOLD_RE.search(reply)
        if m:
            ctx.state["fold"] = {"op": m.group(1).lower(), "k": int(m.group(2) or 1), "summary": clip(m.group(3), 160)}
            reply = reply[: m.start()] + reply[m.end():]
        thought, action = parse_react(reply)
        decision = to_decision(action, thought, context, ctx, self.rerank)
        decision.data["fold"] = dict(ctx.state.get("fold") or {"op": "condense"})
        return decision


_TAG = r"<{0}>\s*(.*?)\s*(?:</{0}>|\Z)"


@dataclass
class MarkerAction(ReActAction):
    """A (DeepAgent marker-guided execution): one reasoning stream that may hold ``<tool_search>query</tool_search>``,
    ``<fold>`` and ``<tool_call>command</tool_call>`` markers. A search query goes to ``ctx.state['tool_query']``
    (ToolSearch uses it next step), a fold marker to ``ctx.state['fold_requested']`` (ThreeTierMemory folds);
    the tool call is executed. No tool_call marker: plain ReAct parsing of the same text."""
    max_new_tokens: int = field(default=64, metadata={"help": "tokens the backbone may write per step"})

    def act(self, context: Context, ctx: Ctx) -> Decision:
        reply = ctx.llm.chat(step_messages(context, ctx, self.max_candidates), max_new_tokens=self.max_new_tokens).text
        markers = []
        search = re.search(_TAG.format("tool_search"), reply, re.S | re.I)
        if search and search.group(1).strip():
            ctx.state["tool_query"] = clip(search.group(1), 100)
            markers.append("tool_search")
        if re.search(r"<fold\s*/?>", reply, re.I):
            ctx.state["fold_requested"] = True
            markers.append("fold")
        call = re.search(_TAG.format("tool_call"), reply, re.S | re.I)
        if call and call.group(1).strip():
            thought = re.sub(r"<[^>]+>", " ", reply[: call.start()]).strip()
            action = call.group(1).strip().splitlines()[0]
            action = parse_react(action)[1] if re.match(r"^\s*action\s*[:：]", action, re.I) else action.strip(" `\"'")
            markers.append("tool_call")
        else:
            thought, action = parse_react(re.sub(r"<[^>]*>", "\n", reply))
        decision = to_decision(action, thought, context, ctx, self.rerank)
        decision.data["markers"] = markers
        return decision


@dataclass
class DAGParallelAction(ReActAction):
    """A (Flash-Searcher DAG-parallel execution): one proposal per ready DAG node (up to max_parallel) in
    one round; the extra proposals are queued and executed on the following steps without new backbone
    calls, as long as their node is still ready and the command is still admissible."""
    max_parallel: int = field(default=2, metadata={"help": "ready nodes proposed for per round"})

    def reset(self, ctx: Ctx) -> None:
        self.queue: list[Decision] = []

    def act(self, context: Context, ctx: Ctx) -> Decision:
        ready = context.directive.data.get("ready") or []
        ready_ids = {n["id"] for n in ready}
        admissible = {normalize(c) for c in context.observation.candidates}
        names = {c.name for c in context.capabilities}
        while self.queue:
            d = self.queue.pop(0)
            ok_cmd = not admissible or normalize(d.args.get("command", "")) in admissible
            if d.data.get("node") in ready_ids and ok_cmd and d.tool in names:
                d.data["queued"] = True
                return d
        if not ready:
            return self._propose(context, ctx, None)
        proposals = [self._propose(context, ctx, node) for node in ready[: self.max_parallel]]
        self.queue = proposals[1:]
        return proposals[0]

    def _propose(self, context: Context, ctx: Ctx, node: dict | None) -> Decision:
        directive = f"Work on sub-task [{node['id']}]: {node['text']}" if node else context.directive.text
        reply = ctx.llm.chat(step_messages(context, ctx, self.max_candidates, directive=directive),
                             max_new_tokens=self.max_new_tokens, stop=["\nObservation"]).text
        thought, action = parse_react(reply)
        decision = to_decision(action, thought, context, ctx, self.rerank)
        if node:
            decision.data["node"] = node["id"]
        return decision


@dataclass
class RecursiveExecution(ReActAction):
    """A (ROMA recursive execution): executes the planner's current leaf with a ReAct step and aggregates
    finished subtrees upward: for each node whose children all finished (``ctx.state['aggregate']``) one
    short aggregator call writes the node's result from its children's results."""
    aggregate_tokens: int = field(default=48, metadata={"help": "tokens per upward aggregation"})

    def aggregate(self, ctx: Ctx) -> None:
        queue = ctx.state.get("aggregate") or []
        while queue:
            item = queue.pop(0)
            prompt = render_prompt(ctx.prompts, "aggregate_up", task=ctx.task.public(), goal=item["goal"],
                                   children=item["children"])
            reply = ctx.llm.chat(user(prompt), max_new_tokens=self.aggregate_tokens).text
            if meaningful(reply):
                result = clip(reply, 300)
                ctx.state.setdefault("results", {})[item["id"]] = result
                inputs = ctx.state.get("context_results") or {}
                if item["goal"] in inputs:
                    inputs[item["goal"]] = result

    def post_feedback(self, ctx: Ctx, decision: Decision, obs: Observation) -> None:
        # runs after the planner's post_feedback (module order), so a subtree that just finished is
        # aggregated before the next leaf's view is built
        self.aggregate(ctx)

    def act(self, context: Context, ctx: Ctx) -> Decision:
        self.aggregate(ctx)
        reply = ctx.llm.chat(step_messages(context, ctx, self.max_candidates), max_new_tokens=self.max_new_tokens,
                             stop=["\nObservation"]).text
        thought, action = parse_react(reply)
        decision = to_decision(action, thought, context, ctx, self.rerank)
        decision.data["node"] = context.directive.data.get("node")
        return decision


@dataclass
class AdmissibleRerank(ReActAction):
    """A (admissible-action re-ranking): a ReAct step, then every admissible command is scored by the
    backbone's log-likelihood (``ctx.llm.score``) after the model's own thought, plus a bonus for
    matching the stated action. Without candidates or without ``score`` it is plain ReAct."""
    match_bonus: float = field(default=2.0, metadata={"help": "added to the candidate the reply named exactly"})

    def act(self, context: Context, ctx: Ctx) -> Decision:
        messages = step_messages(context, ctx, self.max_candidates)
        reply = ctx.llm.chat(messages, max_new_tokens=self.max_new_tokens, stop=["\nObservation"]).text
        thought, action = parse_react(reply)
        candidates = context.observation.candidates[: self.max_candidates]
        if not candidates:
            return to_decision(action, thought, context, ctx, self.rerank)
        try:
            prefix = {"role": "assistant", "content": f"Thought: {thought}\nAction:"}
            scores = ctx.llm.score(messages + [prefix], [" " + c for c in candidates])  # the reply continues after "Action:"
        except NotImplementedError:
            return to_decision(action, thought, context, ctx, "similarity")
        target = normalize(action)
        total = [s + (self.match_bonus if normalize(c) == target else 0.0) for s, c in zip(scores, candidates, strict=True)]
        best = max(range(len(candidates)), key=total.__getitem__)
        decision = to_decision(candidates[best], thought, context, ctx, "similarity")
        decision.data.update(raw_action=action, reranked=True)
        return decision


_DELEGATE_RE = re.compile(r"^\s*\**(?:action\s*[:：]\s*)?delegate\**\s*(?:[:：(\[]\s*)(.*?)[)\]]?\s*$", re.I | re.M)


def _delegate_args(reply: str, tool_names: list[str]) -> dict | None:
    """Parse ``Delegate: instruction | tools: a, b | context: ...`` or ``delegate({...json...})``."""
    m = _DELEGATE_RE.search(reply)
    if not m or not m.group(1).strip():
        return None
    body = m.group(1).strip()
    try:
        data = json.loads(body)
        if isinstance(data, dict) and data.get("instruction"):
            return data
    except json.JSONDecodeError:
        pass
    parts = [p.strip() for p in body.split("|")]
    args: dict = {"instruction": parts[0].strip("'\"")}
    for p in parts[1:]:
        key, _, value = p.partition(":")
        if key.strip().lower() == "tools":
            args["tools"] = [t.strip() for t in value.split(",") if t.strip() in tool_names]
        elif key.strip().lower() == "context":
            args["context"] = value.strip()
    return args


@dataclass
class CoordinatorAction(ReActAction):
    """A (AOrchestra coordinator): the coordinator delegates sub-tasks by invoking the ``delegate``
    capability; each sub-agent (jitlab.modules.policy.SubAgent) gets an instruction, a curated context
    (the coordinator's view tail unless it wrote one) and a tool subset, and runs a nested ReAct loop
    over the same backbone until it reports back. A reply with no delegation becomes a delegation of
    its stated action, or a direct action when ``direct_actions`` is set."""
    direct_actions: bool = field(default=False, metadata={"help": "let the coordinator act directly when it does not delegate"})
    subagent_steps: int = field(default=3, metadata={"help": "env actions a sub-agent may take before it must report"})
    subagent_tokens: int = field(default=48, metadata={"help": "tokens per sub-agent step"})
    context_chars: int = field(default=500, metadata={"help": "characters of curated context handed to a sub-agent"})

    def reset(self, ctx: Ctx) -> None:
        self.sub: SubAgent | None = None
        ctx.state["delegations"] = []
        ctx.state["subagent"] = {"active": False}

    def act(self, context: Context, ctx: Ctx) -> Decision:
        env_tools = [c for c in context.capabilities if c.name != DELEGATE.name]
        if self.sub is not None:
            decision = self.sub.act(context.observation, ctx)
            if decision is not None:
                return decision
            record = self._close(ctx)
            env_tools = list(ctx.task.tools)      # the policy showed only the finished sub-agent's tools
            # the memory's view was built before this report existed: hand it over as a hint
            context = Context(task=context.task, view=context.view, directive=context.directive,
                              capabilities=env_tools + [DELEGATE], observation=context.observation,
                              hints=context.hints + [f"Report from {record['agent']}: {record['report']}"],
                              step=context.step)
        reply = ctx.llm.chat(step_messages(context, ctx, self.max_candidates), max_new_tokens=self.max_new_tokens,
                             stop=["\nObservation"]).text
        thought, action = parse_react(reply)
        args = _delegate_args(reply, [c.name for c in env_tools])
        env_context = Context(task=context.task, view=context.view, directive=context.directive,
                              capabilities=env_tools, observation=context.observation, hints=context.hints,
                              step=context.step)
        if args is None and self.direct_actions and action:
            return to_decision(action, thought, env_context, ctx, self.rerank)
        if args is None:
            args = {"instruction": action or clip(thought, 120) or "make progress toward the task goal"}
        self.sub = self.delegate(args, env_tools, context, ctx)
        decision = self.sub.act(context.observation, ctx)
        if decision is None:
            self._close(ctx)
            return to_decision(action, thought, env_context, ctx, self.rerank)
        return decision

    def delegate(self, args: dict, env_tools: list, context: Context, ctx: Ctx) -> SubAgent:
        """Invoke the delegate capability: create a sub-agent (instruction, curated context, tool subset)."""
        names = args.get("tools") or []
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        tools = [c for c in env_tools if c.name in names] or list(env_tools)
        curated = clip(args.get("context") or context.view.text[-self.context_chars:], self.context_chars)
        n = len(ctx.state["delegations"]) + 1
        sub = SubAgent(name=f"sub{n}", instruction=clip(args["instruction"], 200), context=curated, tools=tools,
                       max_steps=self.subagent_steps, max_new_tokens=self.subagent_tokens, rerank=self.rerank)
        ctx.state["delegations"].append({"agent": sub.name, "instruction": sub.instruction,
                                         "tools": [c.name for c in tools], "report": ""})
        ctx.state["subagent"] = {"active": True, "name": sub.name, "tools": [c.name for c in tools]}
        return sub

    def _close(self, ctx: Ctx) -> dict:
        """Finish the running sub-agent and file its report; returns the delegation record."""
        record = ctx.state["delegations"][-1]
        if self.sub is not None:
            self.sub.finish()
            record["report"] = self.sub.report
            ctx.state["subagent"] = {"active": False}
            self.sub = None
        return record

    def post_feedback(self, ctx: Ctx, decision: Decision, obs: Observation) -> None:
        if self.sub is not None and decision.data.get("agent") == self.sub.name:
            self.sub.observe(decision, obs, ctx.step)
            if self.sub.finished or self.sub.steps >= self.sub.max_steps:
                self._close(ctx)
