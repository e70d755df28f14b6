"""Scripted backbones: deterministic TEST DOUBLES, not models.

They let the whole pipeline (runtime, records, resume, sandbox RPC, repair) run offline in
milliseconds. Every reply is a pure function of the messages, so runs are reproducible. Their
ids start with ``scripted:`` and every record they produce says so.

Named doubles (``scripted:<name>``):
    look          always "Thought: ...\\nAction: look"
    pick-first    picks the first option listed as "- option" in the last user message
    pick-last     picks the last such option
    pick-hash     picks an option by a hash of the conversation (varied but deterministic)
    uniform       the harness-only control: chat replies as pick-first, and ``score`` gives every candidate
                  the same value (no word overlap, no knowledge), so a likelihood choice falls to the
                  harness's own priors and order
    fail          raises InfraError on every call (provider-outage double)
    reply:<text>  always replies <text>  ('\\n' escapes allowed)
A ``ScriptedBackbone(responder)`` takes any function ``messages -> str`` (or a list of replies,
cycled) for tests that need a particular script. Option ``temperature`` > 0 doubles for sampling: the
responder then also sees the call's ``seed`` (as a last ``{"role": "seed"}`` message), so pick-hash picks
by conversation and seed, still deterministic (what ``--repeat`` tests need, jitlab/repeats.py).
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from jitlab.errors import InfraError, UnknownName
from jitlab.plumbing import json_digest
from jitlab.protocol import Completion

__all__ = ["SCRIPTS", "ScriptedBackbone", "ScriptedConfig", "check_scripted", "get_scripted", "listed_options"]

PRICE_PER_TOKEN = 1e-6  # a nominal price so cost columns are exercised by tests


def listed_options(text: str) -> list[str]:
    """Lines of the form '- option' (the convention prompts use to list admissible actions)."""
    return [m.group(1).strip() for m in re.finditer(r"^\s*-\s+(.+)$", text, re.MULTILINE)]


def _last_user(messages: list[dict]) -> str:
    return next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")


def _pick(index: Callable[[list[str], list[dict]], int]) -> Callable[[list[dict]], str]:
    def responder(messages):
        options = listed_options(_last_user(messages)) or ["look"]
        choice = options[index(options, messages) % len(options)]
        return f"Thought: I will try '{choice}'.\nAction: {choice}"
    return responder


def _hash_index(options, messages) -> int:
    return int(json_digest(messages), 16)


def _fail(messages):
    raise InfraError("scripted:fail double: simulated provider outage")


SCRIPTS: dict[str, Callable[[list[dict]], str]] = {
    "look": lambda messages: "Thought: I should look around.\nAction: look",
    "pick-first": _pick(lambda options, messages: 0),
    "pick-last": _pick(lambda options, messages: -1),
    "pick-hash": _pick(_hash_index),
    "uniform": _pick(lambda options, messages: 0),
    "fail": _fail,
}


def _count(text: str) -> int:
    return max(1, len(text.split()))


class ScriptedBackbone:
    """A deterministic test double. ``responder`` is ``messages -> str`` or a list of replies."""

    def __init__(self, responder, name: str = "custom", delay_s: float = 0.0, temperature: float = 0.0,
                 uniform_scores: bool = False):
        if isinstance(responder, (list, tuple)):
            replies = list(responder)
            responder = lambda messages: replies[sum(m.get("role") == "assistant" for m in messages) % len(replies)]
        self.responder, self.delay_s, self.temperature = responder, delay_s, float(temperature)
        self.uniform_scores = uniform_scores
        self.id = f"scripted:{name}"
        self.calls = 0

    def chat(self, messages: list[dict], **params) -> Completion:
        start = time.perf_counter()
        self.calls += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        seeded = [*messages, {"role": "seed", "content": str(params.get("seed"))}] if self.temperature > 0 else messages
        text = self.responder(seeded)
        prompt = sum(_count(m.get("content", "")) for m in messages)
        completion = _count(text)
        return Completion(text=text, prompt_tokens=prompt, completion_tokens=completion,
                          cost=(prompt + completion) * PRICE_PER_TOKEN,
                          latency_s=time.perf_counter() - start)

    def score(self, messages: list[dict], candidates: list[str]) -> list[float]:
        """Deterministic pseudo log-likelihoods: word overlap with the last user message (``uniform``: all equal)."""
        if self.uniform_scores:
            return [0.0] * len(candidates)
        words = set(_last_user(messages).lower().split())
        return [len(words & set(c.lower().split())) / (1 + len(c.split())) - 1e-3 * i
                for i, c in enumerate(candidates)]


@dataclass
class ScriptedConfig:
    """Options of a scripted test double (``get_backbone("scripted:<name>", **options)``)."""
    delay_s: float = field(default=0.0, metadata={"help": "seconds each call sleeps (a slow backbone)", "min": 0})
    temperature: float = field(default=0.0, metadata={"help": "> 0 doubles for sampling: the reply depends on the call's "
                                                              "seed (tests of --repeat)", "min": 0})


def check_scripted(name: str) -> None:
    if not name.startswith("reply:") and name not in SCRIPTS:
        raise UnknownName("scripted backbone", f"scripted:{name}", [f"scripted:{k}" for k in SCRIPTS] + ["scripted:reply:<text>"])


def get_scripted(name: str, **options) -> ScriptedBackbone:
    """``options``: ScriptedConfig fields (get_backbone checks them first, as for every backend)."""
    check_scripted(name)
    if name.startswith("reply:"):
        text = name[len("reply:"):].replace("\\n", "\n")
        return ScriptedBackbone(lambda messages: text, name=name, **options)
    return ScriptedBackbone(SCRIPTS[name], name=name, uniform_scores=name == "uniform", **options)
