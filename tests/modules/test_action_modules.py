"""Action modules on scripted replies (ScriptedBackbone TEST DOUBLES)."""
import re

from jitlab.llm.scripted import ScriptedBackbone
from jitlab.modules.action import (
    AdmissibleRerank,
    CoordinatorAction,
    EnsembleVote,
    MarkerAction,
    MultiRolloutAggregation,
    ReActFoldAction,
    majority,
)
from jitlab.modules.memory import CoordinatorHistory
from jitlab.modules.policy import AgentDelegation
from jitlab.protocol import Context, Decision, Directive, Observation, View
from jitlab.runtime import Budget, LLMHandle

CANDIDATES = ["go east", "take coin", "look", "open door"]


def _context(ctx, candidates=CANDIDATES, view=None):
    return Context(task=ctx.task, view=view or View("You are in a room."), directive=Directive(""),
                   capabilities=list(ctx.task.tools), observation=Observation("A room.", candidates=list(candidates)))


def _by_sample(choices):
    """Replies per independent attempt: the sample note in the prompt says which attempt this is."""
    def responder(messages):
        m = re.search(r"attempt (\d) of", messages[-1]["content"])
        if m:
            return f"Thought: attempt {m.group(1)}.\nAction: {choices[int(m.group(1)) - 1]}"
        return "???"
    return responder


def test_majority_breaks_ties_by_order():
    a, b = Decision("act", {"command": "a"}), Decision("act", {"command": "b"})
    assert majority([a, b, Decision("act", {"command": "B "})])[0] is b
    assert majority([a, b])[0] is a


def test_ensemble_vote_picks_the_majority(make_ctx):
    ctx = make_ctx(_by_sample(["take coin", "go east", "go east"]))
    decision = EnsembleVote().act(_context(ctx), ctx)
    assert decision.args == {"command": "go east"} and ctx.llm.calls == 3
    assert sorted(decision.data["votes"].values()) == [1, 2]


def test_sampling_stops_once_a_majority_is_reached(make_ctx):
    ctx = make_ctx(_by_sample(["go east", "go east", "take coin"]))
    decision = EnsembleVote().act(_context(ctx), ctx)
    assert decision.args == {"command": "go east"} and ctx.llm.calls == 2
    ctx = make_ctx(_by_sample(["look", "look", "look"]))
    assert MultiRolloutAggregation().act(_context(ctx), ctx).data["chosen_by"] == "unanimous"
    assert ctx.llm.calls == 2


def test_aggregation_falls_back_to_the_majority_on_a_garbage_aggregator(make_ctx):
    ctx = make_ctx(_by_sample(["take coin", "go east", "go east"]))
    decision = MultiRolloutAggregation().act(_context(ctx), ctx)
    assert decision.args == {"command": "go east"} and decision.data["chosen_by"] == "majority"
    assert ctx.llm.calls == 4
    aggregator_prompt = ctx.recorder.prompts[-1][-1]["content"]
    assert "- take coin" in aggregator_prompt and "- go east" in aggregator_prompt


def test_aggregator_inspects_and_may_overrule(make_ctx):
    inner = _by_sample(["take coin", "go east", "go east"])

    def responder(messages):
        if "Independent attempts proposed" in messages[-1]["content"]:
            return "Thought: the coin matters.\nAction: take coin"
        return inner(messages)
    ctx = make_ctx(responder)
    decision = MultiRolloutAggregation().act(_context(ctx), ctx)
    assert decision.args == {"command": "take coin"} and decision.data["chosen_by"] == "aggregator"


def test_unanimous_rollouts_skip_the_aggregator_and_use_isolated_histories(make_ctx):
    ctx = make_ctx(_by_sample(["look", "look", "look"]))
    view = View("shared", data={"rollouts": ["history one", "history two", "history three"]})
    decision = MultiRolloutAggregation(early_stop=False).act(_context(ctx, view=view), ctx)
    assert decision.data["chosen_by"] == "unanimous" and ctx.llm.calls == 3
    assert [p[-1]["content"].split("\n")[0] for p in ctx.recorder.prompts] == ["history one", "history two", "history three"]
    assert len(ctx.state["rollout_notes"]) == 3


def test_marker_action_reads_markers(make_ctx):
    reply = "I need data. <tool_search>sql query</tool_search> <fold> then <tool_call>take coin</tool_call>"
    ctx = make_ctx(lambda messages: reply)
    decision = MarkerAction().act(_context(ctx), ctx)
    assert decision.args == {"command": "take coin"} and decision.data["markers"] == ["tool_search", "fold", "tool_call"]
    assert ctx.state["tool_query"] == "sql query" and ctx.state["fold_requested"] is True
    assert decision.thought.startswith("I need data.")


def test_marker_action_without_markers_is_react(make_ctx):
    ctx = make_ctx(lambda messages: "Thought: hm\nAction: open the door <tool_call")
    decision = MarkerAction().act(_context(ctx), ctx)
    assert decision.args == {"command": "open door"} and decision.data["markers"] == []


def test_fold_action_leaves_a_directive_for_the_folding_memory(make_ctx):
    ctx = make_ctx(lambda messages: "Thought: b\nFold: merge 2: looked twice, nothing\nAction: look")
    decision = ReActFoldAction().act(_context(ctx), ctx)
    assert decision.args == {"command": "look"} and decision.thought == "b"
    assert ctx.state["fold"] == {"op": "merge", "k": 2, "summary": "looked twice, nothing"}
    ctx = make_ctx(lambda messages: "Thought: c\nAction: take coin")
    decision = ReActFoldAction().act(_context(ctx), ctx)
    assert "fold" not in ctx.state and decision.data["fold"] == {"op": "condense"}


class _Scorer(ScriptedBackbone):
    """A TEST DOUBLE whose score() prefers one command."""
    def score(self, messages, candidates):
        return [5.0 if c.strip() == "take coin" else 0.0 for c in candidates]


def test_admissible_rerank_uses_backbone_scores(make_ctx):
    ctx = make_ctx()
    ctx.llm = LLMHandle(_Scorer(lambda messages: "Thought: look first.\nAction: look"), Budget())
    decision = AdmissibleRerank().act(_context(ctx), ctx)
    assert decision.args == {"command": "take coin"} and decision.data["raw_action"] == "look"
    ctx.llm = LLMHandle(_Scorer(lambda messages: "Thought: coin.\nAction: go east"), Budget())
    assert AdmissibleRerank(match_bonus=10.0).act(_context(ctx), ctx).args == {"command": "go east"}


def test_admissible_rerank_without_candidates_is_react(make_ctx):
    ctx = make_ctx(lambda messages: "Thought: x\nAction: look")
    assert AdmissibleRerank().act(_context(ctx, candidates=[]), ctx).args == {"command": "look"}


def test_coordinator_delegates_to_a_nested_react_subagent(run, solver):
    def responder(messages):
        system = messages[0]["content"]
        if system.startswith("You are a coordinator"):
            return "Delegate: open the door | tools: act | context: the door is north"
        if system.startswith("You are a sub-agent"):
            if "Your steps so far" in messages[-1]["content"]:
                return "Finish: the door is open"
            return solver(messages)
        return "???"
    prompts = {"system": "You are a coordinator.\n{{ task.description }}",
               "step": "{{ view }}\n{% for h in hints %}Hint: {{ h }}\n{% endfor %}Delegate what?"}
    r = run(memory=CoordinatorHistory(), policy=AgentDelegation(), action=CoordinatorAction(), responder=responder,
            prompts=prompts, task=2)
    assert r.result.status == "ok"
    delegations = r.agent.ctx.state["delegations"]
    assert len(delegations) >= 2 and delegations[0]["instruction"] == "open the door"
    assert delegations[0]["tools"] == ["act"] and delegations[0]["report"] == "the door is open"
    # sub-agent prompts carried the instruction and the curated context, over the same backbone handle
    sub_prompts = [p for p in r.prompts if p[0]["content"].startswith("You are a sub-agent")]
    assert sub_prompts and "the door is north" in sub_prompts[0][0]["content"]
    assert r.llm.calls == len(r.prompts)
    coordinator_views = [p[1]["content"] for p in r.prompts if p[0]["content"].startswith("You are a coordinator")]
    assert "Hint: Report from sub1: the door is open" in coordinator_views[1]     # fresh report, same step
    assert "1. [act] open the door => the door is open" in coordinator_views[2]   # then in the coordinator history
    assert r.steps[0]["trace"]["capabilities"] == ["act", "delegate"]
    assert r.steps[1]["trace"]["capabilities"] == ["act"]          # while the sub-agent runs


def test_coordinator_with_garbage_replies_still_acts(run):
    r = run(memory=CoordinatorHistory(), policy=AgentDelegation(), action=CoordinatorAction(),
            responder=lambda messages: "%%", max_steps=6)
    assert r.result.status == "ok" and r.result.steps == 6
    assert all(s["tool"] == "act" for s in r.steps)
