"""Selection rules (jitlab/selection.py) on hand-made paired outcomes: greedy admits any gain, a screen only
rejects, confirm needs a second gain on other tasks, paired needs an exact McNemar p below the level."""
import pytest

from jitlab.engineer.loop import EngineerConfig
from jitlab.errors import ConfigError
from jitlab.selection import judge


def _runs(base, cand, seed=0, prefix="t"):
    return ({(f"{prefix}{i}", seed): bool(b) for i, b in enumerate(base)},
            {(f"{prefix}{i}", seed): bool(c) for i, c in enumerate(cand)})


ONE_GAIN = _runs([1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0])      # Δ = +1/6: one task of difference
SIX_WINS = _runs([0] * 6, [1] * 6)                              # 6 wins, 0 losses: p = 2 / 2**6 = 0.03125


def test_greedy_admits_a_one_task_gain_and_rejects_a_tie():
    v = judge("greedy", *ONE_GAIN)
    assert v.admitted and v.delta == pytest.approx(1 / 6) and (v.wins, v.losses, v.n_pairs) == (1, 0, 6)
    assert not judge("greedy", *_runs([1, 0], [0, 1])).admitted  # one win, one loss: Δ = 0


def test_a_screen_only_rejects():
    v = judge("screen", *SIX_WINS)
    assert not v.admitted and "only rejects" in v.reason


def test_confirm_needs_a_gain_on_the_confirmation_batch():
    held_gain, held_tie = _runs([0, 0, 1], [1, 0, 1], prefix="h"), _runs([0, 1], [0, 1], prefix="h")
    assert not judge("confirm", *ONE_GAIN).admitted                          # no confirmation measured
    assert judge("confirm", *ONE_GAIN, confirm=held_gain).admitted
    v = judge("confirm", *ONE_GAIN, confirm=held_tie)
    assert not v.admitted and v.confirm_delta == 0 and "confirmation Δ=+0.00" in v.reason
    assert not judge("confirm", *_runs([1, 1], [1, 0]), confirm=held_gain).admitted  # the screen rejects first


def test_paired_uses_the_exact_mcnemar_p_value_at_the_stated_level():
    v = judge("paired", *SIX_WINS)
    assert v.admitted and v.p_value == pytest.approx(0.03125) and v.level == 0.05
    assert not judge("paired", *SIX_WINS, level=0.01).admitted
    one = judge("paired", *ONE_GAIN)            # 1 win, 0 losses: p = 1.0
    assert not one.admitted and one.p_value == 1.0
    five = _runs([0] * 5, [1] * 5)              # 5 wins: p = 0.0625, not below 0.05
    assert judge("paired", *five).p_value == pytest.approx(0.0625) and not judge("paired", *five).admitted


def test_unknown_rules_and_levels_are_refused():
    with pytest.raises(ConfigError, match="unknown selection rule 'best'.*greedy, screen, confirm, paired"):
        judge("best", *ONE_GAIN)
    with pytest.raises(ConfigError, match="--selection must be greedy, screen, confirm or paired, got 'best'"):
        EngineerConfig(selection="best")
    with pytest.raises(ConfigError):
        EngineerConfig(selection="paired", selection_level=0.9)


def test_the_best_harness_on_dev_is_judged_against_the_runner_up(tmp_path):
    from jitlab.experiments import best_per_suite, run_grid
    rows = run_grid("toy", ["react", "random"], "scripted:pick-first", limit=4, out_root=tmp_path / "g")
    best = best_per_suite(rows).iloc[0]
    assert best["selection"] == "paired" and best["runner_up"] in ("react", "random")
    assert "exact McNemar p=" in best["best_vs_runner_up"]
    # 4 tasks can never give p < 0.05 (4 wins, 0 losses: p = 0.125): the pick is not told apart from the runner-up
    assert not bool(best["best_admitted"])


def test_stage3_bank_admission_rules():
    from types import SimpleNamespace as NS

    from jitlab.train.stage3 import admission
    tasks = [NS(id=f"f-{i}", family="f") for i in range(3)] + [NS(id="g-0", family="g")]

    class Evaluator:  # a TEST DOUBLE: a harness's reward on a task is written in its files
        files = {"cand": {"reward": {"f-0": 1.0, "f-1": 0.0}}}

        def harness(self, files, task):
            return NS(valid=True, reward=files["reward"].get(task.id, 0.0))

    class Bank:  # a TEST DOUBLE: the incumbent scores 0.5 everywhere
        def files(self, sha):
            return {"reward": {t.id: 0.5 for t in tasks}}

    args = (Evaluator(), Bank(), tasks)
    assert admission("gate", *args, tasks[0], "cand", "inc")["admitted"]
    assert not admission("screen", *args, tasks[0], "cand", "inc")["admitted"]
    v = admission("confirm", *args, tasks[0], "cand", "inc")  # confirmed on f-1: 0.0 < 0.5
    assert not v["admitted"] and v["confirm_task"] == "f-1" and "rejected" in v["reason"]
    Evaluator.files["cand"]["reward"]["f-1"] = 0.5             # keeps the incumbent's reward there: admitted
    assert admission("confirm", *args, tasks[0], "cand", "inc")["admitted"]
    lone = admission("confirm", *args, tasks[3], "cand", "inc")
    assert not lone["admitted"] and "no other training task of family g" in lone["reason"]
