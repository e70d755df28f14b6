"""Pareto math of the harness bank: pure functions over ``{task_id: (reward, cost, latency)}`` per harness.

    from jitlab.jit.pareto import dominates, pareto_front
    pareto_front({"a": {"t1": (1.0, 0.2, 3.0)}, "b": {"t1": (0.5, 0.3, 4.0)}})     # ["a"]

Two harnesses are compared only on the tasks both were evaluated on: over that shared set each gets its mean
reward, cost and latency (``aggregate``). A *dominates* B when the shared set is not empty and A is at least as
good on all three (reward higher, cost and latency lower) and strictly better on one; *weakly* dominates when at
least as good on all three. With no shared task the two are incomparable. The bank's conservative frontier
update (jitlab.jit.bank) is built from these; ``blockers`` is its entry rule: the frontier members that keep a newcomer
out (empty: it advances the frontier).
"""
from __future__ import annotations

__all__ = ["aggregate", "blockers", "dominates", "pareto_front", "weakly_dominates"]


def aggregate(per_task: dict, tasks) -> tuple[float, float, float]:
    """Mean (reward, cost, latency) of one harness over ``tasks``."""
    tasks = list(tasks)
    n = len(tasks)
    return tuple(sum(per_task[t][i] for t in tasks) / n for i in range(3))


def _compare(a: dict, b: dict) -> tuple[tuple, tuple] | None:
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    return aggregate(a, shared), aggregate(b, shared)


def _ge(x: tuple, y: tuple) -> bool:
    """x at least as good as y on (reward up, cost down, latency down)."""
    return x[0] >= y[0] and x[1] <= y[1] and x[2] <= y[2]


def weakly_dominates(a: dict, b: dict) -> bool:
    """A at least as good as B on every objective over their shared tasks (shared set not empty)."""
    pair = _compare(a, b)
    return pair is not None and _ge(*pair)


def dominates(a: dict, b: dict) -> bool:
    """A at least as good as B on every objective and strictly better on one, over their shared tasks."""
    pair = _compare(a, b)
    return pair is not None and _ge(*pair) and pair[0] != pair[1]


def pareto_front(metrics: dict[str, dict]) -> list[str]:
    """Keys of ``metrics`` ({sha: {task: (reward, cost, latency)}}) that no other key dominates.
    Entries with no task are left out."""
    keys = [k for k, v in metrics.items() if v]
    return [k for k in keys if not any(dominates(metrics[o], metrics[k]) for o in keys if o != k)]


def blockers(candidate: dict, frontier: dict[str, dict]) -> list[str] | None:
    """The keys of ``frontier`` ({sha: {task: (reward, cost, latency)}}) that weakly dominate ``candidate``, so keep it
    off the frontier (a tie keeps the member); ``[]``: it would advance the frontier; None: it has no evaluation, so it
    cannot enter."""
    if not candidate:
        return None
    return [k for k, m in frontier.items() if weakly_dominates(m, candidate)]
