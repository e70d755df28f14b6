"""Goal grounding and the recipe checklist (jitlab/modules/grounding.py) on recorded TextWorld games."""
from small_model_data import OBS

from jitlab.envs.base import TaskSpec
from jitlab.modules.grounding import (
    Checklist,
    GroundedPlanner,
    goal_prior,
    goal_text,
    goal_words,
    names,
    parse_recipe,
)
from jitlab.protocol import Ctx, Event, View

HUNT = OBS["tw-treasure_hunter-l3-dev-00"]
COOK = OBS["walkthrough:tw-cooking-l3-dev-00"]


def test_the_opening_text_names_the_object_to_take_and_nothing_else_is_taken():
    goal = goal_text(HUNT["description"], HUNT["steps"][0]["text"])
    kitchen = next(s for s in HUNT["steps"] if "take spoon" in s["candidates"])
    prior = goal_prior(goal, kitchen["candidates"], weight=2.0, penalty=3.0)
    assert prior["take spoon"] == 2.0 and prior["take keycard"] == -3.0
    assert "look" not in prior and not any(c.startswith("go ") for c in prior)


def test_proper_nouns_of_the_recorded_goal_are_not_goal_words():
    goal = goal_text(HUNT["description"], HUNT["steps"][0]["text"])   # "A TextWorld text adventure ... Welcome to TextWorld!"
    assert "textworld" in goal.lower() and names(goal) == {"textworld"}
    assert "spoon" in goal_words(goal) and "textworld" not in goal_words(goal)
    assert goal_prior(goal, ["take spoon", "examine textworld"]) == {"take spoon": 1.0}
    # capitalised where a sentence opens (after . ! ? : or a line break) is not a name; inside a sentence it is
    assert names("Find the coin. Coin is gold!\nLamp: Brass lamp, from Zork and BabyAI") == {"zork", "babyai"}


def test_a_command_the_goal_quotes_gets_the_full_bonus():
    cook = COOK["steps"][0]
    prior = goal_prior(goal_text(COOK["description"], cook["text"]), cook["candidates"])
    assert prior.get("examine cookbook") == 1.0 and "inventory" not in prior and "look" not in prior


def test_the_recorded_cookbook_becomes_a_checklist():
    text = next(s["text"] for s in COOK["steps"] if s["command"] == "examine cookbook")
    items = parse_recipe(text)
    assert items == ["take orange bell pepper", "take red apple", "slice orange bell pepper", "fry orange bell pepper",
                     "dice red apple", "fry red apple", "prepare meal"]
    assert parse_recipe(COOK["steps"][0]["text"]) == []


def test_the_checklist_ticks_done_items_and_steers_away_from_spoiling_the_dish():
    cook = COOK["steps"]
    book = Checklist()
    for s in cook:
        book.read(s["text"])
        if s["command"]:
            book.did(s["command"], True)
    assert "fry red apple" in book.done              # the first room shows "a fried red apple": done already
    assert {"take orange bell pepper", "slice orange bell pepper", "dice red apple"} <= book.done
    fresh = Checklist()
    fresh.read(cook[0]["text"])
    fresh.read(next(s["text"] for s in cook if s["command"] == "examine cookbook"))
    assert "fry red apple" in fresh.done             # a recipe read after the room still sees the room
    prior = fresh.prior(["cook red apple with stove", "take knife from counter", "take red apple from counter",
                         "drop red apple", "cook orange bell pepper with stove"])
    assert prior["cook red apple with stove"] < 0 and prior["take knife from counter"] > 0
    assert prior["take red apple from counter"] > 0 and prior["drop red apple"] < 0
    assert prior["cook orange bell pepper with stove"] > 0


def test_the_planner_sums_goal_checklist_and_map_priors():
    task = TaskSpec(id="t", suite="textworld", family="cooking", split="dev", description=COOK["description"])
    planner = GroundedPlanner()
    ctx = Ctx(llm=None, task=task)
    planner.reset(ctx)
    steps = COOK["steps"][:3]
    events = [Event("observation", steps[0]["text"], 0, {"candidates": steps[0]["candidates"]})]
    for i, s in enumerate(steps[1:], 1):
        events += [Event("action", s["command"], i), Event("observation", s["text"], i, {"candidates": s["candidates"]})]
    directive = planner.plan(View("", events), ctx)
    assert directive.text.startswith("Recipe: [ ] take orange bell pepper")
    assert directive.data["prior"]["take red apple from counter"] > 0
