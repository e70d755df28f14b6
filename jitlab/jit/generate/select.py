"""Selectors for static JIT: order N candidates WITHOUT looking at benchmark scores.

    order, info = rank(candidates, "logprob", task.public(), llm, generator, references)

``validity``  generation order (the caller then takes the first candidate whose smoke run passed)
``logprob``   the generator's log-probability of each candidate: compose's summed option scores, or,
              for code candidates, ``llm.score`` of the reply given the generation prompt
``judge``     a judge backbone reads each candidate's description (M/P/F/A) and names one

In every case the caller runs the first candidate *in this order* that passed validation, so
validity is always required; the selector only breaks ties among valid candidates.
"""
from __future__ import annotations

import re

from jitlab.errors import UnknownName
from jitlab.jit.generate.base import Candidate, describe_files, render

__all__ = ["SELECTORS", "rank"]

SELECTORS = ("validity", "logprob", "judge")


def rank(candidates: list[Candidate], selector: str, task: dict, llm=None, generator=None,
         references=None) -> tuple[list[int], dict]:
    """(candidate indices, best first; details for the record)."""
    if selector not in SELECTORS:
        raise UnknownName("selector", selector, SELECTORS)
    order = list(range(len(candidates)))
    if selector == "validity" or len(candidates) <= 1:
        return order, {"selector": selector}
    if selector == "logprob":
        scores = [_logprob(c, task, llm, generator, references) for c in candidates]
        order.sort(key=lambda i: (-(scores[i] if scores[i] is not None else float("-inf")), i))
        return order, {"selector": selector, "logprobs": scores}
    prompt = render("judge.j2", task=task, candidates=[
        {"name": c.name, "modules": {r: str((describe_files(c.files).get("modules") or {}).get(r, "?"))
                                     for r in "MPFA"}} for c in candidates])
    reply = llm.chat([{"role": "user", "content": prompt}], max_new_tokens=8).text
    match = re.search(r"\d+", reply)
    pick = int(match.group()) - 1 if match else -1
    if 0 <= pick < len(candidates):
        order.remove(pick)
        order.insert(0, pick)
    return order, {"selector": selector, "judge_reply": reply[:200], "judge_pick": pick}


def _logprob(candidate: Candidate, task: dict, llm, generator, references) -> float | None:
    if candidate.logprob is not None:
        return candidate.logprob
    reply = candidate.meta.get("reply")
    if not reply or llm is None or not hasattr(generator, "messages"):
        return None
    try:
        return float(llm.score(generator.messages(task, references or []), [reply])[0])
    except NotImplementedError:
        return None
