"""TextMap and MapPlanner (jitlab/modules/navigation.py) on a recorded TextWorld walk."""
from small_model_data import OBS

from jitlab.envs.base import TaskSpec
from jitlab.modules.navigation import MapPlanner, TextMap, exits_in
from jitlab.protocol import Ctx, Event, View

WALK = OBS["walkthrough:tw-coin_collector-l5-dev-03"]["steps"]


def _walk(steps):
    book = TextMap()
    book.see(steps[0]["text"], steps[0]["candidates"])
    for s in steps[1:]:
        book.moved(s["command"], s["text"], s["candidates"])
    return book


def test_exits_come_from_the_admissible_go_commands_else_from_the_text():
    assert exits_in(WALK[1]["text"], WALK[1]["candidates"]) == ["north", "west"]
    cellar = "-= Cellar =-\nThere is an exit to the east. Don't worry, it is unguarded. There is an unguarded exit to the south."
    assert exits_in(cellar) == ["east", "south"]
    assert exits_in("You pick up the coin.") == []


def test_walking_the_recorded_game_learns_edges_both_ways_and_the_frontier():
    book = _walk(WALK[:4])
    rooms = [book.here]
    assert len(book.edges) == 4 and book.frontier()                      # four rooms, unexplored exits left here
    start = next(iter(book.edges))
    (direction, second), = [(d, p) for d, p in book.edges[start].items()]
    assert direction == WALK[1]["command"].split()[1] and book.edges[second]["west"] == start   # the way back
    assert "->?" in book.text() and rooms[0] in book.text()


def test_a_dead_end_routes_back_to_the_nearest_unexplored_exit():
    book = TextMap()
    book.see("-= Hall =-", ["go east", "go north"])
    book.moved("go east", "-= Pantry =-", ["go west"])
    assert book.frontier() == [] and book.route() == ["west"]
    assert "go west" in book.text()
    book.moved("go west", "-= Hall =-", ["go east", "go north"])
    assert book.frontier() == ["north"] and book.route() == []


def test_the_planner_puts_the_map_in_view_and_a_prior_on_unexplored_exits():
    task = TaskSpec(id="t", suite="textworld", family="coin_collector", split="dev", description="Find the coin.")
    planner = MapPlanner(bonus=1.5)
    ctx = Ctx(llm=None, task=task)
    planner.reset(ctx)
    events = [Event("observation", WALK[0]["text"], 0, {"candidates": WALK[0]["candidates"]})]
    for i, s in enumerate(WALK[1:3], 1):
        events += [Event("action", s["command"], i), Event("observation", s["text"], i, {"candidates": s["candidates"]})]
    directive = planner.plan(View("", events), ctx)
    here = planner.map.here
    assert directive.text.startswith(f"You are in: {here}.")
    assert directive.data["prior"] == {f"go {d}": 1.5 for d in planner.map.frontier()} and directive.data["prior"]
    assert "go south" not in directive.data["prior"]                       # where it came from is explored
