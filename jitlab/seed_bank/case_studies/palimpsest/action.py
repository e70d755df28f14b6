"""palimpsest action: bounded DAG executor (one proposal per ready node, width- and depth-bounded)."""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field, replace

from jitlab.harnesskit import normalize, render, render_prompt
from jitlab.protocol import Capability, Context, Ctx, Decision, Directive

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.basic._ACTION_RE
_ACTION_RE = re.compile(r"^\s*(?:\d+\.\s*)?\**action\**\s*(?:\d+)?\s*[:：]\s*(.+)$", re.IGNORECASE | re.MULTILINE)


# library: jitlab.modules.basic.parse_react
def parse_react(text: str) -> tuple[str, str]:
    """(thought, action text) from a Thought/Action reply, tolerating sloppy formatting."""
    matches = _ACTION_RE.findall(text)
    if matches:
        action = matches[0]
        thought = text[: text.lower().find("action")].strip()
    else:
        lines = [l for l in text.strip().splitlines() if l.strip()]
        action, thought = (lines[-1] if lines else ""), "\n".join(lines[:-1])
    thought = re.sub(r"^\s*thought\s*[:：]\s*", "", thought, flags=re.IGNORECASE)
    action = action.strip().strip("`").strip().rstrip(".!").strip()
    action = re.sub(r"^(>|\[|\")\s*|\s*(\]|\")$", "", action).strip()
    return thought.strip(), action.rstrip(".!").strip()


# library: jitlab.modules.basic.echoes_options
def echoes_options(text: str, candidates: list[str]) -> bool:
    """True when a reply without an ``Action:`` line just repeats two or more of the listed options:
    small models often echo the list, and its last line is then no choice at all."""
    if _ACTION_RE.search(text):
        return False
    listed = {c.lower() for c in candidates}
    lines = {re.sub(r"^\s*[-*>\d.]+\s*", "", line).strip().lower() for line in text.splitlines()}
    return len(lines & listed) >= 2


# library: jitlab.modules.basic._single_text_tool
def _single_text_tool(caps: list[Capability]) -> Capability | None:
    """A tool whose only argument is a string (text-game style ``act(command)``)."""
    for cap in caps:
        props = cap.args.get("properties", {})
        if len(props) == 1 and next(iter(props.values())).get("type") == "string":
            return cap
    return None


# library: jitlab.modules.basic._nearest
def _nearest(action: str, candidates: list[str], context: Context, ctx: Ctx, rerank: str) -> str:
    lowered = {c.lower(): c for c in candidates}
    if action.lower() in lowered:
        return lowered[action.lower()]
    if rerank == "score" or not action:  # no usable text: let the backbone's likelihood choose
        try:
            intended = f" (intended: {action})" if action else ""
            messages = [{"role": "user", "content": f"{context.view.text}\nNext command{intended}:"}]
            scores = ctx.llm.score(messages, candidates)
            return candidates[max(range(len(candidates)), key=scores.__getitem__)]
        except NotImplementedError:
            pass
    return max(candidates, key=lambda c: difflib.SequenceMatcher(None, action.lower(), c.lower()).ratio())


# library: jitlab.modules.basic._args_for
def _args_for(cap: Capability, raw: str) -> dict:
    raw = raw.strip()
    try:
        value = json.loads(raw)
        if isinstance(value, dict):
            return value
    except json.JSONDecodeError:
        value = raw.strip("'\"")
    props = list(cap.args.get("properties", {}))
    return {props[0]: value} if props else {}


# library: jitlab.modules.basic.to_decision
def to_decision(action: str, thought: str, context: Context, ctx: Ctx, rerank: str = "similarity") -> Decision:
    """Map parsed action text onto a tool call of the exposed capabilities."""
    caps = context.capabilities
    by_name = {c.name: c for c in caps}
    call = re.match(r"^([A-Za-z_][\w]*)\s*(?:\((.*)\)|\[(.*)\]|:\s*(.*))\s*$", action, re.DOTALL)
    if call and call.group(1) in by_name:
        cap = by_name[call.group(1)]
        raw = next(g for g in call.groups()[1:] if g is not None).strip()
        return Decision(cap.name, _args_for(cap, raw), thought)
    text_tool = _single_text_tool(caps)
    if text_tool is None:
        cap = caps[0] if caps else Capability("noop", "")
        return Decision(cap.name, _args_for(cap, action), thought)
    arg = next(iter(text_tool.args["properties"]))
    candidates = context.observation.candidates
    command = _nearest(action, candidates, context, ctx, rerank) if candidates else action
    return Decision(text_tool.name, {arg: command}, thought, {"raw_action": action})


# library: jitlab.modules.basic.ReActAction
@dataclass
class ReActAction:
    """A: ReAct. One backbone call per step produces 'Thought: ... Action: ...'."""
    max_new_tokens: int = field(default=48, metadata={"help": "tokens the backbone may write per step"})
    rerank: str = field(default="similarity", metadata={"help": "map free text to an admissible command by "
                                                                "'similarity' or 'score' (Backbone.score)"})
    max_candidates: int = field(default=30, metadata={"help": "admissible commands listed in the prompt"})

    def reset(self, ctx: Ctx) -> None:
        pass

    def messages(self, context: Context, ctx: Ctx) -> list[dict]:
        values = {"task": ctx.task.public(), "view": context.view.text, "directive": context.directive.text,
                  "hints": context.hints, "tools": context.capabilities,
                  "candidates": context.observation.candidates[: self.max_candidates], "step": context.step}
        return [{"role": "system", "content": render(ctx.prompts["system"], **values)},
                {"role": "user", "content": render(ctx.prompts["step"], **values)}]

    def act(self, context: Context, ctx: Ctx) -> Decision:
        reply = ctx.llm.chat(self.messages(context, ctx), max_new_tokens=self.max_new_tokens,
                             stop=["\nObservation"])
        thought, action = parse_react(reply.text)
        echoed = echoes_options(reply.text, context.observation.candidates)
        if echoed:
            action = ""  # an echoed option list is not a choice
        decision = to_decision(action, thought, context, ctx, self.rerank)
        # compliance (jitlab/compliance.py): the reply parsed when it held an Action: line and was no echoed list
        decision.data.update(decided_by="model_reply", parsed=bool(_ACTION_RE.search(reply.text)) and not echoed)
        return decision


# library: jitlab.modules.action.step_messages
def step_messages(context: Context, ctx: Ctx, max_candidates: int = 30, **extra) -> list[dict]:
    """System + user messages from the ``system``/``step`` prompts; ``extra`` adds or overrides values."""
    values = {"task": ctx.task.public(), "view": context.view.text, "directive": context.directive.text,
              "hints": context.hints, "tools": context.capabilities,
              "candidates": context.observation.candidates[:max_candidates], "step": context.step, **extra}
    return [{"role": "system", "content": render_prompt(ctx.prompts, "system", **values)},
            {"role": "user", "content": render_prompt(ctx.prompts, "step", **values)}]


# library: jitlab.modules.action.DAGParallelAction
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


# library: jitlab.modules.case_studies.BoundedDAGExecutor
@dataclass
class BoundedDAGExecutor(DAGParallelAction):
    """A (Palimpsest bounded executor): executes the DAG with bounded width and depth: one proposal per ready node, at most
    ``max_parallel`` per round (the rest are queued, no new calls), nodes deeper than ``max_depth`` are
    not executed. ``ctx.state['dag_rounds']`` lists the node ids proposed per round."""
    max_depth: int = field(default=3, metadata={"help": "deepest DAG node executed"})

    def reset(self, ctx: Ctx) -> None:
        super().reset(ctx)
        self.rounds: list[list] = []
        ctx.state["dag_rounds"] = self.rounds

    def act(self, context: Context, ctx: Ctx) -> Decision:
        ready = [n for n in context.directive.data.get("ready") or [] if n.get("depth", 1) <= self.max_depth]
        context = replace(context, directive=Directive(context.directive.text, {**context.directive.data, "ready": ready}))
        self.round: list = []
        decision = super().act(context, ctx)
        if self.round:
            self.rounds.append(self.round)
        return decision

    def _propose(self, context: Context, ctx: Ctx, node: dict | None) -> Decision:
        self.round.append(node["id"] if node else None)
        return super()._propose(context, ctx, node)


# ---- the harness's own code ----

class Action(BoundedDAGExecutor):
    pass
