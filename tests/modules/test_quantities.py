"""Quantities read and compared or computed in code (jitlab/modules/quantities.py) on hand-written game text; no
model."""
from jitlab.envs.base import TaskSpec
from jitlab.modules.grounding import GroundedPlanner
from jitlab.modules.quantities import QuantityPlanner, goal_asks, quantity, solve, split_command
from jitlab.protocol import Ctx, Event, View

SORT = ("A text game. Goal: put every object into the crate one at a time, smallest quantity first. Tool: "
        "act(command).")
MATH = ("A text game. Goal: read the sum sheet, then take the object whose quantity is its answer and put it into "
        "the crate. Tool: act(command).")
PLAIN = "A text game. Goal: find the lamp and take it. Tool: act(command)."
ROOM = ("You are in the shed. A shelf holds 3kg of sand, 40g of salt and 2kg of clay. There is also a crate, that is "
        "empty.")
TAKES = ["inventory", "look around", "take 2kg of clay", "take 3kg of sand", "take 40g of salt"]


def _plan(description: str, steps: list[tuple[str, str, list[str]]]):
    """The planner's directive after a first observation and (command, text, candidates) steps."""
    planner, ctx = QuantityPlanner(), Ctx(llm=None, task=TaskSpec(id="t", suite="s", family="f", split="dev",
                                                                   description=description))
    planner.reset(ctx)
    (_, text, cands), *rest = steps
    events = [Event("observation", text, 0, {"candidates": cands})]
    for i, (command, text, cands) in enumerate(rest, 1):
        events += [Event("action", command, i), Event("observation", text, i, {"candidates": cands})]
    return planner.plan(View("", events), ctx)


def test_quantities_are_read_from_object_names_and_compared_in_their_base_units():
    assert quantity("40g of salt") == (40.0, 40.0) and quantity("2kg of clay") == (2.0, 2000.0)
    assert quantity("15mm of wire")[1] < quantity("2cm of wire")[1] < quantity("1m of wire")[1]
    assert quantity("12 pears") == (12.0, 12.0) and quantity("sum sheet") is None and quantity("key 3") is None
    assert split_command("put 40g of salt in crate") == ("put", "40g of salt", "crate")
    assert split_command("pick up 12 pears") == ("pick", "12 pears", "")


def test_the_last_problem_a_text_states_is_solved():
    assert solve("The sheet reads: subtract 34 from 46 .") == ("subtract 34 from 46", 12.0)
    assert solve("multiply 6 by 7") == ("multiply 6 by 7", 42.0) and solve("divide 42 by 7")[1] == 6.0
    assert solve("add 3 and 38, no: what is 9 times 3?")[1] == 27.0
    assert solve("You see 3kg of sand.") is None and solve("divide 5 by 0") is None


def test_the_goal_says_what_it_asks_of_quantities():
    assert goal_asks(SORT) == "ascending" and goal_asks(MATH) == "answer"
    assert goal_asks("Sort them by quantity, largest first.") == "descending"
    assert goal_asks(PLAIN) == "" and goal_asks("Take the smallest key.") == ""   # no quantity spoken of


def test_an_order_goal_favours_the_least_quantity_not_yet_in_the_container():
    first = _plan(SORT, [("", ROOM, TAKES)])
    prior = first.data["prior"]
    assert prior["take 40g of salt"] > 0 > prior["take 2kg of clay"] and prior["take 3kg of sand"] < 0
    assert "next: 40g of salt" in first.text
    held = TAKES[:2] + ["put 40g of salt in crate", "put 40g of salt in shelf", "take 2kg of clay", "take 3kg of sand"]
    after = ["inventory", "look around", "take 2kg of clay", "take 3kg of sand", "take 40g of salt"]
    steps = [("", ROOM, TAKES), ("take 40g of salt", "You take the 40g of salt.", held)]
    prior = _plan(SORT, steps).data["prior"]
    assert prior["put 40g of salt in crate"] > prior.get("put 40g of salt in shelf", 0.0) + 2 > 0
    prior = _plan(SORT, steps + [("put 40g of salt in crate", "You put the 40g of salt in the crate.", after)]).data["prior"]
    assert prior["take 2kg of clay"] > 0 > prior["take 3kg of sand"] and prior["take 40g of salt"] < 0   # placed: stays
    # put elsewhere, or taken out of the crate again: not placed, so still the next to go in
    for back in (("put 40g of salt in shelf", "You put the 40g of salt on the shelf.", after),
                 ("take 40g of salt", "You take the 40g of salt.", held)):
        prior = _plan(SORT, steps + [("put 40g of salt in crate", "You put the 40g of salt in the crate.", after), back]
                      if back[0].startswith("take") else steps + [back]).data["prior"]
        assert prior.get("take 40g of salt", prior.get("put 40g of salt in crate")) > 0 > prior["take 2kg of clay"]


def test_an_answer_goal_reads_the_problem_first_then_favours_the_object_with_the_answer():
    room = "You are in the shed. A shelf holds 13 pears and 42 pears. There is a sum sheet and a crate."
    cands = ["look around", "put sum sheet in crate", "read sum sheet", "take 13 pears", "take 42 pears"]
    before = _plan(MATH, [("", room, cands)]).data["prior"]
    assert before["read sum sheet"] > 0 > before["put sum sheet in crate"] and before["take 42 pears"] < 0
    read = ("read sum sheet", "Solve this: multiply 6 by 7 .", cands)
    directive = _plan(MATH, [("", room, cands), read])
    prior = directive.data["prior"]
    assert prior["take 42 pears"] > 0 > prior["take 13 pears"] and prior["put sum sheet in crate"] < 0
    assert "multiply 6 by 7 = 42" in directive.text


def test_without_a_quantity_goal_it_is_the_grounded_planner():
    cands = ["look around", "take 2 lamps", "take 12 coins", "put 2 lamps in crate"]
    steps = [("", "You are in the shed. You see 2 lamps, 12 coins and a crate.", cands)]
    mine = _plan(PLAIN, steps)
    planner, ctx = GroundedPlanner(), Ctx(llm=None, task=TaskSpec(id="t", suite="s", family="f", split="dev",
                                                                  description=PLAIN))
    planner.reset(ctx)
    theirs = planner.plan(View("", [Event("observation", steps[0][1], 0, {"candidates": cands})]), ctx)
    assert mine.text == theirs.text and mine.data == theirs.data
