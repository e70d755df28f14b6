"""Lenient parsing helpers of the module library (they must accept any string)."""
from jitlab.modules.text import clip, lexical_rank, list_items, meaningful, render_prompt, sections


def test_sections_tolerate_markdown_and_missing_labels():
    text = "**Evidence:** the door is open\n- Gaps: the coin\n  still missing\nrubbish"
    assert sections(text, ("Evidence", "Gaps", "Next")) == {"Evidence": "the door is open",
                                                             "Gaps": "the coin still missing rubbish"}
    assert sections("Thought: x\nAction: look", ("Evidence",)) == {}


def test_list_items_skip_thought_action_echoes():
    assert list_items("1. open door\n2) go east\n- Action: look\n* take coin\nStep 3: eat") == \
        ["open door", "go east", "take coin", "eat"]


def test_lexical_rank_prefers_rare_matching_words():
    scores = lexical_rank("brass key", ["a brass key lies here", "a key", "nothing"])
    assert scores[0] > scores[1] > scores[2] == 0


def test_meaningful_and_clip():
    assert not meaningful("Action: go east") and meaningful("The door was opened early on.")
    assert clip("a  b\n c", 10) == "a b c" and len(clip("x" * 50, 10)) == 10


def test_prompt_yaml_entry_overrides_the_library_template():
    values = {"task": {"description": "T"}, "summary": "", "transcript": "..."}
    assert "Evidence:" in render_prompt({}, "summary", **values)
    assert render_prompt({"summary": "custom {{ transcript }}"}, "summary", **values) == "custom ..."
