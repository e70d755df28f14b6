"""explorer_quantity planner: the explorer's (goal words, recipe checklist, map) plus the quantity prior: the object a
goal's order by quantity or its arithmetic problem asks for, read and computed in code."""
from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from jitlab.harnesskit import is_failure, tokens
from jitlab.protocol import Ctx, Directive, View

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

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


# library: jitlab.modules.navigation.DIRECTIONS
DIRECTIONS = ("north", "south", "east", "west", "northeast", "northwest", "southeast", "southwest", "up", "down")


# library: jitlab.modules.navigation._GO
_GO = re.compile(r"^\s*go\s+(" + "|".join(DIRECTIONS) + r")\s*$", re.IGNORECASE)


# library: jitlab.modules.navigation._OPPOSITE
_OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east", "up": "down", "down": "up",
             "northeast": "southwest", "southwest": "northeast", "northwest": "southeast", "southeast": "northwest"}


# library: jitlab.modules.navigation._EXIT_CONTEXT
_EXIT_CONTEXT = re.compile(r"exit|door|doorway|passage|path|leading|lead|going|go |head|entrance|gateway|portal",
                           re.IGNORECASE)


# library: jitlab.modules.navigation._EXIT_WORD
_EXIT_WORD = re.compile(r"\b(" + "|".join(DIRECTIONS) + r")(?:ward)?\b", re.IGNORECASE)


# library: jitlab.modules.navigation.exits_in
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


# library: jitlab.modules.navigation.TextMap
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


# library: jitlab.modules.navigation.MapPlanner
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


# library: jitlab.modules.grounding.parse_recipe
def parse_recipe(text: str) -> list[str]:
    """Checklist items of a recipe text (``Ingredients:`` then ``Directions:``): ``take <ingredient>`` for each
    ingredient, then each direction without articles; [] when the text holds no recipe."""
    m = re.search(r"ingredients\s*:\s*(.*?)\s*directions\s*:\s*(.*)", str(text), re.IGNORECASE | re.DOTALL)
    if not m:
        return []
    clean = lambda line: " ".join(w for w in line.strip(" -*\t.").lower().split() if w not in ("the", "a", "an"))
    items = [f"take {clean(line)}" for line in m.group(1).splitlines() if clean(line)]
    return items + [clean(line) for line in m.group(2).splitlines() if clean(line)]


# library: jitlab.modules.grounding._DONE_FORM
_DONE_FORM = {"slice": "sliced", "dice": "diced", "chop": "chopped", "fry": "fried", "roast": "roasted",
              "grill": "grilled", "bake": "baked", "boil": "boiled"}


# library: jitlab.modules.grounding.COOK_TOOLS
# preparation verb -> (the command verb the game uses, the tool or appliance it needs)
COOK_TOOLS = {"slice": ("slice", "knife"), "dice": ("dice", "knife"), "chop": ("chop", "knife"),
              "fry": ("cook", "stove"), "roast": ("cook", "oven"), "grill": ("cook", "bbq"),
              "bake": ("cook", "oven"), "boil": ("cook", "stove")}


# library: jitlab.modules.grounding._does
def _does(command: str, item: str) -> bool:
    """Does ``command`` do ``item``? Its verb (or the verb the game uses for it) and all the item's object words."""
    verb, *objects = item.split()
    game_verb = COOK_TOOLS.get(verb, (verb, ""))[0]
    said = tokens(command)
    tool = COOK_TOOLS.get(verb, ("", ""))[1]
    return bool(said) and said[0] == game_verb and set(tokens(" ".join(objects))) <= set(said) and \
        (not tool or game_verb == verb or tool in said)


# library: jitlab.modules.grounding._PREPARE_VERBS
_PREPARE_VERBS = {"slice", "dice", "chop", "cook"}


# library: jitlab.modules.grounding._LETGO
_LETGO = {"drop", "put", "insert", "eat"}        # losing hold of an ingredient the recipe needs


# library: jitlab.modules.grounding.Checklist
@dataclass
class Checklist:
    """A recipe read by the agent as a checklist (see the module docstring)."""

    def __post_init__(self):
        self.items: list[str] = []
        self.done: set[str] = set()
        self.seen: list[str] = []       # observations read (a recipe read late still sees the first room)
        self._checked = False

    def read(self, text: str) -> None:
        """An observation; a recipe in it (the first one read) becomes the checklist; an ingredient the text
        shows already prepared (``a fried red apple``) checks that item off (doing it again would spoil it)."""
        self.seen.append(" ".join(str(text).lower().split()))
        if not self.items:
            self.items = parse_recipe(text)
        texts = self.seen if self.items and not self._checked else self.seen[-1:]
        self._checked = bool(self.items)
        for item in self.todo():
            verb, *objects = item.split()
            done = rf"\b{_DONE_FORM.get(verb, '-')}(?: \w+)? {re.escape(' '.join(objects))}\b"
            if verb in _DONE_FORM and any(re.search(done, flat) for flat in texts):
                self.done.add(item)

    def did(self, command: str, succeeded: bool) -> None:
        if succeeded:
            self.done.update(item for item in self.items if _does(command, item))

    def todo(self) -> list[str]:
        return [item for item in self.items if item not in self.done]

    def text(self) -> str:
        return "Recipe: " + "; ".join(f"[{'x' if i in self.done else ' '}] {i}" for i in self.items) \
            if self.items else ""

    def prior(self, candidates: list[str], weight: float = 2.0) -> dict:
        todo = self.todo()
        if not todo:
            return {}
        prior: dict = {}
        needed_tools = {COOK_TOOLS[i.split()[0]][1] for i in todo if i.split()[0] in COOK_TOOLS}
        for c in candidates:
            said = tokens(c)
            hits = [n for n, item in enumerate(todo) if _does(c, item)]
            if hits:
                prior[c] = weight * (1.5 if hits[0] == 0 else 1.0)
            elif said and said[0] == "take" and needed_tools & set(said[1:2]):
                prior[c] = weight * 0.75
            elif said and (said[0] in _PREPARE_VERBS or said[0] in _LETGO and self._ingredient(said)):
                prior[c] = -weight
        return prior

    def _ingredient(self, said: list[str]) -> bool:
        """Does a command name one of the recipe's ingredients?"""
        return any(set(item.split()[1:]) <= set(said) for item in self.items if item.startswith("take "))


# library: jitlab.modules.grounding._GENERIC
_GENERIC = frozenset("task today objective goal room floor find take pick recover retrieve first pick up "
                     "explore rooms object world game loses when taken nothing else welcome lift get "
                     "grab collect north south east west go".split())


# library: jitlab.modules.grounding._NAME
# a name: a word with an inner capital (``TextWorld``, ``BabyAI``), or capitalised where no sentence starts
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")


# library: jitlab.modules.grounding._SENTENCE_END
_SENTENCE_END = ".!?:;\n\"'(=-*>"


# library: jitlab.modules.grounding.names
def names(text: str) -> set[str]:
    """The proper nouns of ``text``, lower-cased: words with a capital after their first letter (``TextWorld``) and
    capitalised words that do not open a sentence (``Welcome to Zork``). A game, a suite or a place is named so;
    the objects a goal asks for are common nouns, so names are never goal words."""
    found = set()
    for m in _NAME.finditer(str(text)):
        word, before = m.group(), str(text)[: m.start()].rstrip(" \t")
        inner = any(ch.isupper() for ch in word[1:]) and not word.isupper()
        opens = not before or before[-1] in _SENTENCE_END
        if inner or (word[0].isupper() and not word.isupper() and not opens):
            found.add(word.lower())
    return found


# library: jitlab.modules.grounding.goal_words
def goal_words(goal: str) -> set[str]:
    """The words of the goal text that can name what to act on: its tokens less generic task words (``_GENERIC``:
    English words of instructions, directions) and less its proper nouns (:func:`names`)."""
    return set(tokens(goal)) - _GENERIC - names(goal)


# library: jitlab.modules.grounding._NO_OBJECT
_NO_OBJECT = {"look", "inventory", "examine", "go", "wait"}


# library: jitlab.modules.grounding._objects
def _objects(command: str) -> list[str]:
    words = tokens(command)
    return [] if not words or words[0] in _NO_OBJECT else [w for w in words[1:] if w not in ("from", "into", "with")]


# library: jitlab.modules.grounding.goal_prior
def goal_prior(goal: str, candidates: list[str], weight: float = 1.0, penalty: float = 1.0) -> dict:
    """{command: bonus}: ``weight`` for a command with an object the goal quotes word for word (``'examine
    cookbook'``; not ``look`` or ``go east``, which tool descriptions quote as examples), else
    ``weight`` times the share of a command's object words the goal names; when the goal says to take nothing
    else, ``-penalty`` for a ``take`` whose object the goal does not name."""
    named = goal_words(goal)
    said = " " + " ".join(str(goal).lower().replace("'", " ").replace('"', " ").split()) + " "
    exclusive = bool(re.search(r"nothing else|only (?:that|the)", str(goal), re.IGNORECASE))
    prior = {}
    for c in candidates:
        words = c.lower().split()
        if len(words) > 1 and words[0] != "go" and f" {' '.join(words)} " in said:
            prior[c] = weight
            continue
        objects = _objects(c)
        if not objects:
            continue
        share = sum(w in named for w in objects) / len(objects)
        if share:
            prior[c] = weight * share
        elif exclusive and tokens(c)[0] == "take":
            prior[c] = -penalty
    return prior


# library: jitlab.modules.grounding._OBJECTIVE
_OBJECTIVE = re.compile(r"[^.!?\n]*\b(?:objective|task|goal|mission|recover|retrieve|find|pick up|take|lift|"
                        r"get|grab|collect|bring|put|place)\b[^.!?\n]*",
                        re.IGNORECASE)


# library: jitlab.modules.grounding.goal_text
def goal_text(description: str, first_observation: str) -> str:
    """The goal as the agent was told it: the task description plus the first observation's opening text (what
    comes before its first place header, ``-= Bar =-``; without a header, its objective sentences)."""
    first = str(first_observation)
    header = re.search(r"^\s*-=.+=-\s*$", first, re.MULTILINE)
    opening = first[: header.start()] if header else " ".join(_OBJECTIVE.findall(first))
    return " ".join([str(description), opening])


# library: jitlab.modules.grounding.GroundedPlanner
@dataclass
class GroundedPlanner(MapPlanner):
    """P: goal line + recipe checklist + map as the directive; goal, checklist and map priors summed."""
    goal_weight: float = field(default=2.0, metadata={"help": "bonus for a command whose objects the goal names",
                                                      "min": 0.0})
    take_penalty: float = field(default=3.0, metadata={"help": "penalty for taking what the goal does not name "
                                                               "when it says to take nothing else", "min": 0.0})
    recipe_weight: float = field(default=2.0, metadata={"help": "bonus for a command that does an unchecked "
                                                                "recipe item (0: no checklist)", "min": 0.0})

    def reset(self, ctx: Ctx) -> None:
        super().reset(ctx)
        self.checklist, self.goal = Checklist(), ""

    def plan(self, view: View, ctx: Ctx) -> Directive:
        start = self._seen
        last = ""
        for event in view.events[start:]:
            if event.kind == "action":
                last = event.content
            elif event.kind in ("observation", "tool_result"):
                if not self.goal:
                    self.goal = goal_text(ctx.task.description, event.content)
                if last:
                    self.checklist.did(last, float(event.data.get("reward", 0) or 0) > 0 or
                                       not re.search(r"can't|cannot|not |no such|need", event.content, re.I))
                if self.recipe_weight:
                    self.checklist.read(event.content)
                last = ""
        candidates = self._read(view)
        prior = self.prior()
        for extra in (goal_prior(self.goal, candidates, self.goal_weight, self.take_penalty),
                      self.checklist.prior(candidates, self.recipe_weight) if self.recipe_weight else {}):
            for command, bonus in extra.items():
                prior[command] = prior.get(command, 0.0) + bonus
        lines = [self.checklist.text(), self.map.text() if self.show else ""]
        return Directive("\n".join(line for line in lines if line), {"prior": prior})


# library: jitlab.modules.quantities._ANSWER
_ANSWER = re.compile(r"\b(?:answer|solve)\b", re.IGNORECASE)


# library: jitlab.modules.quantities._ASCENDING
_ASCENDING = re.compile(r"\b(?:smallest|lowest|fewest|increasing|ascending)\b", re.IGNORECASE)


# library: jitlab.modules.quantities.QUANTITY_WORDS
# a task text that speaks of quantities uses one of these (the planner's fit reads them: library.FITS)
QUANTITY_WORDS = ("quantity", "quantities", "amount", "amounts")


# library: jitlab.modules.quantities._SPOKEN
_SPOKEN = re.compile(r"\b(?:" + "|".join(QUANTITY_WORDS) + r")\b", re.IGNORECASE)


# library: jitlab.modules.quantities._DESCENDING
_DESCENDING = re.compile(r"\b(?:largest|biggest|highest|greatest|decreasing|descending)\b", re.IGNORECASE)


# library: jitlab.modules.quantities.goal_asks
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


# library: jitlab.modules.quantities._SPLIT
_SPLIT = re.compile(r"^(\w+)(?: up)? (.+?)(?: (?:in|into|on|onto|from) (.+))?$")


# library: jitlab.modules.quantities.split_command
def split_command(command: str) -> tuple[str, str, str]:
    """(verb, object, container) of a command, lower case: ``put 22mm of acrylic in box`` -> ("put", "22mm of
    acrylic", "box"); ("", "", "") for a command of one word."""
    m = _SPLIT.match(" ".join(str(command).lower().split()))
    return (m.group(1), m.group(2), m.group(3) or "") if m else ("", "", "")


# library: jitlab.modules.quantities._NUM
_NUM = r"(-?\d+(?:\.\d+)?)"


# library: jitlab.modules.quantities._PROBLEMS
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


# library: jitlab.modules.quantities.solve
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


# library: jitlab.modules.quantities._PUT
_PUT = {"put", "insert", "place"}


# library: jitlab.modules.quantities._TAKE
_TAKE = {"take", "get", "grab", "pick"}


# library: jitlab.modules.quantities._AMOUNT
_AMOUNT = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z]+)?\b")


# library: jitlab.modules.quantities.UNITS
# unit -> factor to the base unit of its dimension (grams, metres, litres)
UNITS = {"mg": 1e-3, "g": 1.0, "kg": 1e3, "mm": 1e-3, "cm": 1e-2, "m": 1.0, "km": 1e3, "ml": 1e-3, "cl": 1e-2,
         "dl": 1e-1, "l": 1.0}


# library: jitlab.modules.quantities.quantity
def quantity(name: str) -> tuple[float, float] | None:
    """(the number as stated, the amount in its unit's base) of the amount that opens an object's name: ``22mm of
    acrylic`` -> (22, 0.022), ``8 brocollis`` -> (8, 8); None when the name opens with no number."""
    m = _AMOUNT.match(" ".join(str(name).lower().split()))
    if not m:
        return None
    number = float(m.group(1))
    return number, number * UNITS.get(m.group(2) or "", 1.0)


# library: jitlab.modules.quantities._READ
_READ = {"read"}


# library: jitlab.modules.quantities.QuantityPlanner
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


# ---- the harness's own code ----

class Planner(QuantityPlanner):
    pass
