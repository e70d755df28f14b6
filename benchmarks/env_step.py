"""Median environment step time per suite, with random actions and no backbone in the loop.

    .venv/bin/python benchmarks/env_step.py [--suites textworld,babyai] [--tasks 3] [--steps 40] [--seed 0]

For every suite registered in ``jitlab.envs.base.SUITES`` that loads (a suite whose module fails to
import is skipped and named), it plays ``--tasks`` dev tasks (spread over the families) with random
actions for ``--steps`` steps in all per task, resetting when an episode ends, and times each
``env.step`` call alone. A random action is one of the observation's ``candidates`` sent through the
task's first tool (its first required string argument); a suite may offer ``random_action(spec, obs,
rng) -> (tool, args)`` instead. Building the env (e.g. generating a TextWorld game on first use), a task's first
``reset`` (e.g. starting a TextWorldExpress JVM) and later resets are timed apart and not counted as step time.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from jitlab.envs.base import SUITES, get_suite


def _spread(specs, n):
    """Up to n tasks, round-robin over families so each family is timed."""
    by_family: dict[str, list] = {}
    for spec in specs:
        by_family.setdefault(spec.family, []).append(spec)
    out, queues = [], list(by_family.values())
    while len(out) < n and any(queues):
        for queue in queues:
            if queue and len(out) < n:
                out.append(queue.pop(0))
    return out


def _random_action(suite, spec, obs, rng):
    custom = getattr(suite, "random_action", None)
    if callable(custom):
        return custom(spec, obs, rng)
    tool = spec.tools[0]
    props = tool.args.get("properties", {})
    names = tool.args.get("required") or list(props)
    args = {}
    if names:
        args[names[0]] = rng.choice(obs.candidates) if obs.candidates else "look"
    return tool.name, args


def bench_suite(name: str, n_tasks: int, steps: int, seed: int) -> dict:
    suite = get_suite(name)
    rng = random.Random(seed)
    step_s, reset_s, first_s, make_s = [], [], [], []
    for spec in _spread(suite.tasks("dev"), n_tasks):
        t0 = time.perf_counter()
        env = suite.make_env(spec)
        make_s.append(time.perf_counter() - t0)
        try:
            t0 = time.perf_counter()
            obs = env.reset(seed=seed)
            first_s.append(time.perf_counter() - t0)
            for _ in range(steps):
                if obs.done:
                    t0 = time.perf_counter()
                    obs = env.reset(seed=seed)
                    reset_s.append(time.perf_counter() - t0)
                tool, args = _random_action(suite, spec, obs, rng)
                t0 = time.perf_counter()
                obs = env.step(tool, args)
                step_s.append(time.perf_counter() - t0)
        finally:
            env.close()
    return {"suite": name, "tasks": len(make_s), "steps": len(step_s),
            "step_ms_median": 1000 * statistics.median(step_s) if step_s else float("nan"),
            "step_ms_p90": 1000 * statistics.quantiles(step_s, n=10)[-1] if len(step_s) > 1 else float("nan"),
            "first_reset_ms_median": 1000 * statistics.median(first_s) if first_s else float("nan"),
            "reset_ms_median": 1000 * statistics.median(reset_s) if reset_s else float("nan"),
            "make_env_s_total": sum(make_s)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suites", default=",".join(sorted(SUITES)), help="comma-separated suite names")
    parser.add_argument("--tasks", type=int, default=3, help="dev tasks per suite")
    parser.add_argument("--steps", type=int, default=40, help="random steps per task")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = []
    for name in args.suites.split(","):
        try:
            rows.append(bench_suite(name, args.tasks, args.steps, args.seed))
        except ImportError as exc:
            print(f"skip {name}: its module does not import ({exc})")
        except Exception as exc:  # one broken suite must not hide the others' numbers
            print(f"skip {name}: {type(exc).__name__}: {exc}")
    print(f"{'suite':<12}{'tasks':>6}{'steps':>7}{'step ms (median)':>18}{'p90 ms':>9}{'1st reset ms':>14}"
          f"{'reset ms':>10}{'make_env s':>12}")
    for r in rows:
        print(f"{r['suite']:<12}{r['tasks']:>6}{r['steps']:>7}{r['step_ms_median']:>18.3f}{r['step_ms_p90']:>9.3f}"
              f"{r['first_reset_ms_median']:>14.1f}{r['reset_ms_median']:>10.1f}{r['make_env_s_total']:>12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
