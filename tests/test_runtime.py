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
