"""The episode loop, budgets and hooks, on the toy suite with scripted test doubles."""
import pytest

from jitlab.envs.toy import ToySuite
from jitlab.harness import load_harness
from jitlab.llm.scripted import ScriptedBackbone, get_scripted
from jitlab.runtime import Budget, HarnessAgent, LLMHandle, run_episode


def _run(backbone, budget=None, harness="react", task=0, steps=None):
    budget = budget or Budget()
    suite = ToySuite()
    spec = suite.tasks()[task]
    llm = LLMHandle(backbone, budget)
    records = []
    result = run_episode(suite.make_env(spec), HarnessAgent(load_harness(harness), llm), llm, budget,
                         on_step=records.append)
    return result, records, llm, spec


def _solver(spec):
    """A scripted double that knows the toy plan: it answers the next planned command."""
    plan = spec.data["plan"]

    calls = []

    def responder(messages):
        calls.append(1)
        return f"Thought: next step.\nAction: {plan[min(len(calls) - 1, len(plan) - 1)]}"
    return ScriptedBackbone(responder, name="toy-solver")


def test_episode_solves_with_a_knowing_script():
    spec = ToySuite().tasks()[2]
    result, records, llm, _ = _run(_solver(spec), task=2)
    assert result.status == "ok" and result.success and result.reward == 1.0
    assert result.steps == len(spec.data["plan"]) == len(records)
    assert [r["args"]["command"] for r in records] == spec.data["plan"]
    assert llm.calls == result.steps and llm.tokens > 0


def test_step_budget_ends_episode_unsolved():
    result, records, _, spec = _run(get_scripted("look"), Budget(max_steps=3))
    assert result.status == "ok" and result.steps == 3 and not result.success


def test_token_budget_is_enforced():
    result, records, llm, _ = _run(get_scripted("look"), Budget(max_tokens=150))
    assert result.status == "budget" and "token budget" in result.error
    assert llm.tokens >= 150 and result.steps < 8


def test_wall_budget_is_enforced():
    result, *_ = _run(ScriptedBackbone(["Action: look"], delay_s=0.05), Budget(max_wall_s=0.12))
    assert result.status == "budget" and "wall" in result.error


class _QueuedBackbone:
    """Test double for a shared model: a scripted backbone behind a lock that another thread holds for
    ``hold_s`` before each call is served, reporting that wait as ``queue_s`` (as the hf engine does)."""

    def __init__(self, inner, hold_s: float, compute_s: float = 0.0):
        import threading
        self.inner, self.hold_s, self.compute_s, self.id = inner, hold_s, compute_s, inner.id
        self.lock, self.threading = threading.Lock(), threading

    def chat(self, messages, **params):
        import dataclasses
        import time
        start = time.perf_counter()
        taken = self.threading.Event()
        holder = self.threading.Thread(target=self._hold, args=(taken,))
        holder.start()
        taken.wait()          # "another episode's batch" has the model...
        with self.lock:       # ...and this call queues until it is done
            queued = time.perf_counter() - start
            time.sleep(self.compute_s)
            reply = self.inner.chat(messages, **params)
        holder.join()
        return dataclasses.replace(reply, queue_s=queued, compute_s=self.compute_s,
                                   latency_s=time.perf_counter() - start)

    def _hold(self, taken):
        import time
        with self.lock:
            taken.set()
            time.sleep(self.hold_s)


def test_queue_time_is_not_charged_to_the_wall_budget():
    spec = ToySuite().tasks()[2]
    steps = len(spec.data["plan"])
    budget = Budget(max_wall_s=0.15 * steps)
    result, _, llm, _ = _run(_QueuedBackbone(_solver(spec), hold_s=0.3), budget, task=2)
    assert result.wall_s > budget.max_wall_s          # the episode took longer than its budget, all of it queued
    assert result.status == "ok" and result.success, result.error
    assert llm.queue_s >= 0.3 * steps
    # compute time is charged: the same waits spent computing end the episode as `budget`
    slow, *_ = _run(_QueuedBackbone(_solver(spec), hold_s=0.0, compute_s=0.3), budget, task=2)
    assert slow.status == "budget" and "wall budget" in slow.error


def test_calls_record_queue_and_compute_time():
    spec = ToySuite().tasks()[2]
    calls = []
    llm = LLMHandle(_QueuedBackbone(_solver(spec), hold_s=0.05, compute_s=0.02), Budget(), on_call=calls.append)
    llm.chat([{"role": "user", "content": "hi"}])
    (call,) = calls
    assert call["queue_s"] >= 0.05 and call["compute_s"] == 0.02 and call["latency_s"] >= 0.07
    plain = LLMHandle(get_scripted("look"), Budget(), on_call=calls.append)
    plain.chat([{"role": "user", "content": "hi"}])   # a backbone that does not split: all of it is compute
    assert calls[-1]["queue_s"] == 0.0 and calls[-1]["compute_s"] == pytest.approx(calls[-1]["latency_s"])
    assert calls[-1]["reused_tokens"] == 0


def test_harness_exception_becomes_harness_error(tmp_path):
    import shutil
    folder = tmp_path / "broken"
    shutil.copytree(load_harness("react").folder, folder)
    (folder / "action.py").write_text("class Action:\n    def act(self, context, ctx):\n        return 1 / 0\n")
    suite = ToySuite()
    llm = LLMHandle(get_scripted("look"))
    result = run_episode(suite.make_env(suite.tasks()[0]), HarnessAgent(load_harness(folder), llm), llm, Budget())
    assert result.status == "harness_error" and result.diagnostic["kind"] == "runtime_error"
    assert "ZeroDivisionError" in result.error


def test_hooks_are_called_and_pre_action_can_rewrite(tmp_path):
    import shutil
    folder = tmp_path / "hooked"
    shutil.copytree(load_harness("react").folder, folder)
    (folder / "hooks.py").write_text(
        "from jitlab.protocol import Decision\n"
        "class Hooks:\n"
        "    def on_init(self, ctx, obs): ctx.state['init'] = True\n"
        "    def pre_decision(self, ctx, context): return ['be brief']\n"
        "    def pre_action(self, ctx, context, decision): return Decision('act', {'command': 'look'})\n"
        "    def post_feedback(self, ctx, decision, obs): ctx.state['seen'] = ctx.state.get('seen', 0) + 1\n")
    suite = ToySuite()
    llm = LLMHandle(get_scripted("pick-first"))
    agent = HarnessAgent(load_harness(folder), llm)
    records = []
    run_episode(suite.make_env(suite.tasks()[0]), agent, llm, Budget(max_steps=2), on_step=records.append)
    assert agent.ctx.state == {"init": True, "seen": 2}
    assert [r["args"] for r in records] == [{"command": "look"}] * 2
    assert records[0]["trace"]["hints"] == ["be brief"]


def test_modules_reach_backbone_only_through_handle():
    spec = ToySuite().tasks()[0]
    llm = LLMHandle(get_scripted("pick-first"))
    agent = HarnessAgent(load_harness("react"), llm)
    run_episode(ToySuite().make_env(spec), agent, llm, Budget(max_steps=1))
    assert agent.ctx.llm is llm


def test_an_environment_crash_is_an_infra_error_not_the_harness():
    suite = ToySuite()
    env = suite.make_env(suite.tasks()[0])

    def broken(tool, args):
        raise RuntimeError("game engine died")
    env.step = broken
    llm = LLMHandle(get_scripted("look"))
    result = run_episode(env, HarnessAgent(load_harness("react"), llm), llm, Budget())
    assert result.status == "infra_error" and "game engine died" in result.error


def test_a_scorer_crash_is_an_infra_error_not_the_harness():
    suite = ToySuite()
    spec = suite.tasks()[0]
    env = suite.make_env(spec)

    def broken():
        raise KeyError("scorer lost its table")
    env.score = broken
    llm = LLMHandle(_solver(spec))
    result = run_episode(env, HarnessAgent(load_harness("react"), llm), llm, Budget())
    assert result.status == "infra_error" and "scorer lost its table" in result.error and "score" in result.error
    assert not result.success and result.reward == 0.0 and result.steps > 0


def test_score_calls_are_counted_and_priced():
    from jitlab.llm.pricing import Price

    class Scorer:  # a test double with a price, like a real backbone
        id, price = "double:scorer", Price(input_per_mtok=2.0, output_per_mtok=4.0)

        def score(self, messages, candidates):
            return [-float(len(c)) for c in candidates]

    calls = []
    llm = LLMHandle(Scorer(), on_call=calls.append)
    assert llm.score([{"role": "user", "content": "pick one of these"}], ["go east", "eat"]) == [-7.0, -3.0]
    assert calls[0]["kind"] == "score" and calls[0]["prompt_tokens"] == 7 and calls[0]["completion_tokens"] == 0
    assert calls[0]["cost"] == pytest.approx(7 * 2.0 / 1e6) == llm.cost
    # without a call log (Stage III's evaluations, the validity checks) a score call counts all the same: Stage III's
    # latency and cost channels read these counters (session 23: its likelihood candidates showed 0 calls, 0 tokens)
    bare = LLMHandle(Scorer())
    bare.score([{"role": "user", "content": "pick one of these"}], ["go east", "eat"])
    assert (bare.calls, bare.tokens, bare.cost) == (1, 7, pytest.approx(7 * 2.0 / 1e6))


def test_score_calls_count_the_backbones_tokens_and_a_replay_keeps_them(tmp_path):
    from jitlab.llm.cache import ReplayCache

    class Counted:  # a TEST DOUBLE scorer that reports its token count and reused prefix, as hf.py and llamacpp.py do
        id, runs = "double:counted", 0

        def score(self, messages, candidates):
            self.runs += 1
            return [0.5 for _ in candidates]

        def last_score_timing(self):
            return {"queue_s": 0.0, "compute_s": 0.01, "reused": 9, "prompt_tokens": 31}
    calls, backbone, cache = [], Counted(), ReplayCache(tmp_path / "replay.sqlite")
    messages = [{"role": "user", "content": "pick one of these"}]
    for _ in range(2):   # the second call is a replay-cache hit: the backbone does not run again
        assert LLMHandle(backbone, cache=cache, on_call=calls.append).score(messages, ["go east", "eat"]) == [0.5, 0.5]
    assert backbone.runs == 1 and [c["cached"] for c in calls] == [False, True]
    assert all(c["prompt_tokens"] == 31 and c["reused_tokens"] == 9 for c in calls)
    # a backbone without a token count: today's estimate in words, its reuse not measured (NULL, not 0)
    calls.clear()
    LLMHandle(get_scripted("look"), on_call=calls.append).score(messages, ["go east", "eat"])
    assert calls[0]["prompt_tokens"] == 7 and calls[0]["reused_tokens"] is None


class _OneStepEnv:
    """A TEST DOUBLE environment: the given task spec, one step to the end (no game is generated)."""

    def __init__(self, spec):
        self.spec = spec

    def reset(self, seed=0):
        from jitlab.protocol import Observation
        return Observation("start", candidates=["look"])

    def step(self, tool, args):
        from jitlab.protocol import Observation
        return Observation("end", done=True)

    def score(self):
        from jitlab.envs.base import Score
        return Score(False, 0.0)


@pytest.mark.parametrize("suite, budget_text", [("textworld", "Budget: at most 5 commands."),
                                                 ("babyai", "Budget: 5 actions.")])
def test_the_harness_is_told_the_step_cap_it_has(suite, budget_text):
    """Issue 27 item 17: ``jitlab run --suite textworld --max-steps 5 ...`` showed the harness "Budget: at most 25
    commands." and ``max_steps`` 25 (the task's own); the task it is given now says the cap of the episode."""
    from jitlab.envs.base import get_suite
    from jitlab.protocol import Decision
    spec = get_suite(suite).tasks("dev")[0]
    assert spec.max_steps > 5 and f"{spec.max_steps} " in spec.description

    class Recorder:  # a TEST DOUBLE agent: keeps the task it was given, always looks
        def begin(self, task, obs):
            self.task = task

        def decide(self, step):
            return Decision("act", {"command": "look"})

        def observe(self, decision, obs, step):
            pass
    agent = Recorder()
    llm = LLMHandle(get_scripted("pick-first"))
    run_episode(_OneStepEnv(spec), agent, llm, Budget(max_steps=5))
    assert agent.task.max_steps == 5 and budget_text in agent.task.description
    assert agent.task.description.replace(budget_text, "") == spec.description.replace(
        budget_text.replace("5", str(spec.max_steps)), "")          # nothing else changed
    run_episode(_OneStepEnv(spec), agent, llm, Budget(max_steps=500))
    assert agent.task is spec                                         # a cap above the task's own changes nothing


def test_the_time_breakdown_adds_up_to_the_wall_time_and_puts_each_wait_in_its_part():
    spec = ToySuite().tasks()[2]
    steps = len(spec.data["plan"])
    result, _, llm, _ = _run(_QueuedBackbone(_solver(spec), hold_s=0.05, compute_s=0.03), task=2)
    t = result.time
    assert set(t) == {"compute_s", "queue_s", "backbone_other_s", "harness_s", "sandbox_s", "env_s", "other_s"}
    assert sum(t.values()) == pytest.approx(result.wall_s, abs=0.01)
    assert t["queue_s"] >= 0.05 * steps and t["compute_s"] == pytest.approx(0.03 * steps, abs=1e-3)
    assert t["sandbox_s"] == 0 and t["harness_s"] < t["queue_s"]   # an in-process harness; its code is quick
