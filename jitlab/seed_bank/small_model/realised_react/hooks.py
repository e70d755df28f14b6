"""realised_react hooks: the model's Action text realised onto the admissible list (nearest command, or refused
and re-chosen from the list by likelihood)."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from jitlab.harnesskit import render_prompt, tokens
from jitlab.protocol import Context, Ctx, Decision

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.hooks.normalise_command
def normalise_command(text: str) -> str:
    """A command as a model tends to mangle it, cleaned: no ``Action:`` prefix, quotes, brackets or trailing
    punctuation, single spaces, lower case."""
    text = re.sub(r"^\s*(action|command)\s*[:：]\s*", "", str(text), flags=re.IGNORECASE)
    previous = None
    while previous != text:  # quotes around punctuation around quotes...
        previous, text = text, text.strip().strip("`'\"[]<>").rstrip(".!;").strip()
    return " ".join(text.split()).lower()


# library: jitlab.modules.realisation._DIRECTIONS
_DIRECTIONS = {"north", "south", "east", "west", "up", "down", "left", "right", "forward", "northeast",
               "northwest", "southeast", "southwest"}


# library: jitlab.modules.realisation.nearest
def nearest(text: str, candidates: list[str]) -> tuple[str, float]:
    """(the candidate nearest to ``text``, its similarity in [0, 1]): the mean of word overlap (Jaccard, words
    of the text in the candidate) and character similarity; a candidate whose direction words differ from the
    text's scores 0."""
    said, best = set(tokens(text)), ("", 0.0)
    for c in candidates:
        words = set(tokens(c))
        if (said & _DIRECTIONS) != (words & _DIRECTIONS):
            continue
        overlap = len(said & words) / len(said | words) if said | words else 0.0
        score = (overlap + difflib.SequenceMatcher(None, text.lower(), c.lower()).ratio()) / 2
        if score > best[1]:
            best = (c, score)
    return best


# library: jitlab.modules.realisation.realise
def realise(text: str, candidates: list[str], threshold: float = 0.6) -> tuple[str, str]:
    """(command, how): ``exact`` (admissible once cleaned), ``nearest`` (mapped), or ("", ``refused``)."""
    lowered = {c.lower(): c for c in candidates}
    clean = normalise_command(text)
    if clean in lowered:
        return lowered[clean], "exact"
    command, similarity = nearest(clean, candidates)
    return (command, "nearest") if command and similarity >= threshold else ("", "refused")


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


# library: jitlab.modules.realisation.RealisationHooks
@dataclass
class RealisationHooks:
    """Hooks: realise the model's text command onto the admissible list (see the module docstring)."""
    threshold: float = field(default=0.6, metadata={"help": "similarity a reply needs to be mapped to a command; "
                                                            "below it the reply is refused and the model re-chooses",
                                                    "min": 0.0, "max": 1.0})

    def pre_action(self, ctx: Ctx, context: Context, decision: Decision) -> Decision | None:
        candidates = list(context.observation.candidates)
        if len(decision.args) != 1 or not candidates or not isinstance(next(iter(decision.args.values())), str):
            return None
        (arg, sent), = decision.args.items()
        text = str(decision.data.get("raw_action") or sent)
        command, how = realise(text, candidates, self.threshold)
        data = {**decision.data, "parsed": how == "exact"}
        if how == "exact":
            data.setdefault("decided_by", "model_reply")
        elif how == "nearest":
            data.update(decided_by="mechanism", mechanism="realisation:nearest", hook="realisation:nearest")
        else:
            messages = [{"role": "user", "content": f"{context.view.text}\nNext command:"}]
            choice = choose(ctx, messages, candidates)
            command = choice.command
            data.update(decided_by=choice.decider()[0], mechanism="realisation:refused",
                        hook=f"realisation:refused:{choice.method}")
        return Decision(decision.tool, {arg: command}, decision.thought, data)


# ---- the harness's own code ----

class Hooks(RealisationHooks):
    pass
