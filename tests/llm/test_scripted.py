"""Scripted backbones are deterministic TEST DOUBLES: same messages -> same reply, named as doubles."""
import pytest

from jitlab.errors import InfraError, UnknownName
from jitlab.llm import get_backbone
from jitlab.llm.scripted import ScriptedBackbone, listed_options

ROOM = [{"role": "system", "content": "You play a text game."},
        {"role": "user", "content": "You are in a hall.\nAdmissible:\n- go east\n- take key\n- open door"}]


def test_pick_first_and_last():
    assert get_backbone("scripted:pick-first").chat(ROOM).text.endswith("Action: go east")
    assert get_backbone("scripted:pick-last").chat(ROOM).text.endswith("Action: open door")


def test_replies_are_a_pure_function_of_the_messages():
    a, b = get_backbone("scripted:pick-hash"), get_backbone("scripted:pick-hash")
    assert [a.chat(ROOM).text for _ in range(3)] == [b.chat(ROOM).text] * 3
    other = ROOM[:1] + [{"role": "user", "content": ROOM[1]["content"] + "\n- look"}]
    texts = {get_backbone("scripted:pick-hash").chat(other).text for _ in range(2)}
    assert len(texts) == 1


def test_ids_say_they_are_doubles_and_accounting_is_filled():
    llm = get_backbone("scripted:look")
    reply = llm.chat(ROOM)
    assert llm.id == "scripted:look"
    assert reply.text == "Thought: I should look around.\nAction: look"
    assert reply.prompt_tokens > 0 and reply.completion_tokens > 0 and reply.cost > 0


def test_reply_double_and_list_script():
    assert get_backbone("scripted:reply:a\\nb").chat(ROOM).text == "a\nb"
    llm = ScriptedBackbone(["one", "two"])
    assert llm.chat(ROOM).text == "one"
    assert llm.chat(ROOM + [{"role": "assistant", "content": "one"}]).text == "two"


def test_fail_double_raises_infra_error():
    with pytest.raises(InfraError):
        get_backbone("scripted:fail").chat(ROOM)


def test_unknown_double_lists_the_known_ones():
    with pytest.raises(UnknownName, match="scripted:pick-first"):
        get_backbone("scripted:nope")


def test_score_prefers_overlap_and_is_deterministic():
    llm = get_backbone("scripted:look")
    scores = llm.score(ROOM, ["eat the sofa", "take key"])
    assert scores[1] > scores[0] and scores == llm.score(ROOM, ["eat the sofa", "take key"])


def test_listed_options():
    assert listed_options(ROOM[1]["content"]) == ["go east", "take key", "open door"]


def test_the_uniform_double_scores_every_candidate_alike():
    """``scripted:uniform`` is the harness-only control: no word overlap, no order bonus in its scores."""
    from jitlab.llm import get_backbone
    llm = get_backbone("scripted:uniform")
    assert llm.score(ROOM, ["go east", "take coin", "look"]) == [0.0, 0.0, 0.0]
    assert llm.chat(ROOM).text.endswith("Action: go east")
    assert get_backbone("scripted:pick-first").score(ROOM, ["go east", "look"]) != [0.0, 0.0]
