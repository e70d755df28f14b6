"""A map memory for navigation text: places, exits, the frontier of unexplored exits and the way back.

Idea: text adventures (TextWorld, Jericho-style games) describe one place at a time; a small model forgets
which exits it has taken and walks in circles. ``TextMap`` builds the map an explorer would draw, from the
text alone: the place an observation names (``-= Kitchen =-``, ``You are in the kitchen``, via
``jitlab.modules.exploration.place_name``), its exits (the compass words in the text and the admissible ``go X``
commands), and the edges learned by walking (``go east`` from the kitchen led to the pantry). The *frontier*
is the set of exits not yet taken; ``route`` is the shortest known walk to the nearest place that still has
one (the way back out of a dead end). ``MapPlanner`` (P) turns it into a directive (a short map text) and a
prior over the admissible commands (``Directive.data["prior"]``): a bonus for an untaken exit here, else for
the first step of the route to the frontier. Classic frontier-based exploration (Yamauchi 1997) on a graph
parsed from text, as text-game agents do with knowledge graphs (KG-A2C, Ammanabrolu & Hausknecht 2020).

Couplings: reads observation events and the admissible candidates (``Event.data["candidates"]``) of the view;
the prior is consumed by ``jitlab.modules.likelihood.LikelihoodAction``. No game internals: nothing but the
text the agent was shown. Caveats: places are identified by name (two rooms called "corridor" merge); a
closed door is an exit whose ``go`` fails until it is opened (the failed move keeps it on the frontier, so the
prior stays on it; the action's bookkeeping then stops repeating it); only compass directions and up/down.
"""
from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from jitlab.modules.exploration import place_name
from jitlab.protocol import Ctx, Directive, View

__all__ = ["DIRECTIONS", "MapPlanner", "TextMap", "exits_in"]

DIRECTIONS = ("north", "south", "east", "west", "northeast", "northwest", "southeast", "southwest", "up", "down")
_OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east", "up": "down", "down": "up",
             "northeast": "southwest", "southwest": "northeast", "northwest": "southeast", "southeast": "northwest"}
_GO = re.compile(r"^\s*go\s+(" + "|".join(DIRECTIONS) + r")\s*$", re.IGNORECASE)
_EXIT_WORD = re.compile(r"\b(" + "|".join(DIRECTIONS) + r")(?:ward)?\b", re.IGNORECASE)
_EXIT_CONTEXT = re.compile(r"exit|door|doorway|passage|path|leading|lead|going|go |head|entrance|gateway|portal",
                           re.IGNORECASE)


def exits_in(text: str, candidates: list[str] = ()) -> list[str]:
    """Directions an observation offers: ``go X`` among the candidates when there are any (the game's own word),
    else compass words in sentences that talk about exits or doors (in the order first mentioned; an intro that
    gives directions reads as exits, which is why the candidates win)."""
    found: dict[str, None] = {}
    for c in candidates:
        m = _GO.match(str(c))
        if m:
            found.setdefault(m.group(1).lower())
    if found:
        return list(found)
    for sentence in re.split(r"(?<=[.!?])\s+", str(text)):
        if _EXIT_CONTEXT.search(sentence):
            for m in _EXIT_WORD.finditer(sentence):
                found.setdefault(m.group(1).lower())
    return list(found)


@dataclass
class TextMap:
    """Places, their exits and the edges walked (see the module docstring)."""

    def __post_init__(self):
        self.exits: dict[str, list[str]] = {}           # place -> directions it offers
        self.edges: dict[str, dict[str, str]] = {}      # place -> {direction: place it led to}
        self.here = ""

    def see(self, text: str, candidates: list[str] = ()) -> None:
        """An observation: if it names a place, that is where the agent is; its exits are added."""
        place = place_name(text)
        if place:
            self.here = place
        if self.here:
            known = self.exits.setdefault(self.here, [])
            known += [d for d in exits_in(text, candidates) if d not in known]

    def moved(self, command: str, text: str, candidates: list[str] = ()) -> None:
        """``command`` was sent from ``self.here`` and ``text`` came back: learn the edge if it was a move."""
        m, before = _GO.match(str(command)), self.here
        self.see(text, candidates)
        if m and before and self.here and self.here != before:
            direction = m.group(1).lower()
            self.edges.setdefault(before, {})[direction] = self.here
            self.edges.setdefault(self.here, {}).setdefault(_OPPOSITE[direction], before)
            back = self.exits.setdefault(self.here, [])
            if _OPPOSITE[direction] not in back:
                back.append(_OPPOSITE[direction])

    def frontier(self, place: str | None = None) -> list[str]:
        """Exits of ``place`` (default: here) not yet taken."""
        place = self.here if place is None else place
        taken = self.edges.get(place, {})
        return [d for d in self.exits.get(place, []) if d not in taken]

    def route(self) -> list[str]:
        """Directions of the shortest known walk from here to the nearest place with a frontier ([] when here
        has one, or no such place is known)."""
        if not self.here or self.frontier():
            return []
        seen, queue = {self.here}, deque([(self.here, [])])
        while queue:
            place, path = queue.popleft()
            for direction, nxt in self.edges.get(place, {}).items():
                if nxt in seen:
                    continue
                if self.frontier(nxt):
                    return path + [direction]
                seen.add(nxt)
                queue.append((nxt, path + [direction]))
        return []

    def text(self, limit: int = 8) -> str:
        """A few lines: where the agent is, each known place's exits (taken ones with where they lead)."""
        if not self.here:
            return ""
        lines = [f"You are in: {self.here}."]
        for place in [self.here] + [p for p in self.exits if p != self.here][: limit - 1]:
            taken = self.edges.get(place, {})
            exits = ", ".join(f"{d}->{taken[d]}" if d in taken else f"{d}->?" for d in self.exits.get(place, []))
            lines.append(f"{place}: {exits or 'no exits seen'}")
        route = self.route()
        if self.frontier():
            lines.append(f"Unexplored exits here: {', '.join(self.frontier())}.")
        elif route:
            lines.append(f"Nothing new here; the way to unexplored exits: {', '.join('go ' + d for d in route)}.")
        return "\n".join(lines)


@dataclass
class MapPlanner:
    """P: the map as the directive, and a prior for the exits to explore (see the module docstring)."""
    bonus: float = field(default=1.0, metadata={"help": "added to the score of 'go X' for an unexplored exit here "
                                                        "(or the first step of the way to one)", "min": 0.0})
    show: bool = field(default=True, metadata={"help": "put the map text into the directive"})

    def reset(self, ctx: Ctx) -> None:
        self.map, self._seen, self._last = TextMap(), 0, ""

    def _read(self, view: View) -> list[str]:
        """Feed the view's events the map has not seen; returns the latest candidates."""
        candidates = []
        events = view.events
        for event in events[self._seen:]:
            if event.kind == "action":
                self._last = event.content
            elif event.kind in ("observation", "tool_result"):
                candidates = list(event.data.get("candidates", []))
                if self._last:
                    self.map.moved(self._last, event.content, candidates)
                else:
                    self.map.see(event.content, candidates)
                self._last = ""
        self._seen = len(events)
        return candidates

    def plan(self, view: View, ctx: Ctx) -> Directive:
        self._read(view)
        return Directive(self.map.text() if self.show else "", {"prior": self.prior()})

    def prior(self) -> dict:
        wanted = self.map.frontier() or self.map.route()[:1]
        return {f"go {d}": self.bonus for d in wanted}
