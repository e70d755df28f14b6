"""Planner modules on scripted episodes (ScriptedBackbone TEST DOUBLES, toy suite)."""
import pytest

from jitlab.modules.action import DAGParallelAction, RecursiveExecution
from jitlab.modules.memory import IsolatedContextMemory
from jitlab.modules.planning import DAGPlanner, RecursiveDAGPlanner, RoadmapPlanner, SubgoalPlanner, TaskDAG
from jitlab.modules.text import parse_subtasks
from jitlab.protocol import Decision, Observation, View

DAG_REPLY = "1. open door\n2. go east (after 1)\n3. take coin (after 1)\n4. go north (after 2, 3)"


def test_parse_subtasks_keeps_only_backward_dependencies():
    items = parse_subtasks("Thought: hm\n1. a (after 2)\n2. b (after 1)\n3) c [deps: 1, 2]\n- d")
    assert items == [("a", []), ("b", [0]), ("c", [0, 1]), ("d", [])]
    assert parse_subtasks("Thought: I will try 'look'.\nAction: look") == []


def test_dag_planner_runs_ready_nodes_in_dependency_order(make_ctx):
    ctx = make_ctx(lambda messages: DAG_REPLY)
    planner = DAGPlanner(revise_every=0, patience=5)
    planner.reset(ctx)
    ready_sets, executed = [], []
    for step in range(1, 7):
        ctx.step = step
        directive = planner.plan(View("start"), ctx)
        ready = [n["id"] for n in directive.data["ready"]]
        ready_sets.append(ready)
        if not ready:
            break
        executed.append(ready[-1])   # run the *last* ready node: order must still respect dependencies
        planner.post_feedback(ctx, Decision("act", {"command": "x"}, data={"node": ready[-1]}),
                              Observation("ok", reward=1.0))
    assert ready_sets[:4] == [[1], [2, 3], [2], [4]]
    assert executed == [1, 3, 2, 4] and planner.dag.order == executed
    assert ready_sets[4] == [] and ctx.state["plan_done"] is True
    assert ctx.llm.calls == 1                    # planned once; no revision configured
    ctx.step = 6
    assert "All sub-tasks are done" in planner.plan(View("end"), ctx).text
    ctx.step = 10                                 # patience (5) steps later the finished DAG is replanned
    assert planner.plan(View("end"), ctx).data["ready"][0]["id"] == 5 and ctx.llm.calls == 2


def test_dag_without_reward_moves_on_after_patience(make_ctx):
    ctx = make_ctx(lambda messages: DAG_REPLY)
    planner = DAGPlanner(revise_every=0, patience=2)
    planner.reset(ctx)
    ctx.step = 1
    planner.plan(View(""), ctx)
    for _ in range(2):
        planner.post_feedback(ctx, Decision("act", {"command": "x"}), Observation("Nothing happens."))
    assert planner.dag.order == [1]


def test_dag_parallel_action_proposes_for_ready_nodes_and_queues(run, solver):
    def responder(messages):
        if "Break the task into" in messages[-1]["content"]:
            return "1. open the door\n2. look around\n3. go on (after 1, 2)"
        return solver(messages)
    r = run(planner=DAGPlanner(revise_every=0), action=DAGParallelAction(), responder=responder, task=2)
    assert r.result.status == "ok"
    traces = [s["trace"]["directive"] for s in r.steps]
    assert traces[0].startswith("Ready sub-tasks: [1] open the door; [2] look around")
    # one planning call + two proposals in the first round; step 2 runs the queued proposal (no call)
    assert r.modules["planner"].dag.order[:2] in ([1, 2], [2, 1])
    first_round_calls = 1 + 2
    assert len(r.prompts) >= first_round_calls and r.steps[1]["tokens"] == 0


def test_roadmap_planner_follows_steps_and_replans(run, solver):
    def responder(messages):
        content = messages[-1]["content"]
        if "Write a short plan" in content:
            return "1. open the door\n2. walk east"
        if "Rewrite the remaining plan" in content:
            return "1. grab the coin"
        return solver(messages)
    r = run(planner=RoadmapPlanner(patience=1, replan_every=0), responder=responder, task=2)
    assert r.result.status == "ok" and r.result.success
    directives = [s["trace"]["directive"] for s in r.steps]
    assert directives[0].startswith("Plan step 1: open the door (then: walk east)")
    assert directives[1].startswith("Plan step 2: walk east")
    assert directives[2].startswith("Plan step 3: grab the coin")
    assert r.modules["planner"].plans >= 2


@pytest.mark.parametrize("planner", [RoadmapPlanner, DAGPlanner, RecursiveDAGPlanner, SubgoalPlanner])
def test_planners_fall_back_when_the_backbone_replies_garbage(run, planner):
    r = run(planner=planner(), responder=lambda messages: "@@ ?? 12", max_steps=10)
    assert r.result.status == "ok" and r.result.steps == 10
    assert all(s["trace"]["directive"] for s in r.steps)


def test_recursive_planner_decomposes_executes_leaves_and_aggregates_up(run, solver):
    def responder(messages):
        content = messages[-1]["content"]
        if "answer \"atomic\"" in content:
            return "complex" if "Goal: You are in a small room" in content else "atomic"
        if "Split the goal" in content:
            return "1. open the door\n2. go onward (after 1)"
        if "what is the result for the goal" in content:
            return "Both steps of the goal are done."
        return solver(messages)
    r = run(memory=IsolatedContextMemory(), planner=RecursiveDAGPlanner(patience=1), action=RecursiveExecution(),
            responder=responder, task=2)
    assert r.result.status == "ok" and r.result.success
    planner, ctx = r.modules["planner"], r.agent.ctx
    assert planner.nodes["0"]["children"] == ["0.1", "0.2"] and planner.nodes["0.2"]["deps"] == ["0.1"]
    leaves = [s["trace"]["directive"].split(" (")[0] for s in r.steps]
    assert leaves[:2] == ["Sub-task 0.1", "Sub-task 0.2"]
    assert ctx.state["results"]["0"] == "Both steps of the goal are done."   # aggregated upward by the action
    assert leaves[2] == "Sub-task 0.f1"          # tree finished, episode not: a finishing leaf under the root
    assert "Both steps of the goal are done." in str(r.prompts[-1])


def test_recursive_planner_depth_and_size_are_bounded(make_ctx):
    def responder(messages):
        if "answer \"atomic\"" in messages[-1]["content"]:
            return "complex"
        return "1. part one\n2. part two\n3. part three"
    ctx = make_ctx(responder)
    planner = RecursiveDAGPlanner(max_depth=3, max_nodes=30)
    planner.reset(ctx)
    ctx.step = 1
    planner.plan(View(""), ctx)
    assert max(n["depth"] for n in planner.nodes.values()) == 3
    assert planner.current == "0.1.1.1"
    small = RecursiveDAGPlanner(max_nodes=5)
    small.reset(ctx)
    small.plan(View(""), ctx)
    assert len(small.nodes) <= 5


def test_subgoal_planner_declares_a_new_subgoal_when_one_ends(make_ctx):
    replies = iter(["Subgoal: open the door", "Thought: open the chest\nAction: go east"])
    ctx = make_ctx(lambda messages: next(replies))
    planner = SubgoalPlanner(patience=2)
    planner.reset(ctx)
    assert planner.plan(View(""), ctx).text == "Current subgoal: open the door"
    planner.post_feedback(ctx, Decision("act"), Observation("You open door.", reward=0.5))
    assert ctx.state["subgoal"]["done"]
    second = planner.plan(View(""), ctx)
    assert second.data["id"] == 2 and second.text == "Current subgoal: open the chest"   # garbage reply: first line kept


def test_task_dag_ignores_unknown_dependencies():
    dag = TaskDAG()
    a = dag.add("a", [99])
    assert dag.ready() == [dag.nodes[a]]
