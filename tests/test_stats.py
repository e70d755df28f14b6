"""jitlab.stats against hand-computed values."""
import math

import pytest

from jitlab.stats import bootstrap_mean, discordant, mcnemar_exact, paired_bootstrap, run_intervals, wilson


def test_wilson_matches_hand_computed_interval():
    lo, hi = wilson(2, 10)
    assert lo == pytest.approx(0.0567, abs=1e-4) and hi == pytest.approx(0.5098, abs=1e-4)
    assert wilson(0, 10)[0] == 0.0 and wilson(0, 10)[1] == pytest.approx(0.2775, abs=1e-4)
    assert wilson(10, 10)[1] == 1.0
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_mcnemar_exact_binomial_tail():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(1, 0) == 1.0
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 32)
    # n = 7 discordant, min = 1: 2 * (C(7,0) + C(7,1)) / 2^7 = 16/128
    assert mcnemar_exact(6, 1) == pytest.approx(0.125)
    assert mcnemar_exact(1, 6) == mcnemar_exact(6, 1)


def test_bootstrap_is_reproducible_and_brackets_the_mean():
    values = [0, 0, 1, 0, 1, 1, 0, 0, 0, 1]
    mean, lo, hi = bootstrap_mean(values)
    assert mean == 0.4 and lo <= mean <= hi and 0 <= lo and hi <= 1
    assert bootstrap_mean(values) == (mean, lo, hi)
    assert bootstrap_mean([3.0]) == (3.0, 3.0, 3.0)
    assert all(math.isnan(x) for x in bootstrap_mean([]))


def test_paired_bootstrap_of_identical_runs_is_zero():
    assert paired_bootstrap([1, 2, 3], [1, 2, 3]) == (0.0, 0.0, 0.0)
    d, lo, hi = paired_bootstrap([0, 0, 0, 0], [1, 1, 1, 0])
    assert d == 0.75 and lo <= d <= hi
    with pytest.raises(ValueError):
        paired_bootstrap([1], [1, 2])


def test_discordant_counts_and_run_intervals():
    assert discordant([1, 1, 0, 0, 0], [1, 0, 1, 1, 0]) == (2, 1)    # B won tasks 3 and 4, lost task 2
    with pytest.raises(ValueError):
        discordant([1], [1, 0])
    got = run_intervals([1, 0, 0, 0], [1.0, 0.5, 0.0, 0.0], [10, 20, 30, 40])
    assert got["n_success"] == 1 and got["success_rate_wilson"] == list(wilson(1, 4))
    assert got["mean_reward_ci"] == list(bootstrap_mean([1.0, 0.5, 0.0, 0.0])[1:])
    assert got["tokens_per_task_ci"][0] <= 25 <= got["tokens_per_task_ci"][1]
    empty = run_intervals([], [], [])
    assert empty["success_rate_wilson"] == [0.0, 1.0] and empty["mean_reward_ci"] is None
