"""ReAct's tolerant parsing and the mapping of free text onto admissible commands."""
from jitlab.envs.toy import ACT, ToySuite
from jitlab.llm.scripted import ScriptedBackbone
from jitlab.modules.basic import ReActAction, echoes_options, parse_react
from jitlab.protocol import Context, Ctx, Directive, Observation, View
from jitlab.runtime import LLMHandle

OPTIONS = ["turn left", "turn right", "go forward", "pick up", "done"]


def test_sloppy_action_lines_parse():
    assert parse_react("Thought: hm\nAction: [go north].")[1] == "go north"
    assert parse_react("I think\n> take coin")[1] == "take coin"
    assert parse_react("**Action**: open door")[1] == "open door"


def test_echoed_option_list_is_detected():
    echo = "The next thought and action is:\n- turn left\n- turn right\n- go forward\n- done"
    assert echoes_options(echo, OPTIONS)
    assert not echoes_options("Thought: go.\nAction: go forward", OPTIONS)
    assert not echoes_options("I will go forward", OPTIONS)


class _Likes(ScriptedBackbone):
    """A TEST DOUBLE that echoes the option list and whose score() prefers 'go forward'."""
    def score(self, messages, candidates):
        return [1.0 if c == "go forward" else 0.0 for c in candidates]


def test_an_echoed_list_is_resolved_by_likelihood_not_its_last_line():
    spec = ToySuite().tasks()[0]
    llm = LLMHandle(_Likes(lambda m: "Options:\n- turn left\n- go forward\n- done"))
    ctx = Ctx(llm=llm, task=spec, prompts={"system": "sys", "step": "{{ view }}"})
    context = Context(task=spec, view=View("Observation: a room"), directive=Directive(""), capabilities=[ACT],
                      observation=Observation("a room", candidates=OPTIONS))
    decision = ReActAction().act(context, ctx)
    assert decision.args == {"command": "go forward"}


def test_history_is_cut_in_whole_chunks_so_its_start_stays_put():
    import itertools

    from jitlab.modules.basic import history_text
    from jitlab.protocol import Event
    events, starts, shown, texts = [], [], [], []
    for i in range(40):
        events += [Event("action", f"go {i}", i), Event("observation", f"You are in room {i}. " * 3, i)]
        text = history_text(events, 600)
        assert len(text) <= 600 + len("...\n") and text.endswith(events[-1].content.strip())
        starts.append(text[:40])
        shown.append(len(text))
        texts.append(text)
    changes = sum(a != b for a, b in itertools.pairwise(starts))
    assert 0 < changes <= 10                  # a tail cut would change the start at nearly every step
    assert min(shown[10:]) >= 600 // 2 - 80   # at least about half of max_chars stays visible
    # between two cuts the text only grows at its end: a prefix cache reuses all of the previous view
    grown = [b.startswith(a) for a, b, sa, sb in zip(texts, texts[1:], starts, starts[1:]) if sa == sb]
    assert all(grown) and len(grown) >= 25
