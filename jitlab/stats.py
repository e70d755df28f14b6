"""The statistics every table, figure and comparison uses: intervals on rates and means, paired tests.

One definition of each, in pure Python (no numpy), so the store, the exports, the CLI and the figures agree:

- :func:`wilson` the Wilson score interval of a success rate (95% by default). It stays inside [0, 1] and is
  not degenerate at 0/n or n/n, unlike the normal (Wald) interval, and is close to the exact interval's coverage
  at the 6-50 tasks jitlab runs.
- :func:`bootstrap_mean` a percentile bootstrap interval of a mean (reward, tokens per task), resampling tasks
  with a fixed seed so a table is reproducible.
- :func:`paired_bootstrap` the same for the mean of per-task differences ``b - a`` of two runs on the same tasks.
- :func:`mcnemar_exact` the exact (binomial) two-sided McNemar p-value of paired successes: only the discordant
  pairs count (tasks one run solved and the other did not).
- :func:`discordant` the wins and losses of run B against run A over paired successes (what McNemar counts).
- :func:`run_intervals` the three intervals every summary, table and figure shows for one run: success rate
  (Wilson), mean reward and tokens per task (bootstrap), under the key names of ``summary.json``.

    >>> wilson(2, 10)             # (0.0567, 0.5098) to 4 places
    >>> mcnemar_exact(5, 0)       # 0.0625: five flips one way, none the other
"""
from __future__ import annotations

import math
import random
from statistics import NormalDist

__all__ = ["INTERVAL_METHOD", "LEVEL", "N_BOOT", "bootstrap_mean", "discordant", "mcnemar_exact",
           "paired_bootstrap", "run_intervals", "wilson"]

LEVEL = 0.95
N_BOOT = 2000
INTERVAL_METHOD = (f"success rate: Wilson score interval; mean reward and tokens/task: percentile bootstrap over "
                   f"tasks ({N_BOOT} resamples, seed 0)")


def _z(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """The Wilson score interval ``(lo, hi)`` of ``k`` successes in ``n`` trials; ``(0.0, 1.0)`` when n = 0."""
    if n < 0 or not 0 <= k <= max(n, 0):
        raise ValueError(f"need 0 <= k <= n, got k={k!r}, n={n!r}")
    if n == 0:
        return 0.0, 1.0
    z = _z(level)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # at k = 0 (k = n) the bound is exactly 0 (1); the formula leaves a rounding residue there
    return (0.0 if k == 0 else max(0.0, centre - half)), (1.0 if k == n else min(1.0, centre + half))


def _percentiles(samples: list[float], level: float) -> tuple[float, float]:
    samples = sorted(samples)
    lo_i = (1 - level) / 2 * (len(samples) - 1)
    hi_i = (1 + level) / 2 * (len(samples) - 1)

    def at(i: float) -> float:
        low = math.floor(i)
        high = min(low + 1, len(samples) - 1)
        return samples[low] + (samples[high] - samples[low]) * (i - low)
    return at(lo_i), at(hi_i)


def bootstrap_mean(values, level: float = LEVEL, n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float, float]:
    """``(mean, lo, hi)``: the mean of ``values`` and its percentile bootstrap interval (resampling the values).

    An empty list gives NaNs; a single value gives a zero-width interval (there is nothing to resample)."""
    values = [float(v) for v in values]
    if not values:
        return math.nan, math.nan, math.nan
    mean = sum(values) / len(values)
    if len(values) == 1:
        return mean, mean, mean
    rng = random.Random(seed)
    n = len(values)
    means = [sum(rng.choices(values, k=n)) / n for _ in range(n_boot)]
    lo, hi = _percentiles(means, level)
    return mean, lo, hi


def paired_bootstrap(a, b, level: float = LEVEL, n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float, float]:
    """``(mean Δ, lo, hi)`` of the per-pair differences ``b[i] - a[i]`` (pairs resampled together)."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    return bootstrap_mean([float(y) - float(x) for x, y in zip(a, b)], level, n_boot, seed)


def discordant(a, b) -> tuple[int, int]:
    """``(wins, losses)`` of B against A over paired successes: pairs only B solved, pairs only A solved."""
    a, b = [bool(x) for x in a], [bool(y) for y in b]
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    return sum(y and not x for x, y in zip(a, b)), sum(x and not y for x, y in zip(a, b))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts: ``b`` pairs where only the first run succeeded,
    ``c`` where only the second did. Under the null each discordant pair goes either way with probability 1/2, so
    p = min(1, 2 · P[Binomial(b + c, 1/2) <= min(b, c)]); 1.0 when there is no discordant pair."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b!r}, {c!r}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def run_intervals(success, reward, tokens, level: float = LEVEL) -> dict:
    """The intervals of one run's finished episodes (one value per episode in each list), as the
    ``summary.json`` keys: ``n_success``, ``success_rate_wilson``, ``mean_reward_ci``, ``tokens_per_task_ci`` (each
    ``[lo, hi]``), ``interval_level`` and ``interval_method``. No episodes: ``success_rate_wilson`` is [0, 1], the others None."""
    success = [bool(s) for s in success]
    reward, tokens = [float(r) for r in reward], [float(t) for t in tokens]

    def ci(values):
        return list(bootstrap_mean(values, level)[1:]) if values else None
    return {"n_success": sum(success), "success_rate_wilson": list(wilson(sum(success), len(success), level)),
            "mean_reward_ci": ci(reward), "tokens_per_task_ci": ci(tokens),
            "interval_level": level, "interval_method": INTERVAL_METHOD}
