"""StateBook (jitlab/modules/exploration.py) on recorded TextWorld and BabyAI observations."""
from small_model_data import OBS

from jitlab.modules.exploration import StateBook, place_name


def test_place_names_come_from_the_recorded_headers():
    steps = OBS["walkthrough:tw-coin_collector-l5-dev-03"]["steps"]
    names = [place_name(s["text"]) for s in steps]
    assert names[0] and all(names[:-1]) and len(set(names[:-1])) == len(names) - 1   # five different rooms
    assert place_name("You pick up the coin from the ground.") == ""


def test_untried_first_per_room_and_reading_keeps_the_room():
    steps = OBS["tw-cooking-l3-dev-00"]["steps"]
    book = StateBook(mode="place")
    book.start(steps[0]["text"])
    kitchen = book.state
    assert kitchen == "kitchen"
    for s in steps[1:4]:
        book.record(s["command"], s["text"], s["reward"])
        assert book.state == kitchen          # the cookbook text and "You take ..." name no place
    tried = {s["command"] for s in steps[1:4]}
    fresh = book.fresh(steps[3]["candidates"])
    assert fresh and not tried & set(fresh) or any(s["reward"] > 0 for s in steps[1:4])


def test_a_failed_action_is_not_offered_again_in_that_state_and_loops_escape_to_the_least_tried():
    text = OBS["tw-coin_collector-l5-dev-00"]["steps"][0]["text"]
    candidates = ["go north", "inventory", "look"]
    book = StateBook(mode="place", loop_after=2)
    book.start(text)
    assert book.record("go west", "You can't go that way.")   # refused: failed
    assert "go west" in book.failed[book.state]
    assert book.allowed(candidates + ["go west"]) == candidates
    for c in candidates:
        book.record(c, text)
    options, why = book.options(candidates)
    assert why == "escape" and set(options) <= set(candidates)
    book.record("go north", "-= Cellar =-\nYou find yourself in a cellar.")
    book.record("go south", text)
    assert book.state == "study" and book.visits["study"] == 2 and book.looping()


def test_a_rewarded_action_reopens_its_state():
    book = StateBook()
    book.start("-= Kitchen =-\nYou are in a kitchen.")
    book.record("prepare meal", "Something still needs to be cooked.")
    assert book.fresh(["prepare meal"]) == []
    book.record("cook red onion with stove", "You fried the red onion. Your score has just gone up by one point.", 0.3)
    assert book.fresh(["prepare meal"]) == ["prepare meal"]


def test_text_mode_makes_every_babyai_view_a_state():
    steps = OBS["babyai-GoToLocal-1000"]["steps"]
    book = StateBook(mode="text")
    book.start(steps[0]["text"])
    book.record(steps[1]["command"], steps[1]["text"], steps[1]["reward"])
    assert book.state != " ".join(steps[0]["text"].split()).lower()
    assert book.fresh(steps[1]["candidates"]) == steps[1]["candidates"]
