"""Memory modules on scripted episodes (ScriptedBackbone TEST DOUBLES, toy suite)."""
import itertools

from jitlab.modules.action import ReActFoldAction
from jitlab.modules.memory import (
    CoordinatorHistory,
    FullHistory,
    IsolatedContextMemory,
    MemoPageMemory,
    MultiScaleFoldingMemory,
    PeriodicSummaryMemory,
    ReasoningGraphMemory,
    RolloutHistories,
    SubgoalWorkingMemory,
    ThreeTierMemory,
)
from jitlab.modules.planning import SubgoalPlanner
from jitlab.protocol import Event


def _look(messages):
    return "Thought: look around.\nAction: look"


def _view_chars(run):
    return [s["trace"]["view_chars"] for s in run.steps]


def test_folding_memory_shrinks_the_view(run):
    def merging(messages):
        return "Thought: nothing yet.\nFold: merge 2: looked around, nothing happened\nAction: look"
    full = run(memory=FullHistory(max_chars=100_000), responder=_look, max_steps=24)
    folded = run(memory=MultiScaleFoldingMemory(), action=ReActFoldAction(), responder=merging, max_steps=24)
    condensed = run(memory=MultiScaleFoldingMemory(), action=ReActFoldAction(), responder=_look, max_steps=24)
    assert full.result.status == folded.result.status == condensed.result.status == "ok"
    assert full.result.steps == folded.result.steps == 24
    # the full history grows with every step; the folded context stays bounded
    assert _view_chars(full)[-1] > 3 * _view_chars(full)[5]
    assert _view_chars(folded)[-1] < _view_chars(full)[-1] / 4
    assert _view_chars(condensed)[-1] < _view_chars(full)[-1] / 2
    memory = folded.modules["memory"]
    assert memory.folds["merge"] > 10 and len(memory.blocks) <= memory.max_blocks
    assert len(condensed.modules["memory"].blocks) <= memory.max_blocks
    # a merge covers a range of steps
    assert any(b["hi"] > b["lo"] for b in memory.blocks)


def test_summary_memory_restarts_from_question_and_summary(run, solver):
    def responder(messages):
        if "Summarize the progress" in messages[-1]["content"]:
            return "Evidence: the door opened\nGaps: where the coin is\nNext: go east"
        return _look(messages)
    full = run(memory=FullHistory(max_chars=100_000), responder=_look, max_steps=12)
    summ = run(memory=PeriodicSummaryMemory(every_k=3), responder=responder, max_steps=12)
    assert summ.result.status == "ok"
    memory = summ.modules["memory"]
    assert memory.summaries == 4          # at steps 3, 6, 9, 12
    assert "Evidence: the door opened" in memory.summary and "Next: go east" in memory.summary
    last_action_prompt = [p for p in summ.prompts if p[0]["role"] == "system"][-1][-1]["content"]
    assert "Progress summary:" in last_action_prompt and "Gaps: where the coin is" in last_action_prompt
    assert _view_chars(summ)[-1] < _view_chars(full)[-1] / 2


def test_summary_memory_survives_garbage_replies(run):
    r = run(memory=PeriodicSummaryMemory(every_k=2), responder=lambda m: "?? <> ;;", max_steps=8)
    assert r.result.status == "ok"
    summary = r.modules["memory"].summary
    assert summary.startswith("Verified:") and "Tried:" in summary


def test_reasoning_graph_folds_finished_subtrajectories_and_flushes_failures(run, solver):
    counter = itertools.count()

    def responder(messages):
        if "finished sub-trajectory" in messages[-1]["content"]:
            return "Opened the door after looking around."
        reply = solver(messages)              # always called, so it keeps track of progress
        return _look(messages) if next(counter) % 2 == 0 else reply
    r = run(memory=ReasoningGraphMemory(), responder=responder, task=2, max_steps=12)
    assert r.result.status == "ok" and r.result.success
    memory = r.modules["memory"]
    folds = [n for n in memory.nodes if n["kind"] == "fold"]
    assert folds and memory.flushed > 0
    assert folds[0]["text"] == "Opened the door after looking around."
    assert all(len(f["children"]) >= 1 for f in folds)
    view = memory.view(r.agent.ctx).text
    assert "[F1 <-" in view and "Nothing happens" not in view.split("Current observation")[0]


def test_memo_pages_are_searched_on_demand(make_ctx):
    ctx = make_ctx()
    memory = MemoPageMemory(top_k=1, query_every=0)
    memory.reset(ctx)
    memory.update(Event("observation", "You are in a hall."), ctx)
    for i, (act, obs) in enumerate([("look under mat", "You find a small brass key under the mat."),
                                    ("go west", "A kitchen with a stove."), ("go east", "Back in the hall."),
                                    ("go north", "A bedroom. A chest with a brass keyhole stands here.")]):
        memory.update(Event("action", act, i + 1), ctx)
        memory.update(Event("observation", obs, i + 1), ctx)
    ctx.step = 5
    view = memory.view(ctx)
    assert view.data["pages"] == [2]                     # the key page, found through the latest page's words
    assert "brass key" in view.text.split("Pages found on demand:")[1]
    assert len(memory.memos) == 5


def test_three_tier_memory_folds_on_marker(make_ctx):
    def responder(messages):
        return "Episodic: explored the hall\nWorking: find the key\nTool: act works, look is useless"
    ctx = make_ctx(responder)
    memory = ThreeTierMemory(fold_every=0)
    memory.reset(ctx)
    memory.update(Event("observation", "start"), ctx)
    for i in range(1, 4):
        memory.update(Event("action", "look", i, {"tool": "act"}), ctx)
        memory.update(Event("observation", f"room {i}", i), ctx)
    ctx.step = 4
    assert memory.view(ctx).data["folds"] == 0
    ctx.state["fold_requested"] = True
    ctx.step = 5
    view = memory.view(ctx)
    assert view.data["folds"] == 1 and len(view.events) == 1
    assert "Episodic memory:" in view.text and "explored the hall" in view.text
    assert "Working memory: find the key" in view.text
    assert "act: 3 calls" in view.text and "look is useless" in view.text


def test_subgoal_working_memory_collapses_when_a_subgoal_ends(run, solver):
    def responder(messages):
        content = messages[-1]["content"]
        if "next subgoal" in content:
            return "Subgoal: reach the goal room"
        if "what was achieved for this subgoal" in content:
            return "The first command of the goal worked."
        return solver(messages)
    r = run(memory=SubgoalWorkingMemory(), planner=SubgoalPlanner(patience=1), responder=responder, task=2)
    assert r.result.status == "ok" and r.result.success
    memory = r.modules["memory"]
    assert len(memory.finished) >= 2
    assert memory.finished[0].startswith("Subgoal 'reach the goal room' (done): The first command")
    # the working memory only holds the current subgoal's events
    assert len(memory.working) <= 3


def test_isolated_context_hides_other_subtasks(make_ctx):
    ctx = make_ctx()
    memory = IsolatedContextMemory()
    memory.reset(ctx)
    ctx.state["subtask"] = "0.1"
    memory.update(Event("action", "open secret door", 1), ctx)
    memory.update(Event("observation", "The secret door opens.", 1), ctx)
    ctx.state["subtask"] = "0.2"
    ctx.state["context_results"] = {"open the door": "done"}
    view = memory.view(ctx)
    assert "secret door" not in view.text.split("Current observation")[0]
    assert "open the door: done" in view.text
    memory.update(Event("action", "go east", 2), ctx)
    memory.update(Event("observation", "East room.", 2), ctx)
    assert "go east" in memory.view(ctx).text and "open secret door" not in memory.view(ctx).text


def test_rollout_histories_are_isolated(make_ctx):
    ctx = make_ctx()
    memory = RolloutHistories(k=3)
    memory.reset(ctx)
    memory.update(Event("observation", "start"), ctx)
    ctx.state["rollout_notes"] = ["alpha idea => go east", "beta idea => look", "gamma idea => take coin"]
    memory.update(Event("action", "go east", 1), ctx)
    rollouts = memory.view(ctx).data["rollouts"]
    assert len(rollouts) == 3
    assert "alpha" in rollouts[0] and "beta" not in rollouts[0] and "gamma" not in rollouts[0]
    assert "gamma" in rollouts[2] and "alpha" not in rollouts[2]


def test_coordinator_history_hides_subagent_steps(make_ctx):
    ctx = make_ctx()
    memory = CoordinatorHistory()
    memory.reset(ctx)
    memory.update(Event("observation", "start room"), ctx)
    ctx.state["subagent"] = {"active": True}
    ctx.state["delegations"] = [{"instruction": "open the door", "tools": ["act"], "report": ""}]
    memory.update(Event("action", "pull lever", 1), ctx)
    memory.update(Event("observation", "A click.", 1), ctx)
    ctx.state["subagent"] = {"active": False}
    ctx.state["delegations"][0]["report"] = "door is open"
    view = memory.view(ctx)
    assert "pull lever" not in view.text and "open the door => door is open" in view.text
    assert view.data["hidden_steps"] == 1
