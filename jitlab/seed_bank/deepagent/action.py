"""deepagent action: marker-guided execution (tool_search / fold / tool_call)."""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field

from jitlab.harnesskit import clip, render, render_prompt
from jitlab.protocol import Capability, Context, Ctx, Decision

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


# library: jitlab.modules.action._TAG
_TAG = r"<{0}>\s*(.*?)\s*(?:</{0}>|\Z)"


# library: jitlab.modules.action.MarkerAction
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


# ---- the harness's own code ----

class Action(MarkerAction):
    pass
