"""aorchestra action: coordinator delegating to nested ReAct sub-agents."""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field

from jitlab.harnesskit import clip, render, render_prompt
from jitlab.protocol import Capability, Context, Ctx, Decision, Directive, Event, Observation, View

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


# library: jitlab.modules.policy._FINISH_RE
_FINISH_RE = re.compile(r"^\s*\**(finish|final report|report|done)\**\s*[:：]\s*(.*)$", re.I | re.M)


# library: jitlab.modules.policy.SubAgent
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


# library: jitlab.modules.action._DELEGATE_RE
_DELEGATE_RE = re.compile(r"^\s*\**(?:action\s*[:：]\s*)?delegate\**\s*(?:[:：(\[]\s*)(.*?)[)\]]?\s*$", re.I | re.M)


# library: jitlab.modules.action._delegate_args
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


# library: jitlab.modules.action.step_messages
def step_messages(context: Context, ctx: Ctx, max_candidates: int = 30, **extra) -> list[dict]:
    """System + user messages from the ``system``/``step`` prompts; ``extra`` adds or overrides values."""
    values = {"task": ctx.task.public(), "view": context.view.text, "directive": context.directive.text,
              "hints": context.hints, "tools": context.capabilities,
              "candidates": context.observation.candidates[:max_candidates], "step": context.step, **extra}
    return [{"role": "system", "content": render_prompt(ctx.prompts, "system", **values)},
            {"role": "user", "content": render_prompt(ctx.prompts, "step", **values)}]


# library: jitlab.modules.policy.DELEGATE
DELEGATE = Capability(
    "delegate", "Create a sub-agent for a sub-task: give it an instruction, the context it needs and the "
                "tools it may use; it acts until done and reports back.",
    {"type": "object", "properties": {"instruction": {"type": "string"}, "context": {"type": "string"},
                                      "tools": {"type": "array", "items": {"type": "string"}}},
     "required": ["instruction"]})


# library: jitlab.modules.action.CoordinatorAction
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


# ---- the harness's own code ----

class Action(CoordinatorAction):
    pass
