"""explorer_quantity action: explorer_margin's, the backbone deciding only where its lead over the runner-up is at
least 1.0 (normalised log-likelihood; chosen on the TextWorld dev split); elsewhere the prior (here with the quantity
prior) and the bookkeeping's order decide."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from jitlab.harnesskit import render, render_prompt
from jitlab.protocol import Context, Ctx, Decision, Observation

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.exploration._flat
def _flat(text: str) -> str:
    return " ".join(str(text).split()).lower()


# library: jitlab.modules.exploration._HEADER
_HEADER = re.compile(r"^\s*-=\s*(.+?)\s*=-\s*$", re.MULTILINE)


# library: jitlab.modules.exploration._YOU_ARE
_YOU_ARE = re.compile(r"\byou (?:are|find yourself) (?:now )?in (?:a|an|the) ([a-z][a-z ]{1,30}?)[.,!]",
                      re.IGNORECASE)


# library: jitlab.modules.exploration.place_name
def place_name(text: str) -> str:
    """The place an observation describes (its ``-= Name =-`` header, else ``You are in the X``), lower case;
    "" when it names none."""
    header = _HEADER.findall(str(text))
    if header:
        return " ".join(header[-1].split()).lower()
    match = _YOU_ARE.search(str(text))
    return " ".join(match.group(1).split()).lower() if match else ""


# library: jitlab.modules.exploration.REFUSALS
REFUSALS = re.compile(r"nothing happens|you can't|you cannot|can't do that|not a verb|don't understand|"
                      r"doesn't understand|that's not something|unknown (tool|command)|not admissible|"
                      r"invalid (action|command)|you don't see|there is no|you need to|is closed|"
                      r"i only understood|you have to|already", re.IGNORECASE)


# library: jitlab.modules.exploration.StateBook
@dataclass
class StateBook:
    """Per-state record of commands tried and failed, and state visits (see the module docstring)."""
    mode: str = field(default="place", metadata={"help": "what a state is: 'place' (the room an observation "
                                                         "names; other text keeps the room), 'text' (the "
                                                         "whole observation) or 'auto' (place once the episode "
                                                         "has named one, text until then)",
                                                 "choices": ("place", "text", "auto")})
    loop_after: int = field(default=3, metadata={"help": "visits of the same state after which it counts as a "
                                                         "loop (escape: the least-tried commands)", "min": 1})

    def __post_init__(self):
        self.start("")

    def start(self, text: str) -> None:
        """Forget everything; ``text`` is the first observation."""
        self.named = False   # 'auto': whether an observation of this episode has named a place
        self.state = self.key(text, "")
        self.visits: Counter = Counter({self.state: 1})
        self.tried: dict[str, Counter] = {}
        self.failed: dict[str, set] = {}
        self.outcomes: list[tuple[str, str, bool]] = []   # (state, command, failed), in order
        self._last = _flat(text)

    def key(self, text: str, previous: str) -> str:
        if self.mode == "text":
            return _flat(text)
        place = place_name(text)
        self.named = self.named or bool(place)
        if self.mode == "auto" and not self.named:
            return _flat(text)
        return place or previous

    def record(self, command: str, text: str, reward: float = 0.0) -> bool:
        """Note that ``command`` was issued in the current state and ``text`` came back; returns whether it
        failed (refused, or nothing changed, and no reward)."""
        command, flat = _flat(command), _flat(text)
        new = self.key(text, self.state)
        failed = reward <= 0 and new == self.state and (bool(REFUSALS.search(flat)) or flat == self._last)
        self.tried.setdefault(self.state, Counter())[command] += 1
        if failed:
            self.failed.setdefault(self.state, set()).add(command)
        self.outcomes.append((self.state, command, failed))
        if reward > 0:  # progress changes what is possible here: everything may be tried again
            self.tried[self.state], self.failed[self.state] = Counter(), set()
        self._last = flat
        if new != self.state:
            self.visits[new] += 1
        self.state = new
        return failed

    def fresh(self, candidates: list[str]) -> list[str]:
        """The candidates not yet tried in the current state (listed order)."""
        tried = self.tried.get(self.state, Counter())
        return [c for c in candidates if _flat(c) not in tried]

    def allowed(self, candidates: list[str]) -> list[str]:
        """The candidates that have not failed in the current state (all of them if every one has)."""
        failed = self.failed.get(self.state, set())
        return [c for c in candidates if _flat(c) not in failed] or list(candidates)

    def looping(self) -> bool:
        """Has the current state been visited ``loop_after`` times or more?"""
        return self.visits[self.state] >= self.loop_after

    def escape(self, candidates: list[str]) -> list[str]:
        """The allowed candidates tried least often in the current state (the way out of a loop)."""
        allowed = self.allowed(candidates)
        tried = self.tried.get(self.state, Counter())
        least = min((tried[_flat(c)] for c in allowed), default=0)
        return [c for c in allowed if tried[_flat(c)] == least]

    def options(self, candidates: list[str]) -> tuple[list[str], str]:
        """(the candidates to choose among now, why): ``untried`` (untried and not failed here), ``escape``
        (all tried: the least-tried), or ``all`` (no candidates to narrow)."""
        if not candidates:
            return [], "all"
        fresh = [c for c in self.fresh(candidates) if c in self.allowed(candidates)]
        if fresh:
            return fresh, "untried"
        return self.escape(candidates), "escape"

    def summary(self, limit: int = 6) -> str:
        """One line: the current state, its visits and the commands that failed in it."""
        failed = sorted(self.failed.get(self.state, set()))[:limit]
        where = self.state if self.mode == "place" and self.state else "here"
        return (f"Visits to {where}: {self.visits[self.state]}."
                + (f" Failed here: {', '.join(failed)}." if failed else ""))


# library: jitlab.modules.likelihood.command_tool
def command_tool(context: Context) -> tuple[str, str]:
    """(tool name, argument name) of the exposed tool that takes one text command (``act(command)``)."""
    for cap in context.capabilities:
        props = cap.args.get("properties", {})
        if len(props) == 1 and next(iter(props.values())).get("type") == "string":
            return cap.name, next(iter(props))
    return "act", "command"


# library: jitlab.modules.likelihood.Choice
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


# library: jitlab.modules.likelihood.normalised
def normalised(scores: list[float], candidates: list[str], mode: str = "words") -> list[float]:
    """Sum log-likelihoods made comparable across lengths: per word plus one (the end token), per 4 characters,
    or as they are."""
    if mode == "none":
        return list(scores)
    if mode == "chars":
        return [s / max(1.0, len(c) / 4) for s, c in zip(scores, candidates)]
    return [s / (len(c.split()) + 1) for s, c in zip(scores, candidates)]


# library: jitlab.modules.likelihood.TIE
TIE = 1e-6  # scores closer than this are a tie: the candidate order decides, not the backbone


# library: jitlab.modules.likelihood._unique_best
def _unique_best(scores: list[float]) -> int | None:
    """The index of the one highest score, None when two or more are within ``TIE`` of it."""
    best = max(scores)
    top = [i for i, s in enumerate(scores) if s >= best - TIE]
    return top[0] if len(top) == 1 else None


# library: jitlab.modules.likelihood._lead
def _lead(scores: list[float]) -> float:
    """How far the highest score is above the second highest."""
    first, second = sorted(scores, reverse=True)[:2]
    return first - second


# library: jitlab.modules.likelihood._numbered
def _numbered(ctx: Ctx, messages: list[dict], candidates: list[str]) -> Choice:
    listing = render_prompt(ctx.prompts, "choose_number", candidates=candidates)
    last = dict(messages[-1])
    last["content"] = f"{last['content']}\n{listing}"
    reply = ctx.llm.chat(messages[:-1] + [last], max_new_tokens=4, temperature=0.0).text
    match = re.search(r"\d+", reply)
    if match and 1 <= int(match.group()) <= len(candidates):
        return Choice(candidates[int(match.group()) - 1], "chat")
    return Choice(candidates[0], "order")


# library: jitlab.modules.likelihood.choose
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


# library: jitlab.modules.likelihood.NORMALISE
NORMALISE = ("words", "chars", "none")


# library: jitlab.modules.likelihood.LikelihoodAction
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


# ---- the harness's own code ----

@dataclass
class Action(LikelihoodAction):
    info_last: bool = field(default=False, metadata={"help": "a room exhausted: move on rather than read"})
    margin: float = field(default=1.0, metadata={"help": "the backbone's lead it needs to decide (dev split)"})
