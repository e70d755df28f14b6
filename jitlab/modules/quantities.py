"""Quantities read from the text and compared or computed in code: a prior for goals that ask for an order by
quantity or for the object whose quantity answers a stated arithmetic problem.

Idea: a 135M model does not compare ``22mm`` with ``4m`` or work out ``divide 42 by 7`` by likelihood, but the
quantities are in what the agent is given: object names carry them (``take 22mm of acrylic``, ``take 8 brocollis``)
and a problem the agent reads states its numbers (``subtract 34 from 46``). ``quantity`` reads the amount that opens
an object's name (a number, and a unit it converts to the unit's base: mg/g/kg to grams, mm/cm/m/km to metres, ml/l
to litres; a bare number is a count); ``solve`` computes the last arithmetic problem a text states (``add A and B``,
``subtract A from B``, ``multiply A by B``, ``divide A by B``, ``A plus/minus/times B``, ``A + B``); ``goal_asks``
reads from the goal text what it asks for: an order (smallest first, or largest first) or the object whose quantity is
the answer of a problem.

``QuantityPlanner`` (P) extends ``jitlab.modules.grounding.GroundedPlanner`` (goal words, recipe checklist, map)
with that prior, added to theirs with ``weight``. The container the goal names (a ``put X in <box>`` whose container
words the goal text uses; every container when it names none) receives only the target:

    order   the target is the object of least (most) quantity seen in the candidates and not yet put into the goal's
            container (a successful ``put``; taking it out again un-places it): ``take`` and ``put ... in`` the
            container of the target +weight, any other quantity's -weight (out of order loses such games)
    answer  before a problem is read: ``read`` +weight, taking a quantity or putting anything into the container
            -weight; once a text states one, the target is the object whose stated number equals its answer (taken
            and put +weight, every other take of a quantity and put into the container -weight)

Elsewhere (no such goal, no quantities among the candidates) it is exactly ``GroundedPlanner``. The directive adds
one line: the target and why (``By quantity, next: 22mm of acrylic``; ``Problem: divide 42 by 7 = 6``).

Couplings: reads the task's description, the observations and candidates in the view; the prior is consumed by
``jitlab.modules.likelihood.LikelihoodAction`` (its fit, ``jitlab.jit.generate.library.FITS``: it needs the command
tool ``act`` and a task text that speaks of quantities, ``QUANTITY_WORDS``). Caveats: English phrasings; numbers in
digits only (``three apples`` is no quantity); the amount must open the object's name; objects the candidates never
list (inside a closed container) are unknown until they do, so an order target can be wrong while some are hidden;
quantities of different dimensions (grams against metres) compare by their base-unit numbers.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitlab.harnesskit import is_failure
from jitlab.modules.grounding import GroundedPlanner, goal_text, goal_words
from jitlab.protocol import Ctx, Directive, View

__all__ = ["QUANTITY_WORDS", "QuantityPlanner", "goal_asks", "quantity", "solve", "split_command"]

# a task text that speaks of quantities uses one of these (the planner's fit reads them: library.FITS)
QUANTITY_WORDS = ("quantity", "quantities", "amount", "amounts")
# unit -> factor to the base unit of its dimension (grams, metres, litres)
UNITS = {"mg": 1e-3, "g": 1.0, "kg": 1e3, "mm": 1e-3, "cm": 1e-2, "m": 1.0, "km": 1e3, "ml": 1e-3, "cl": 1e-2,
         "dl": 1e-1, "l": 1.0}
_AMOUNT = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z]+)?\b")
_NUM = r"(-?\d+(?:\.\d+)?)"
# (pattern, answer from the two numbers in the order the text gives them)
_PROBLEMS = (
    (rf"\badd {_NUM} (?:and|to) {_NUM}", lambda a, b: a + b),
    (rf"\bsubtract {_NUM} from {_NUM}", lambda a, b: b - a),
    (rf"\bmultiply {_NUM} (?:and|by|with) {_NUM}", lambda a, b: a * b),
    (rf"\bdivide {_NUM} by {_NUM}", lambda a, b: a / b if b else None),
    (rf"{_NUM} (?:plus|\+) {_NUM}", lambda a, b: a + b),
    (rf"{_NUM} (?:minus|-) {_NUM}", lambda a, b: a - b),
    (rf"{_NUM} (?:times|multiplied by|\*|x) {_NUM}", lambda a, b: a * b),
    (rf"{_NUM} (?:divided by|/) {_NUM}", lambda a, b: a / b if b else None),
)
_ASCENDING = re.compile(r"\b(?:smallest|lowest|fewest|increasing|ascending)\b", re.IGNORECASE)
_DESCENDING = re.compile(r"\b(?:largest|biggest|highest|greatest|decreasing|descending)\b", re.IGNORECASE)
_ANSWER = re.compile(r"\b(?:answer|solve)\b", re.IGNORECASE)
_SPOKEN = re.compile(r"\b(?:" + "|".join(QUANTITY_WORDS) + r")\b", re.IGNORECASE)
_TAKE = {"take", "get", "grab", "pick"}
_PUT = {"put", "insert", "place"}
_READ = {"read"}
_SPLIT = re.compile(r"^(\w+)(?: up)? (.+?)(?: (?:in|into|on|onto|from) (.+))?$")


def quantity(name: str) -> tuple[float, float] | None:
    """(the number as stated, the amount in its unit's base) of the amount that opens an object's name: ``22mm of
    acrylic`` -> (22, 0.022), ``8 brocollis`` -> (8, 8); None when the name opens with no number."""
    m = _AMOUNT.match(" ".join(str(name).lower().split()))
    if not m:
        return None
    number = float(m.group(1))
    return number, number * UNITS.get(m.group(2) or "", 1.0)


def split_command(command: str) -> tuple[str, str, str]:
    """(verb, object, container) of a command, lower case: ``put 22mm of acrylic in box`` -> ("put", "22mm of
    acrylic", "box"); ("", "", "") for a command of one word."""
    m = _SPLIT.match(" ".join(str(command).lower().split()))
    return (m.group(1), m.group(2), m.group(3) or "") if m else ("", "", "")


def solve(text: str) -> tuple[str, float] | None:
    """(the problem as stated, its answer) of the last arithmetic problem ``text`` states (module docstring): ``divide
    42 by 7`` -> ("divide 42 by 7", 6.0); None when it states none."""
    found = []
    for pattern, compute in _PROBLEMS:
        for m in re.finditer(pattern, str(text), re.IGNORECASE):
            value = compute(float(m.group(1)), float(m.group(2)))
            if value is not None:
                found.append((m.start(), m.group(0), value))
    return max(found)[1:] if found else None


def goal_asks(goal: str) -> str:
    """What a goal text asks of quantities: ``answer`` (the object whose quantity answers a problem), ``ascending`` or
    ``descending`` (an order by quantity), or "" (it speaks of no quantity, or asks neither)."""
    if not _SPOKEN.search(str(goal)):
        return ""
    if _ANSWER.search(str(goal)):
        return "answer"
    if _ASCENDING.search(str(goal)):
        return "ascending"
    return "descending" if _DESCENDING.search(str(goal)) else ""


@dataclass
class QuantityPlanner(GroundedPlanner):
    """P: goal grounding, recipe and map, plus the object an order by quantity or an arithmetic answer asks for (the
    quantities read and compared in code; module docstring)."""
    weight: float = field(default=8.0, metadata={"help": "bonus for taking and putting the target, penalty for "
                                                         "another quantity (0: the grounded planner alone)",
                                                 "min": 0.0})

    def reset(self, ctx: Ctx) -> None:
        super().reset(ctx)
        self.known: dict[str, tuple[float, float]] = {}   # object -> its quantity, from the candidates seen
        self.placed: set[str] = set()                      # objects put into the goal's container
        self.solved: float | None = None                   # the answer of the last problem read
        self.problem = ""
        self.candidates: list[str] = []                    # the latest observation's

    def plan(self, view: View, ctx: Ctx) -> Directive:
        last = ""
        for event in view.events[self._seen:]:             # before the grounded planner reads them (it moves _seen)
            if event.kind == "action":
                last = event.content
            elif event.kind in ("observation", "tool_result"):
                self.goal = self.goal or goal_text(ctx.task.description, event.content)   # as the grounded planner does
                self._read_event(last, event.content, list(event.data.get("candidates", [])))
                last = ""
        directive = super().plan(view, ctx)
        asks = goal_asks(self.goal)
        if not asks or not self.weight:
            return directive
        extra, line = self._prior(asks, self.candidates)
        prior = dict(directive.data.get("prior") or {})
        for command, bonus in extra.items():
            prior[command] = prior.get(command, 0.0) + bonus
        text = "\n".join(t for t in (line, directive.text) if t)
        return Directive(text, {**directive.data, "prior": prior})

    def _read_event(self, command: str, text: str, candidates: list[str]) -> None:
        """An observation, the command that led to it and its candidates: the quantities they name, what is placed (the
        command judged among the candidates it was chosen from), a problem the text states."""
        verb, obj, where = split_command(command)
        if command and not is_failure(text):
            if verb in _PUT and self._goal_container(where, self.candidates):
                self.placed.add(obj)
            elif verb in _TAKE:
                self.placed.discard(obj)
        self.candidates = candidates
        for c in candidates:
            verb, obj, _ = split_command(c)
            if verb in _TAKE | _PUT and quantity(obj):
                self.known.setdefault(obj, quantity(obj))
        solved = solve(text)
        if solved is not None:
            self.problem, self.solved = solved

    def _goal_container(self, where: str, candidates: list[str]) -> bool:
        """Is ``where`` the container the goal names (every container, when the goal names none of the candidates')?"""
        if not where:
            return False
        named = goal_words(self.goal)
        containers = {split_command(c)[2] for c in candidates if split_command(c)[0] in _PUT} | {where}
        said = {c for c in containers if c and set(c.split()) <= named}
        return where in said or not said

    def _target(self, asks: str) -> str | None:
        if asks == "answer":
            hits = [o for o, (number, _) in self.known.items() if self.solved is not None and abs(number - self.solved) < 1e-9]
            return hits[0] if hits else None
        todo = sorted((amount, o) for o, (_, amount) in self.known.items() if o not in self.placed)
        if not todo:
            return None
        return todo[0][1] if asks == "ascending" else todo[-1][1]

    def _prior(self, asks: str, candidates: list[str]) -> tuple[dict, str]:
        """({command: bonus}, the directive's line) for this step's candidates."""
        target, w = self._target(asks), self.weight
        waiting = asks == "answer" and self.solved is None     # the problem is not read yet
        prior = {}
        for c in candidates:
            verb, obj, where = split_command(c)
            if waiting and verb in _READ:
                prior[c] = w
            elif verb in _TAKE and quantity(obj):
                prior[c] = w if obj == target and obj not in self.placed else -w
            elif verb in _PUT and self._goal_container(where, candidates):
                prior[c] = w if obj == target and obj not in self.placed else -w
        if asks == "answer":
            line = (f"Problem: {self.problem} = {self.solved:g}." + (f" Next: {target}." if target else "")
                    if self.solved is not None else "Read the problem first.")
        else:
            line = f"By quantity ({'smallest' if asks == 'ascending' else 'largest'} first), next: {target}." \
                if target else ""
        return prior, line
