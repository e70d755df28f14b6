"""Likelihood choice over admissible actions: the backbone ranks the commands; it does not have to write one.

Idea (GLAM, Carta et al. 2023, arXiv 2302.02662: an LLM as a policy over a known action set, each action's
probability its likelihood as the continuation of the prompt): a 135M model that cannot keep a
``Thought/Action`` format still assigns sensible likelihoods to ``take coin`` vs ``examine coin`` after the room
text. ``choose`` makes ONE batched ``ctx.llm.score`` call over the candidates (one prefill of the prompt plus one
pass over all of them), normalises each sum log-likelihood by the candidate's length (words + the end token,
so long commands are not penalised for being long) and adds a prior (bonuses from a planner: goal grounding,
the map's frontier, an egocentric directive). Backbones without ``score`` (litellm providers) get a numbered
list and reply with a number (``choose_number`` prompt); when neither works, the first option is taken.

``LikelihoodAction`` (A) is the step built on it, the library form of the 24-line action issue 29 measured
(5/10 TextWorld test tasks on SmolLM2-135M at a third of ReAct's tokens, where ReAct solved 2): per observed
state it chooses among the admissible commands not yet tried there (``jitlab.modules.exploration.StateBook``),
with ``demote`` verbs (``examine``, ``look``, ``inventory``) offered only when nothing else is left, and the
directive's ``prior`` (``Directive.data["prior"]``: {command: bonus}) added to the scores. With
``thought="own"`` the model first writes one short thought (a chat call, ``Thought:`` prefilled, stopped at the
line end) and the candidates are scored as the ``Action:`` that follows it; with ``"none"`` there is no chat
call at all.

``margin`` (default 0: off) lets the backbone speak only when it is clear: its pick stands when its normalised
score leads the runner-up by at least ``margin``; under it the backbone abstains and the prior and the
bookkeeping's order decide (the order the harness-only control follows). Measured because on TextWorld the
uniform-score control of the same harness solved more games than the 135M model's choice
(``docs/measurements.md``).

Cache-friendly by construction: the prompt is the harness's ``system`` (task first, fixed for the episode) and
``step`` (the view, whose start stays put: ``jitlab.modules.basic.history_text``, then the directive); the
candidates are the reply, so they never enter the prefix.

Per step, ``Decision.data`` records ``decided_by`` (``model_choice`` only when the backbone's own unique first
choice among two or more options stood; ``mechanism`` with ``mechanism`` naming it otherwise: the bookkeeping left
one option, the top scores tied so the order chose (``likelihood:tie``), the prior overturned or broke a tie of the
backbone's scores (``likelihood:prior``), the backbone's lead was under ``margin`` (``likelihood:defer``), or no
backbone method worked) and ``choice`` (method score | chat | tie | defer | order | only, why the options were
narrowed: untried | escape | all, how many, the top scores, ``prior_changed``, the backbone's ``gap``).

Couplings: needs admissible ``candidates`` and a single-string-argument tool (``act(command)``); the planner
may put ``prior`` into ``Directive.data``. Caveats: ``score`` sums log-probabilities, so the length
normalisation by words is an approximation of per-token normalisation; a wrong prior weight can drown the
model's preference (see ``jitlab.modules.grounding``); with no candidates this action has nothing to choose
from and sends ``look``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitlab.modules.exploration import StateBook
from jitlab.modules.prompting import render
from jitlab.modules.text import render_prompt
from jitlab.protocol import Context, Ctx, Decision, Observation

__all__ = ["Choice", "LikelihoodAction", "choose", "command_tool", "normalised"]

NORMALISE = ("words", "chars", "none")


def normalised(scores: list[float], candidates: list[str], mode: str = "words") -> list[float]:
    """Sum log-likelihoods made comparable across lengths: per word plus one (the end token), per 4 characters,
    or as they are."""
    if mode == "none":
        return list(scores)
    if mode == "chars":
        return [s / max(1.0, len(c) / 4) for s, c in zip(scores, candidates)]
    return [s / (len(c.split()) + 1) for s, c in zip(scores, candidates)]


TIE = 1e-6  # scores closer than this are a tie: the candidate order decides, not the backbone


@dataclass
class Choice:
    """One choice among candidates: the command, how it was chosen and the (normalised + prior) scores.

    ``method``: score | chat (the backbone chose) | tie (the top scores were equal, the order chose) | defer (the
    backbone's lead was under the margin: the prior and the order chose) | order (the chat reply named no
    candidate) | only (one candidate). ``model_pick`` is the backbone's own unique first choice before the prior
    ("" when its top scores were tied); ``gap`` its lead over the runner-up (normalised score)."""
    command: str
    method: str                              # score | chat | tie | defer | order | only
    scores: list[float] = field(default_factory=list)
    model_pick: str = ""
    gap: float | None = None

    def decider(self) -> tuple[str, str | None]:
        """(decided_by, mechanism): the backbone's choice only where its own unique pick stood; a tie or a prior
        that overturned (or broke a tie of) the backbone's scores is the harness's decision."""
        if self.method == "chat" or (self.method == "score" and self.model_pick == self.command):
            return "model_choice", None
        if self.method == "score":
            return "mechanism", "likelihood:prior"
        return "mechanism", f"likelihood:{self.method}"

    def record(self, candidates: list[str], top: int = 3) -> dict:
        ranked = sorted(zip(self.scores, candidates), reverse=True)[:top]
        return {"method": self.method, "options": len(candidates), "top": [[c, round(s, 3)] for s, c in ranked],
                "prior_changed": self.method == "score" and self.model_pick != self.command,
                "gap": None if self.gap is None else round(self.gap, 3)}


def _unique_best(scores: list[float]) -> int | None:
    """The index of the one highest score, None when two or more are within ``TIE`` of it."""
    best = max(scores)
    top = [i for i, s in enumerate(scores) if s >= best - TIE]
    return top[0] if len(top) == 1 else None


def _lead(scores: list[float]) -> float:
    """How far the highest score is above the second highest."""
    first, second = sorted(scores, reverse=True)[:2]
    return first - second


def choose(ctx: Ctx, messages: list[dict], candidates: list[str], prior: dict | None = None,
           normalise: str = "words", prefix: str = "", margin: float = 0.0) -> Choice:
    """The candidate the backbone finds likeliest as its reply to ``messages`` (plus ``prior[candidate]``).

    One batched ``score`` call; ``prefix`` (e.g. ``"Action:"``) is prefilled as the start of the reply and each
    candidate continues it after a space. With ``margin`` > 0 the backbone abstains when its own normalised lead
    over the runner-up is smaller than that: the prior alone decides, ties by the candidates' order (method
    ``defer``). Without ``score``: a numbered list, the backbone replies with a number."""
    if not candidates:
        raise ValueError("choose() needs at least one candidate")
    if len(candidates) == 1:
        return Choice(candidates[0], "only", [0.0])
    prior = prior or {}
    asked = messages + ([{"role": "assistant", "content": prefix}] if prefix else [])
    try:
        raw = ctx.llm.score(asked, [f" {c}" if prefix else c for c in candidates])
    except NotImplementedError:
        return _numbered(ctx, messages, candidates)
    plain = normalised(raw, candidates, normalise)
    own, lead = _unique_best(plain), _lead(plain)
    model_pick = candidates[own] if own is not None else ""
    if margin > 0 and lead < margin:
        scores = [float(prior.get(c, 0.0)) for c in candidates]
        return Choice(candidates[scores.index(max(scores))], "defer", scores, model_pick, lead)
    scores = [s + float(prior.get(c, 0.0)) for s, c in zip(plain, candidates)]
    best = _unique_best(scores)
    if best is None:
        return Choice(candidates[scores.index(max(scores))], "tie", scores, model_pick, lead)
    return Choice(candidates[best], "score", scores, model_pick, lead)


def _numbered(ctx: Ctx, messages: list[dict], candidates: list[str]) -> Choice:
    listing = render_prompt(ctx.prompts, "choose_number", candidates=candidates)
    last = dict(messages[-1])
    last["content"] = f"{last['content']}\n{listing}"
    reply = ctx.llm.chat(messages[:-1] + [last], max_new_tokens=4, temperature=0.0).text
    match = re.search(r"\d+", reply)
    if match and 1 <= int(match.group()) <= len(candidates):
        return Choice(candidates[int(match.group()) - 1], "chat")
    return Choice(candidates[0], "order")


def command_tool(context: Context) -> tuple[str, str]:
    """(tool name, argument name) of the exposed tool that takes one text command (``act(command)``)."""
    for cap in context.capabilities:
        props = cap.args.get("properties", {})
        if len(props) == 1 and next(iter(props.values())).get("type") == "string":
            return cap.name, next(iter(props))
    return "act", "command"


@dataclass
class LikelihoodAction:
    """A: per step, one likelihood choice among the admissible commands untried in this state (module docstring)."""
    normalise: str = field(default="words", metadata={"help": "length normalisation of the sum log-likelihood",
                                                      "choices": NORMALISE})
    thought: str = field(default="none", metadata={"help": "'own': the model writes a one-line thought first and "
                                                           "the commands are scored after it; 'none': no chat call",
                                                   "choices": ("none", "own")})
    explore: bool = field(default=True, metadata={"help": "choose among commands not yet tried in this state "
                                                          "(StateBook); all tried: the least tried"})
    state: str = field(default="place", metadata={"help": "what a state is for the bookkeeping: 'place' (room "
                                                          "names in the text), 'text' (whole observation) or "
                                                          "'auto' (place once the episode names one)",
                                                  "choices": ("place", "text", "auto")})
    demote: tuple = field(default=("examine", "look", "inventory"), metadata={
        "help": "verbs offered only when no other command is left (information-only commands)"})
    info_last: bool = field(default=True, metadata={"help": "when only demoted commands are untried here, try "
                                                            "them (True) or the least-tried other commands (False)"})
    max_candidates: int = field(default=40, metadata={"help": "admissible commands scored per step", "min": 1})
    thought_tokens: int = field(default=24, metadata={"help": "tokens of the model's own thought", "min": 1})
    margin: float = field(default=0.0, metadata={"help": "the backbone's pick stands only when its normalised score "
                                                         "leads the runner-up by at least this; under it the prior "
                                                         "and the bookkeeping order decide (0: always the backbone)",
                                                 "min": 0.0})

    def reset(self, ctx: Ctx) -> None:
        self.book = StateBook(mode=self.state)

    def on_init(self, ctx: Ctx, obs: Observation) -> None:
        self.book.start(obs.text)

    def post_feedback(self, ctx: Ctx, decision: Decision, obs: Observation) -> None:
        command = next(iter(decision.args.values()), "") if len(decision.args) == 1 else ""
        self.book.record(str(command), obs.text, obs.reward)

    def messages(self, context: Context, ctx: Ctx) -> list[dict]:
        values = {"task": ctx.task.public(), "view": context.view.text, "directive": context.directive.text,
                  "hints": context.hints, "tools": context.capabilities, "step": context.step}
        return [{"role": "system", "content": render(ctx.prompts["system"], **values)},
                {"role": "user", "content": render(ctx.prompts["step"], **values)}]

    def _demoted(self, command: str, prior: dict) -> bool:
        words = command.split()
        return bool(words) and words[0].lower() in self.demote and prior.get(command, 0.0) <= 0

    def options(self, candidates: list[str], prior: dict | None = None) -> tuple[list[str], str]:
        """(the commands to choose among, why): the bookkeeping's narrowing, with ``demote`` verbs (unless the
        prior favours them) offered only when no other command is untried; then, with ``info_last`` off, the
        least-tried other commands come before them."""
        prior = prior or {}
        options, why = self.book.options(candidates) if self.explore else (list(candidates), "all")
        active = [c for c in options if not self._demoted(c, prior)]
        if not active and why == "untried" and not self.info_last:
            active = self.book.escape([c for c in candidates if not self._demoted(c, prior)]) \
                if any(not self._demoted(c, prior) for c in candidates) else []
            why = "escape" if active else why
        return (active or options)[: self.max_candidates], why

    def act(self, context: Context, ctx: Ctx) -> Decision:
        tool, arg = command_tool(context)
        candidates = list(context.observation.candidates)
        if not candidates:
            return Decision(tool, {arg: "look"}, "", {"decided_by": "mechanism", "mechanism": "no_candidates"})
        prior = context.directive.data.get("prior") or {}
        options, why = self.options(candidates, prior)
        messages, prefix, thought = self.messages(context, ctx), "", ""
        if self.thought == "own":
            reply = ctx.llm.chat(messages + [{"role": "assistant", "content": "Thought:"}],
                                 max_new_tokens=self.thought_tokens, stop=["\n"]).text
            thought = " ".join(reply.split())
            prefix = f"Thought: {thought}\nAction:"
        choice = choose(ctx, messages, options, prior, self.normalise, prefix, self.margin)
        decided_by, mechanism = choice.decider()
        data = {"decided_by": decided_by, "choice": {**choice.record(options), "why": why}}
        if mechanism:
            data["mechanism"] = f"exploration:{why}" if choice.method == "only" else mechanism
        return Decision(tool, {arg: choice.command}, thought, data)
