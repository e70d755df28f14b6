"""Action realisation: free text mapped to the nearest admissible command, or refused with the admissible list.

Idea (Life-Harness, arXiv 2605.22166, "action realisation": the runtime layer between what the model says and
what the environment accepts): a small model's ``Action:`` line is often almost a command (``Take the coin.``,
``go to the north``, ``open door``) and sometimes nothing like one. ``realise`` cleans it (``Action:`` prefixes,
quotes, punctuation off: ``jitlab.modules.hooks.normalise_command``), then maps it to the admissible command it
is nearest to (word overlap, then character similarity) when that is near enough (``threshold``); otherwise it
*refuses* it: the text is not sent, the admissible list is put in front of the model and it chooses among them
(``jitlab.modules.likelihood.choose``: one ``score`` pass, or a numbered-list chat choice without ``score``).

``RealisationHooks`` is the hook module any harness can take (a ``hooks.py`` holding
``class Hooks(RealisationHooks)``): ``pre_action`` realises every text command whose tool takes one string
argument and the observation lists candidates; anything else passes untouched. Per step it records
``Decision.data``: ``decided_by`` (``model_reply`` when the reply was admissible as written, ``mechanism`` with
``mechanism: realisation:nearest`` when it was mapped, ``model_choice`` with ``mechanism: realisation:refused``
when the model re-chose from the list) and ``parsed`` (whether the reply was admissible after cleaning).

Couplings: the action's decision carries the model's text as the command (``to_decision`` in
``jitlab.modules.basic`` already maps to the nearest candidate: set that action's ``rerank`` to anything and
this hook still sees ``Decision.data["raw_action"]``, the text as the model wrote it, when there is one).
Caveats: "near" is lexical (``open door`` -> ``open wooden door`` is right, ``go west`` -> ``go east`` would be
wrong, which is why directions must match exactly and the threshold is high); a refusal costs one extra
scoring pass.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from jitlab.harnesskit import tokens
from jitlab.modules.hooks import normalise_command
from jitlab.modules.likelihood import choose
from jitlab.protocol import Context, Ctx, Decision

__all__ = ["RealisationHooks", "nearest", "realise"]

_DIRECTIONS = {"north", "south", "east", "west", "up", "down", "left", "right", "forward", "northeast",
               "northwest", "southeast", "southwest"}


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


def realise(text: str, candidates: list[str], threshold: float = 0.6) -> tuple[str, str]:
    """(command, how): ``exact`` (admissible once cleaned), ``nearest`` (mapped), or ("", ``refused``)."""
    lowered = {c.lower(): c for c in candidates}
    clean = normalise_command(text)
    if clean in lowered:
        return lowered[clean], "exact"
    command, similarity = nearest(clean, candidates)
    return (command, "nearest") if command and similarity >= threshold else ("", "refused")


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
