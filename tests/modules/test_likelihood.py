"""Likelihood choice and LikelihoodAction (jitlab/modules/likelihood.py) on recorded TextWorld observations."""
import pytest
import yaml
from small_model_data import ACT, OBS, DoubleLLM

from jitlab.envs.base import TaskSpec
from jitlab.harness import seed_bank_dir
from jitlab.modules.likelihood import LikelihoodAction, choose, normalised
from jitlab.protocol import Context, Ctx, Decision, Directive, Observation, View

PROMPTS = yaml.safe_load((seed_bank_dir() / "small_model" / "likelihood" / "prompt.yaml").read_text())
COIN = OBS["walkthrough:tw-coin_collector-l5-dev-03"]
TASK = TaskSpec(id="t", suite="textworld", family="coin_collector", split="dev", description=COIN["description"],
                tools=[ACT], max_steps=25)


def _context(step, observation, directive=None, view="..."):
    return Context(task=TASK, view=View(view), directive=directive or Directive(), capabilities=[ACT],
                   observation=Observation(observation["text"], candidates=observation["candidates"]), step=step)


def test_length_normalisation_divides_by_words_plus_the_end_token():
    assert normalised([-6.0, -6.0], ["take coin", "take coin from the floor"]) == [-2.0, -1.0]
    assert normalised([-6.0], ["x"], "none") == [-6.0]


def test_one_batched_score_call_per_choice_with_the_prior_added():
    llm = DoubleLLM({"go east": -2.0, "go west": -1.0})
    ctx = Ctx(llm=llm, task=TASK, prompts=PROMPTS)
    choice = choose(ctx, [{"role": "user", "content": "x"}], ["go east", "go west"], prior={"go east": 1.0})
    assert choice.command == "go east" and choice.method == "score" and len(llm.score_calls) == 1
    assert choose(ctx, [{"role": "user", "content": "x"}], ["go east", "go west"]).command == "go west"


def test_without_score_the_backbone_picks_a_number_from_a_list():
    llm = DoubleLLM(None, reply="2")
    ctx = Ctx(llm=llm, task=TASK, prompts=PROMPTS)
    choice = choose(ctx, [{"role": "user", "content": "room"}], ["go east", "go west"])
    assert (choice.command, choice.method) == ("go west", "chat")
    asked = llm.chat_calls[0][0][-1]["content"]
    assert "1. go east" in asked and "2. go west" in asked and asked.startswith("room")
    garbled = choose(Ctx(llm=DoubleLLM(None, reply="the door"), task=TASK, prompts=PROMPTS),
                     [{"role": "user", "content": "room"}], ["go east", "go west"])
    assert (garbled.command, garbled.method) == ("go east", "order")
    with pytest.raises(ValueError, match="at least one candidate"):
        choose(ctx, [], [])


def test_the_action_walks_untried_commands_room_by_room_and_records_who_decided():
    """Replays the recorded coin-collector game: the double likes looking around best, but information commands
    come last and a command tried in a room is not offered there again."""
    llm = DoubleLLM(lambda c: -0.1 if c in ("look", "inventory") else -3.0)
    action = LikelihoodAction()
    ctx = Ctx(llm=llm, task=TASK, prompts=PROMPTS)
    action.reset(ctx)
    first = COIN["steps"][0]
    action.on_init(ctx, Observation(first["text"], first["candidates"]))
    decision = action.act(_context(1, first), ctx)
    assert decision.args["command"] not in ("look", "inventory")
    assert decision.data["decided_by"] in ("model_choice", "mechanism")
    assert decision.data["choice"]["why"] == "untried"
    # the same room again after a failed command: that command is not offered again
    action.post_feedback(ctx, decision, Observation("You can't go that way.", first["candidates"]))
    again = action.act(_context(2, first), ctx)
    assert again.args["command"] != decision.args["command"]
    # a model choice among several options makes exactly one score call per step, no chat call
    calls = len(llm.score_calls)
    cellar = COIN["steps"][1]
    action.post_feedback(ctx, Decision("act", {"command": "go east"}), Observation(cellar["text"], cellar["candidates"]))
    step = action.act(_context(3, cellar), ctx)
    assert len(llm.score_calls) - calls == (step.data["choice"]["method"] in ("score", "tie")) and not llm.chat_calls
    if step.data["choice"]["method"] == "score" and not step.data["choice"]["prior_changed"]:
        assert step.data["decided_by"] == "model_choice" and len(step.data["choice"]["top"]) >= 2
    if step.data["choice"]["method"] == "tie":
        assert step.data["decided_by"] == "mechanism" and step.data["mechanism"] == "likelihood:tie"


def test_a_tie_or_a_prior_that_overturns_the_backbone_is_the_harness_decision():
    """Equal scores: the candidate order chose (likelihood:tie); a prior that overturns the backbone's unique pick
    or breaks its tie decided (likelihood:prior); only the backbone's own unique pick is a model choice."""
    ctx = Ctx(llm=DoubleLLM(lambda c: 0.0), task=TASK, prompts=PROMPTS)
    msgs = [{"role": "user", "content": "Next command:"}]
    tied = choose(ctx, msgs, ["go north", "go west"])
    assert (tied.method, tied.command, tied.decider()) == ("tie", "go north", ("mechanism", "likelihood:tie"))
    broken = choose(ctx, msgs, ["go north", "go west"], prior={"go west": 1.0})
    assert (broken.command, broken.decider()) == ("go west", ("mechanism", "likelihood:prior"))
    likes_west = Ctx(llm=DoubleLLM(lambda c: -1.0 if "west" in c else -5.0), task=TASK, prompts=PROMPTS)
    own = choose(likes_west, msgs, ["go north", "go west"])
    assert (own.command, own.decider()) == ("go west", ("model_choice", None))
    overturned = choose(likes_west, msgs, ["go north", "go west"], prior={"go north": 10.0})
    assert (overturned.command, overturned.decider(), overturned.record(["go north", "go west"])["prior_changed"]) \
        == ("go north", ("mechanism", "likelihood:prior"), True)


def test_the_prompt_keeps_the_task_first_and_the_view_next():
    llm = DoubleLLM(lambda c: 0.0)
    action = LikelihoodAction(explore=False)
    ctx = Ctx(llm=llm, task=TASK, prompts=PROMPTS)
    action.reset(ctx)
    first = COIN["steps"][1]
    action.on_init(ctx, Observation(first["text"], first["candidates"]))
    action.act(_context(1, first, view="Observation: the study"), ctx)
    messages, candidates = llm.score_calls[-1]
    assert messages[0]["role"] == "system" and TASK.description in messages[0]["content"]
    assert messages[1]["content"].startswith("Observation: the study") and set(candidates) <= set(first["candidates"])


def test_a_demoted_command_the_planner_favours_is_offered():
    action = LikelihoodAction()
    action.reset(Ctx(llm=None, task=TASK))
    action.book.start("-= Kitchen =-")
    options, _ = action.options(["examine cookbook", "open fridge"], prior={"examine cookbook": 2.0})
    assert options == ["examine cookbook", "open fridge"]
    assert action.options(["examine cookbook", "open fridge"])[0] == ["open fridge"]


def test_own_thought_is_one_short_chat_call_then_the_commands_are_scored_after_it():
    llm = DoubleLLM(lambda c: -1.0 if "north" in c else -2.0, reply=" I should explore north.")
    action = LikelihoodAction(thought="own")
    ctx = Ctx(llm=llm, task=TASK, prompts=PROMPTS)
    action.reset(ctx)
    first = COIN["steps"][1]
    action.on_init(ctx, Observation(first["text"], first["candidates"]))
    decision = action.act(_context(1, first), ctx)
    messages, candidates = llm.score_calls[-1]
    assert messages[-1] == {"role": "assistant", "content": "Thought: I should explore north.\nAction:"}
    assert all(c.startswith(" ") for c in candidates) and decision.thought == "I should explore north."
    assert llm.chat_calls[0][1]["stop"] == ["\n"]


def test_the_record_says_when_the_prior_overturned_the_models_own_choice():
    ctx = Ctx(llm=DoubleLLM({"go east": -2.0, "go west": -1.0}), task=TASK, prompts=PROMPTS)
    turned = choose(ctx, [{"role": "user", "content": "x"}], ["go east", "go west"], prior={"go east": 3.0})
    kept = choose(ctx, [{"role": "user", "content": "x"}], ["go east", "go west"], prior={"go west": 3.0})
    assert turned.record(["go east", "go west"])["prior_changed"] is True
    assert kept.record(["go east", "go west"])["prior_changed"] is False


def test_under_the_margin_the_backbone_abstains_and_the_prior_then_the_order_decide():
    ctx = Ctx(llm=DoubleLLM({"go east": -2.0, "go west": -1.8, "take coin": -6.0}), task=TASK, prompts=PROMPTS)
    ask = [{"role": "user", "content": "x"}]
    # per word + 1: go east -0.667, go west -0.6 (lead 0.067)
    unclear = choose(ctx, ask, ["go east", "go west"], margin=0.1)
    assert (unclear.command, unclear.method, unclear.model_pick) == ("go east", "defer", "go west")
    assert unclear.decider() == ("mechanism", "likelihood:defer") and unclear.record(["go east", "go west"])["gap"]
    assert choose(ctx, ask, ["go east", "go west", "take coin"], {"take coin": 0.5}, margin=0.1).command == "take coin"
    clear = choose(ctx, ask, ["go east", "go west"], margin=0.05)
    assert (clear.command, clear.decider()) == ("go west", ("model_choice", None))
    assert choose(ctx, ask, ["go east", "go west"]).command == "go west"          # margin 0: always the backbone


def test_the_actions_margin_reaches_the_choice():
    llm = DoubleLLM({"go east": -2.0, "go west": -1.8})
    ctx = Ctx(llm=llm, task=TASK, prompts=PROMPTS)
    step = {"text": COIN["steps"][0]["text"], "candidates": ["go east", "go west"]}
    for margin, command in ((0.0, "go west"), (0.5, "go east")):
        action = LikelihoodAction(margin=margin)
        action.reset(ctx)
        action.on_init(ctx, Observation(step["text"], step["candidates"]))
        assert action.act(_context(1, step), ctx).args["command"] == command
