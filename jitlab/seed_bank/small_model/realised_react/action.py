"""realised_react (ReAct) action: one Thought/Action completion per step, mapped to an admissible command."""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field

from jitlab.harnesskit import render
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


# ---- the harness's own code ----

class Action(ReActAction):
    pass
