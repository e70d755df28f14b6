"""Exploration bookkeeping: per observed state, the actions tried there and what came of them.

Idea: a small model repeats itself. It re-reads the same room, re-takes what it just dropped, walks back and
forth between two rooms. A ``StateBook`` remembers, for every state the agent has observed, which commands it
issued there and whether each failed, so an action can prefer what is untried (``fresh``), never repeat an
action that failed in that state, count visits, notice a loop and escape it (``escape``: the commands tried
least often in the state). This is the count-based half of the hand-written action that issue 29 measured
(5/10 TextWorld test tasks on SmolLM2-135M, where ReAct solved 2) and of Life-Harness's trajectory regulation
(arXiv 2605.22166, "block repeated failures, break loops"); ``jitlab.modules.hooks.RuleHooks`` applies the
same rules as after-the-fact overrides, this book is the state an action consults *before* it chooses.

What a state is (``key``): with ``mode="place"`` (TextWorld-like text) the place named by the observation's
header (``-= Kitchen =-``) or by ``You are in the X``; an observation without a place (``You take the coin``,
an ``examine`` text) keeps the previous state, so reading things does not make a room new again. With
``mode="text"`` (BabyAI-like egocentric views) the whole observation, whitespace-collapsed, is the state. With
``mode="auto"`` (for a harness that does not know which kind of text it will see) the whole observation until an
observation of the episode names a place, and places from then on.

A rewarded action wipes the state's record (progress, such as an ingredient cooked, changes what is possible
there: ``prepare meal`` refused before may work now). An action *failed* when it earned no reward, left the
state as it was, and the game refused it (``REFUSALS``) or nothing changed (the observation repeats the
previous one word for word).

Couplings: read-only on observations and the commands the harness sent; used by
``jitlab.modules.likelihood.LikelihoodAction`` (its ``explore`` field) and usable by any action or hook.
Caveats: the refusal patterns are English game phrasings; in ``place`` mode two rooms with the same name are
one state, and what changes in a room (a door opened, an object taken) does not make it a new state (the book
lets the commands listed anew be tried, as they are untried there).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["REFUSALS", "StateBook", "place_name"]

REFUSALS = re.compile(r"nothing happens|you can't|you cannot|can't do that|not a verb|don't understand|"
                      r"doesn't understand|that's not something|unknown (tool|command)|not admissible|"
                      r"invalid (action|command)|you don't see|there is no|you need to|is closed|"
                      r"i only understood|you have to|already", re.IGNORECASE)
_HEADER = re.compile(r"^\s*-=\s*(.+?)\s*=-\s*$", re.MULTILINE)
_YOU_ARE = re.compile(r"\byou (?:are|find yourself) (?:now )?in (?:a|an|the) ([a-z][a-z ]{1,30}?)[.,!]",
                      re.IGNORECASE)


def place_name(text: str) -> str:
    """The place an observation describes (its ``-= Name =-`` header, else ``You are in the X``), lower case;
    "" when it names none."""
    header = _HEADER.findall(str(text))
    if header:
        return " ".join(header[-1].split()).lower()
    match = _YOU_ARE.search(str(text))
    return " ".join(match.group(1).split()).lower() if match else ""


def _flat(text: str) -> str:
    return " ".join(str(text).split()).lower()


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
