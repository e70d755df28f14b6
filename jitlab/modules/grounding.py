"""Goal grounding: the task's own words as a prior over the admissible commands, and a recipe checklist.

Idea: the objects and verbs the goal names are the ones worth acting on. ``goal_prior`` gives a command a bonus
for each of its object words that the goal text names (``take legume`` when the objective is to recover the
legume; ``examine`` and ``look`` get none, they name nothing new), and, when the goal says to take nothing else,
a penalty for taking anything it does not name. The goal text is the task's public description plus the
opening text of the first observation (before its first place header: ``Your objective is to recover the
legume``); a command with an object that the goal quotes (``'examine cookbook'``) gets the full bonus. This is the
affordance / goal-relevance prior of text-game agents (e.g. CALM's and KG-A2C's object grounding; Life-Harness,
arXiv 2605.22166, re-ranks candidates with such priors) in its plainest form: word overlap. Goal words are the goal
text's words less generic instruction words and less its proper nouns (``names``: ``TextWorld`` in "Welcome to
TextWorld!" names the game, not an object), so no suite's name is spelled out here.

``Checklist`` is a recipe memory for multi-step goals: a text the agent *read* that lists what to gather and
what to do (TextWorld cooking's cookbook: ``Ingredients:`` lines and ``Directions:`` lines) becomes items
("take red onion", "dice red onion", "fry red onion", "prepare meal"); an item is checked off when a command
covering its words succeeded, or when an observation shows it done already ("a fried red onion"). Its prior
favours the commands that do an unchecked item (the first one most), the ``take`` of a tool an unchecked item
needs (``COOK_TOOLS``: a knife to slice, a stove to fry, ...), and penalises preparing an ingredient in a way
the recipe does not ask (preparing it wrong loses the game) and dropping, putting away or eating an
ingredient the recipe needs.

``GroundedPlanner`` (P) extends ``jitlab.modules.navigation.MapPlanner``: its directive is the checklist and
the map; its prior (``Directive.data["prior"]``) is the sum of the three priors.

Couplings: reads the task's description, the observations and candidates in the view; the prior is consumed
by ``jitlab.modules.likelihood.LikelihoodAction``. Caveats: word overlap, not meaning (``take red potato`` and
``take red onion`` share "red"; the bonus counts all shared words over the command's object words, so the full
match wins); the recipe parser knows the ``Ingredients:`` / ``Directions:`` layout; ``COOK_TOOLS`` is an
English cooking lexicon (fry: stove, roast: oven, grill: BBQ), not game internals, and wrong for games whose
appliances differ.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitlab.harnesskit import tokens
from jitlab.modules.navigation import MapPlanner
from jitlab.protocol import Ctx, Directive, View

__all__ = ["COOK_TOOLS", "Checklist", "GroundedPlanner", "goal_prior", "goal_text", "goal_words", "names",
           "parse_recipe"]

# preparation verb -> (the command verb the game uses, the tool or appliance it needs)
COOK_TOOLS = {"slice": ("slice", "knife"), "dice": ("dice", "knife"), "chop": ("chop", "knife"),
              "fry": ("cook", "stove"), "roast": ("cook", "oven"), "grill": ("cook", "bbq"),
              "bake": ("cook", "oven"), "boil": ("cook", "stove")}
_DONE_FORM = {"slice": "sliced", "dice": "diced", "chop": "chopped", "fry": "fried", "roast": "roasted",
              "grill": "grilled", "bake": "baked", "boil": "boiled"}
_PREPARE_VERBS = {"slice", "dice", "chop", "cook"}
_LETGO = {"drop", "put", "insert", "eat"}        # losing hold of an ingredient the recipe needs
_NO_OBJECT = {"look", "inventory", "examine", "go", "wait"}
_OBJECTIVE = re.compile(r"[^.!?\n]*\b(?:objective|task|goal|mission|recover|retrieve|find|pick up|take|lift|"
                        r"get|grab|collect|bring|put|place)\b[^.!?\n]*",
                        re.IGNORECASE)
_GENERIC = frozenset("task today objective goal room floor find take pick recover retrieve first pick up "
                     "explore rooms object world game loses when taken nothing else welcome lift get "
                     "grab collect north south east west go".split())
# a name: a word with an inner capital (``TextWorld``, ``BabyAI``), or capitalised where no sentence starts
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_SENTENCE_END = ".!?:;\n\"'(=-*>"


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


def goal_words(goal: str) -> set[str]:
    """The words of the goal text that can name what to act on: its tokens less generic task words (``_GENERIC``:
    English words of instructions, directions) and less its proper nouns (:func:`names`)."""
    return set(tokens(goal)) - _GENERIC - names(goal)


def goal_text(description: str, first_observation: str) -> str:
    """The goal as the agent was told it: the task description plus the first observation's opening text (what
    comes before its first place header, ``-= Bar =-``; without a header, its objective sentences)."""
    first = str(first_observation)
    header = re.search(r"^\s*-=.+=-\s*$", first, re.MULTILINE)
    opening = first[: header.start()] if header else " ".join(_OBJECTIVE.findall(first))
    return " ".join([str(description), opening])


def _objects(command: str) -> list[str]:
    words = tokens(command)
    return [] if not words or words[0] in _NO_OBJECT else [w for w in words[1:] if w not in ("from", "into", "with")]


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


def parse_recipe(text: str) -> list[str]:
    """Checklist items of a recipe text (``Ingredients:`` then ``Directions:``): ``take <ingredient>`` for each
    ingredient, then each direction without articles; [] when the text holds no recipe."""
    m = re.search(r"ingredients\s*:\s*(.*?)\s*directions\s*:\s*(.*)", str(text), re.IGNORECASE | re.DOTALL)
    if not m:
        return []
    clean = lambda line: " ".join(w for w in line.strip(" -*\t.").lower().split() if w not in ("the", "a", "an"))
    items = [f"take {clean(line)}" for line in m.group(1).splitlines() if clean(line)]
    return items + [clean(line) for line in m.group(2).splitlines() if clean(line)]


def _does(command: str, item: str) -> bool:
    """Does ``command`` do ``item``? Its verb (or the verb the game uses for it) and all the item's object words."""
    verb, *objects = item.split()
    game_verb = COOK_TOOLS.get(verb, (verb, ""))[0]
    said = tokens(command)
    tool = COOK_TOOLS.get(verb, ("", ""))[1]
    return bool(said) and said[0] == game_verb and set(tokens(" ".join(objects))) <= set(said) and \
        (not tool or game_verb == verb or tool in said)


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
