"""Hooks (lifecycle interventions) a harness or an engineer patch can add on top of its four modules.

``RuleHooks`` holds the rule patches of the offline engineer (jitlab.engineer.rules), each off by default
and switched on by a field: a patch is a ``hooks.py`` holding ``class Hooks(RuleHooks)`` with some fields
set, so the resolved file (jitlab/resolve.py inlines this code) shows every rule it runs.

    block_after      an action that failed this many times in the same state is replaced
    correct_invalid  an action outside the admissible list is replaced by the admissible one
    loop_after       the same state seen this many times: an action already tried there is replaced
    commit_margin    this many steps before the task's step budget ends, ``commit_answer`` is forced
    hint_after       this many steps without reward: the task's goal is added as a hint

Replacements choose among the admissible commands not yet tried in the state, by backbone likelihood
(``ctx.llm.score``, one batched pass) when the backbone has it, else in the listed order.

``InterventionHooks`` (Life-Harness style, mined from trajectories by jitlab.engineer.interventions) adds an
output interceptor (``normalise``: quotes, ``Action:`` prefixes and trailing punctuation off, then an exact
admissible match), re-ranking over the admissible set (``rerank``: ``untried`` replaces a repeat, ``always``
picks the likeliest untried command every step) with verb priors learned from successes (``prefer``, added
to the log-likelihood). Without ``score`` (litellm backbones) the choice is asked of the backbone by chat (a
numbered list, reply with a number); the method used (score | chat | order) is recorded in the step trace
(``trace.hook``, e.g. ``rerank:chat``).

"State" is the last observation that followed an action that did not fail (or the first one): a failed
action leaves the world as it was, whatever message it printed. An action *failed* when it earned no
reward and its observation repeats the state's or reads like a refusal (``FAIL_PATTERNS``). Caveats: the
patterns are English game/CLI phrasings; a text-command tool is one whose only argument is ``command``;
the forced ``commit_answer`` answers with the first line of the last observation (a crude guess, better
than the zero an unfinished DBBench episode scores).
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from jitlab.protocol import Context, Ctx, Decision, Observation

__all__ = ["FAIL_PATTERNS", "InterventionHooks", "RuleHooks", "normalise_command"]

FAIL_PATTERNS = re.compile(
    r"nothing happens|you can't|you cannot|can't do that|not a verb|don't understand|doesn't understand|"
    r"unknown (tool|command)|is not admissible|not (an )?admissible|invalid|^error|error:|no such|"
    r"you don't see|there is no|you need to", re.IGNORECASE | re.MULTILINE)


def _key(decision: Decision) -> str:
    """One string per action (the command for text tools), to count repeats."""
    if set(decision.args) == {"command"}:
        return str(decision.args["command"]).strip().lower()
    return f"{decision.tool}({json.dumps(decision.args, sort_keys=True, default=str)})"


def _state(text: str) -> str:
    return " ".join(str(text).split()).lower()


@dataclass
class RuleHooks:
    """Rule interventions on the four lifecycle hooks (see the module docstring); every rule off by default."""
    block_after: int = field(default=0, metadata={"help": "replace an action that failed this many times in the "
                                                          "same state (0: off)", "min": 0})
    correct_invalid: bool = field(default=False, metadata={"help": "replace an inadmissible command by the likeliest "
                                                                   "admissible one"})
    loop_after: int = field(default=0, metadata={"help": "a state seen this many times: replace an action already "
                                                         "tried there (0: off)", "min": 0})
    commit_margin: int = field(default=0, metadata={"help": "force commit_answer this many steps before the step "
                                                            "budget ends (0: off)", "min": 0})
    hint_after: int = field(default=0, metadata={"help": "steps without reward before the goal is added as a hint "
                                                         "(0: off)", "min": 0})

    def on_init(self, ctx: Ctx, obs: Observation) -> None:
        self._state = _state(obs.text)
        self._fails: Counter = Counter()
        self._seen: Counter = Counter({self._state: 1})
        self._tried: dict[str, set] = {}
        self._pending: tuple[str, str] | None = None
        self._rewarded_at = 0
        self._last_text = obs.text

    def pre_decision(self, ctx: Ctx, context: Context) -> list[str]:
        hints = []
        if self.hint_after and context.step - self._rewarded_at > self.hint_after:
            hints.append(f"Remember the goal: {' '.join(str(ctx.task.description).split())[:300]}")
        if self.loop_after and self._seen[self._state] >= self.loop_after:
            hints.append("You are going in circles: try a command you have not tried here.")
        return hints

    def pre_action(self, ctx: Ctx, context: Context, decision: Decision) -> Decision | None:
        key, tried = _key(decision), self._tried.setdefault(self._state, set())
        rule = ""
        if self.commit_margin and decision.tool != "commit_answer" and _commit_tool(context) and \
                context.step > (ctx.task.max_steps or 0) - self.commit_margin:
            first = next((line.strip() for line in str(self._last_text).splitlines() if line.strip()), "")
            decision, rule = Decision("commit_answer", {"answer": first[:200]}, decision.thought,
                                      dict(decision.data)), "commit_margin"
        elif set(decision.args) == {"command"} and context.observation.candidates:
            candidates = list(context.observation.candidates)
            if self.correct_invalid and key not in {c.lower() for c in candidates}:
                rule = "correct_invalid"
            elif self.block_after and self._fails[(self._state, key)] >= self.block_after:
                rule = "block_after"
            elif self.loop_after and self._seen[self._state] >= self.loop_after and key in tried:
                rule = "loop_after"
            if rule:
                fresh = [c for c in candidates if c.lower() not in tried and
                         not self._fails[(self._state, c.lower())]] or candidates
                choice, method = self._choose(ctx, context, fresh)
                decision = Decision(decision.tool, {"command": choice}, decision.thought, dict(decision.data))
                rule = f"{rule}:{method}"
        if rule:
            decision.data["hook"] = rule
        self._pending = (self._state, _key(decision))
        tried.add(_key(decision))
        return decision

    def post_feedback(self, ctx: Ctx, decision: Decision, obs: Observation) -> None:
        state, key = self._pending or (self._state, _key(decision))
        now = _state(obs.text)
        failed = obs.reward <= 0 and (now == state or bool(FAIL_PATTERNS.search(str(obs.text))))
        if failed:
            self._fails[(state, key)] += 1
        else:
            self._state = now
        if obs.reward > 0:
            self._rewarded_at = ctx.step
        self._seen[self._state] += 1
        self._last_text = obs.text


    def _choose(self, ctx: Ctx, context: Context, candidates: list[str]) -> tuple[str, str]:
        return _likeliest(ctx, context, candidates)


def _commit_tool(context: Context) -> bool:
    return any(c.name == "commit_answer" for c in context.capabilities)


def _likeliest(ctx: Ctx, context: Context, candidates: list[str], prior: dict | None = None) -> tuple[str, str]:
    """(the candidate the backbone finds likeliest after the view, plus ``prior`` of its first word; how it was
    chosen): ``score`` (one likelihood pass), ``chat`` (no score(): the backbone picks a number from a list),
    ``order`` (neither worked: the first candidate)."""
    if len(candidates) == 1:
        return candidates[0], "only"
    messages = [{"role": "user", "content": f"{context.view.text}\nNext command:"}]
    prior = prior or {}
    try:
        scores = ctx.llm.score(messages, candidates)
    except NotImplementedError:
        return _chat_choice(ctx, context, candidates)
    total = [s + prior.get(c.split()[0].lower() if c.split() else "", 0.0) for s, c in zip(scores, candidates)]
    return candidates[max(range(len(candidates)), key=total.__getitem__)], "score"


def _chat_choice(ctx: Ctx, context: Context, candidates: list[str]) -> tuple[str, str]:
    listing = "\n".join(f"{i}. {c}" for i, c in enumerate(candidates, 1))
    reply = ctx.llm.chat([{"role": "user", "content": f"{context.view.text}\nWhich command should come next?\n"
                                                      f"{listing}\nReply with its number only."}],
                         max_new_tokens=4, temperature=0.0).text
    match = re.search(r"\d+", reply)
    if match and 1 <= int(match.group()) <= len(candidates):
        return candidates[int(match.group()) - 1], "chat"
    return candidates[0], "order"


def normalise_command(text: str) -> str:
    """A command as a model tends to mangle it, cleaned: no ``Action:`` prefix, quotes, brackets or trailing
    punctuation, single spaces, lower case."""
    text = re.sub(r"^\s*(action|command)\s*[:：]\s*", "", str(text), flags=re.IGNORECASE)
    previous = None
    while previous != text:  # quotes around punctuation around quotes...
        previous, text = text, text.strip().strip("`'\"[]<>").rstrip(".!;").strip()
    return " ".join(text.split()).lower()


@dataclass
class InterventionHooks(RuleHooks):
    """Interventions mined from one backbone's trajectories (see the module docstring); an ordinary hooks
    overlay, so they apply to any backbone unchanged."""
    normalise: bool = field(default=False, metadata={"help": "output interceptor: clean the command, then match an "
                                                             "admissible one exactly"})
    rerank: str = field(default="none", metadata={"help": "none | untried (replace a repeat in the same state) | "
                                                          "always (likeliest untried admissible command each step)",
                                                  "choices": ("none", "untried", "always")})
    prefer: tuple = field(default=(), metadata={"help": "(verb, weight) pairs added to the log-likelihood of "
                                                        "commands starting with the verb (learned from successes)"})

    def pre_action(self, ctx: Ctx, context: Context, decision: Decision) -> Decision | None:
        candidates = list(context.observation.candidates)
        if set(decision.args) == {"command"} and candidates:
            lowered = {c.lower(): c for c in candidates}
            command, rule = str(decision.args["command"]), ""
            if self.normalise and command.lower() not in lowered and normalise_command(command) in lowered:
                command, rule = lowered[normalise_command(command)], "normalise"
            tried = self._tried.get(self._state, set())
            if self.rerank == "always" or (self.rerank == "untried" and command.lower() in tried):
                fresh = [c for c in candidates if c.lower() not in tried] or candidates
                command, method = self._choose(ctx, context, fresh)
                rule = f"rerank:{method}"
            if rule:
                decision = Decision(decision.tool, {"command": command}, decision.thought,
                                    {**decision.data, "hook": rule})
        return super().pre_action(ctx, context, decision)

    def _choose(self, ctx: Ctx, context: Context, candidates: list[str]) -> tuple[str, str]:
        return _likeliest(ctx, context, candidates, dict(self.prefer))
