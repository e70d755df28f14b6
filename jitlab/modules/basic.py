"""The basic modules ReAct is built from: full-history memory, no planner, full registry,
ReAct action (Thought/Action loop) and a random action for baselines.

The ReAct parser tolerates a small model's formatting: ``Action: go north``, ``Action: [go north]``,
``> go north``, quoted text, trailing punctuation, ``tool_name(arg)`` or ``tool_name: {"json": ...}``
and a missing ``Action:`` line (the last non-empty line is used). For text games the action is
then mapped onto the nearest admissible command: exact match, else ``Backbone.score`` (one batched
forward pass over the candidates) when ``rerank="score"``, else string similarity.
"""
from __future__ import annotations

import difflib
import json
import random
import re
from dataclasses import dataclass, field

from jitlab.modules.prompting import render
from jitlab.protocol import Capability, Context, Ctx, Decision, Directive, Event, View

__all__ = [
    "FullHistory",
    "FullRegistry",
    "NoPlanner",
    "RandomAction",
    "ReActAction",
    "echoes_options",
    "history_text",
    "parse_react",
    "to_decision",
]


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


@dataclass
class FullHistory:
    """M: keep every event; the view is the whole transcript (capped to fit the context, old lines dropped in
    whole chunks so the view's start stays put and a prefix cache can reuse it; see ``history_text``)."""
    max_chars: int = field(default=3000, metadata={"help": "characters of transcript shown (most recent kept; old "
                                                           "lines dropped in chunks of half of it)"})

    def reset(self, ctx: Ctx) -> None:
        self.events: list[Event] = []

    def update(self, event: Event, ctx: Ctx) -> None:
        self.events.append(event)

    def view(self, ctx: Ctx) -> View:
        return View(history_text(self.events, self.max_chars), list(self.events))


class NoPlanner:
    """P: no planning; the directive is empty."""

    def reset(self, ctx: Ctx) -> None:
        pass

    def plan(self, view: View, ctx: Ctx) -> Directive:
        return Directive("")


class FullRegistry:
    """F: expose every tool of the task, in registry order."""

    def reset(self, ctx: Ctx) -> None:
        pass

    def select(self, directive: Directive, view: View, registry: list[Capability], ctx: Ctx) -> list[Capability]:
        return list(registry)


_ACTION_RE = re.compile(r"^\s*(?:\d+\.\s*)?\**action\**\s*(?:\d+)?\s*[:：]\s*(.+)$", re.IGNORECASE | re.MULTILINE)


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


def _single_text_tool(caps: list[Capability]) -> Capability | None:
    """A tool whose only argument is a string (text-game style ``act(command)``)."""
    for cap in caps:
        props = cap.args.get("properties", {})
        if len(props) == 1 and next(iter(props.values())).get("type") == "string":
            return cap
    return None


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


def echoes_options(text: str, candidates: list[str]) -> bool:
    """True when a reply without an ``Action:`` line just repeats two or more of the listed options:
    small models often echo the list, and its last line is then no choice at all."""
    if _ACTION_RE.search(text):
        return False
    listed = {c.lower() for c in candidates}
    lines = {re.sub(r"^\s*[-*>\d.]+\s*", "", line).strip().lower() for line in text.splitlines()}
    return len(lines & listed) >= 2


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


@dataclass
class RandomAction:
    """A: a uniformly random admissible command (seeded by task and step); a baseline, no backbone."""
    seed: int = field(default=0, metadata={"help": "added to the per-task seed"})

    def reset(self, ctx: Ctx) -> None:
        self.rng = random.Random(f"{ctx.task.id}:{self.seed}")

    def act(self, context: Context, ctx: Ctx) -> Decision:
        candidates = context.observation.candidates
        if candidates:
            text_tool = _single_text_tool(context.capabilities)
            arg = next(iter(text_tool.args["properties"])) if text_tool else "command"
            return Decision(text_tool.name if text_tool else "act", {arg: self.rng.choice(candidates)}, "random")
        cap = self.rng.choice(context.capabilities)
        return Decision(cap.name, {k: "" for k in cap.args.get("properties", {})}, "random")
