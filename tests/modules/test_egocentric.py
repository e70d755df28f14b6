"""The egocentric directive (jitlab/modules/egocentric.py) on recorded BabyAI views."""
from small_model_data import OBS

from jitlab.envs.base import TaskSpec
from jitlab.modules.egocentric import EgocentricPlanner, directive, locked_key, mission_target, parse_view
from jitlab.protocol import Ctx, Event, View

GOTO = OBS["babyai-GoToLocal-1000"]["steps"]
DOOR = OBS["babyai-OpenDoor-1000"]["steps"]


def test_the_view_is_parsed_into_mission_objects_and_what_is_in_front():
    view = parse_view(GOTO[0]["text"])
    assert view["mission"] == "go to a green ball" and view["carrying"] == ""
    assert ("green ball", 2, 1) in view["objects"] and view["free"] == 3 and view["front"] == "empty floor"
    assert ("closed grey door", 1, -3) in parse_view(DOOR[0]["text"])["objects"]


def test_missions_name_their_target_and_what_to_do_there():
    assert mission_target("go to a green ball") == ("green", "ball", "reach")
    assert mission_target("pick up the blue key") == ("blue", "key", "pick up")
    assert mission_target("open the grey door") == ("grey", "door", "toggle")
    assert mission_target("put the red ball next to the green box") == ("red", "ball", "pick up")
    assert mission_target("put the red ball next to the green box", "a red ball") == ("green", "box", "drop")


def test_the_directive_walks_then_turns_toward_the_target_and_toggles_the_door():
    assert directive(parse_view(GOTO[0]["text"]))[0] == "go forward"       # 2 ahead, 1 right: walk first
    beside = "Mission: go to a green ball.\nYou see: a green ball 1 step to the right.\nDirectly in front of you: " \
             "empty floor. Free cells straight ahead: 1.\nYou are carrying: nothing."
    assert directive(parse_view(beside))[0] == "turn right"
    assert directive(parse_view(DOOR[0]["text"]))[0] == "turn left"       # the door is to the left, a wall ahead
    facing = next(s["text"] for s in DOOR if "Directly in front of you: a closed grey door" in s["text"])
    command, why = directive(parse_view(facing))
    assert command == "toggle" and "grey door" in why


def test_out_of_view_it_scans_then_walks():
    view = parse_view("Mission: go to the purple key.\nYou see: a red ball 2 steps ahead.\nDirectly in front of you: "
                      "empty floor. Free cells straight ahead: 2.\nYou are carrying: nothing.")
    assert directive(view, turns=0)[0] == "turn left" and directive(view, turns=3)[0] == "go forward"
    view["free"] = 0
    assert directive(view, turns=3)[0] == "turn right"


def test_the_planner_follows_the_recorded_episode_and_counts_turns():
    task = TaskSpec(id="t", suite="babyai", family="OpenDoor", split="dev", description="Open a door.")
    planner = EgocentricPlanner(bonus=2.0)
    ctx = Ctx(llm=None, task=task)
    planner.reset(ctx)
    events = [Event("observation", DOOR[0]["text"], 0)]
    first = planner.plan(View("", events), ctx)
    assert first.data["prior"] == {"turn left": 2.0} and first.text.startswith("Directive: turn left")
    events += [Event("action", "turn left", 1), Event("observation", DOOR[1]["text"], 1)]
    planner.plan(View("", events), ctx)
    assert planner.turns == 1


def test_a_locked_door_makes_its_key_the_target_until_a_key_is_carried():
    locked = parse_view("Mission: open the door.\nYou see: a locked purple door 1 step ahead and 1 step to the right; "
                        "a purple key 3 steps ahead.\nDirectly in front of you: empty floor. Free cells straight "
                        "ahead: 2.\nYou are carrying: nothing.")
    assert locked_key(locked) == "purple"
    command, why = directive(locked, key="purple")
    assert command == "go forward" and "purple key" in why
    holding = dict(locked, carrying="a purple key")
    assert locked_key(holding) is None and "door" in directive(holding, key="purple")[1]
