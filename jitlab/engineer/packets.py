"""Failure packets: what an engineer reads about a batch, extracted deterministically from its run records.

    from jitlab.engineer.packets import build_packet, packet_json
    packet = build_packet("runs/toy-react")      # a dict
    print(packet_json(packet))                    # `jitlab engineer packet RUN_DIR` prints this

A packet holds the run (suite, split, harness sha, backbone), the task constraints (each task's public
description and tools, from the suite), the batch's outcome, per failed episode its outcome and a trimmed
action–observation excerpt (the steps around each failure mark, the last steps before a budget end), and
the counts of failure kinds across the batch. Failure kinds, per step:

    refused          the observation reads like a refusal or error (jitlab.modules.hooks.FAIL_PATTERNS)
    repeated_action  the same action again in the same state (the state a refused action left unchanged)
    repeated_state   an observation already seen in the episode

and per episode: ``step_budget_end`` (all steps used, no success), ``budget`` (token or wall budget spent),
``harness_error`` (with its diagnostic kind), ``no_reward`` (no step earned reward).

Determinism: only the records' content is read (never times, row ids or paths), episodes are ordered by
task id and seed, and the JSON is written with sorted keys; the same records give a byte-identical packet.
Only finished episodes (ok, budget, harness_error) count; the first observation is not in the step records,
so an excerpt starts at step 1.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from jitlab.envs.base import get_suite
from jitlab.errors import JitlabError
from jitlab.modules.hooks import FAIL_PATTERNS
from jitlab.store import Status, load

__all__ = ["EXCERPT_STEPS", "build_packet", "packet_json", "step_marks"]

EXCERPT_STEPS = 10     # steps kept per failed episode
OBS_CHARS = 240        # characters kept per observation


def _clip(text, limit: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _action(tool: str, args: dict) -> str:
    if set(args) == {"command"}:
        return str(args["command"])
    return f"{tool}({', '.join(f'{k}={v!r}' for k, v in sorted(args.items()))})"


def step_marks(steps: list[dict]) -> list[list[str]]:
    """The failure marks of each step of one episode (``steps``: tool, args, observation, reward, in order)."""
    marks, seen, state, tried = [], set(), None, Counter()
    for s in steps:
        here, obs = [], " ".join(str(s["observation"] or "").split()).lower()
        key = _action(s["tool"], s["args"]).lower()
        refused = (s["reward"] or 0) <= 0 and bool(FAIL_PATTERNS.search(str(s["observation"] or "")))
        if refused:
            here.append("refused")
        if tried[(state, key)]:
            here.append("repeated_action")
        if obs in seen:
            here.append("repeated_state")
        tried[(state, key)] += 1
        seen.add(obs)
        if not refused and obs != state:
            state = obs
        marks.append(here)
    return marks


def _excerpt(steps: list[dict], marks: list[list[str]], budget_end: bool) -> list[dict]:
    keep = set()
    for i, m in enumerate(marks):
        if m:
            keep.update((i - 1, i, i + 1))
    if budget_end:
        keep.update((len(steps) - 2, len(steps) - 1))
    keep = sorted(i for i in keep if 0 <= i < len(steps))
    if len(keep) > EXCERPT_STEPS:  # the first failures and the end
        head = EXCERPT_STEPS // 2
        keep = keep[:head] + keep[-(EXCERPT_STEPS - head):]
    return [{"step": int(steps[i]["step"]), "action": _clip(_action(steps[i]["tool"], steps[i]["args"]), 120),
             "observation": _clip(steps[i]["observation"], OBS_CHARS), "reward": round(float(steps[i]["reward"] or 0), 4),
             "marks": marks[i]} for i in keep]


def _task_specs(config: dict) -> dict:
    """{task id: TaskSpec} of the run's split, or {} when the suite cannot be loaded here."""
    try:
        suite = get_suite(config.get("suite"))
        return {t.id: t for t in suite.tasks(config.get("split") or "dev", config.get("family"))}
    except (JitlabError, ImportError):
        return {}


def build_packet(run_dir: str | Path) -> dict:
    """The failure packet of the batch recorded in ``run_dir`` (see the module docstring)."""
    import pandas as pd

    frames = load(run_dir)
    config = frames["config"].iloc[0].to_dict() if len(frames["config"]) else {}
    eps = frames["episodes"]
    eps = eps[eps["final"]].sort_values(["task_id", "seed", "attempt"])
    steps = frames["steps"].sort_values(["episode_id", "step"])
    by_episode = {int(k): g for k, g in steps.groupby("episode_id")}
    specs = _task_specs(config)
    counts, failures, tasks = Counter(), [], {}
    max_steps_cfg = config.get("max_steps")
    for _, ep in eps.iterrows():
        spec = specs.get(ep["task_id"])
        if spec is not None:
            tasks[spec.id] = {"family": spec.family, "description": spec.description, "max_steps": spec.max_steps,
                              "tools": [{"name": t.name, "description": t.description} for t in spec.tools]}
        if bool(ep["success"]):
            continue
        rows = by_episode.get(int(ep["id"]))
        records = [] if rows is None else [
            {"step": int(r["step"]), "tool": r["tool"], "args": json.loads(r["args"] or "{}"),
             "observation": r["observation"], "reward": r["reward"]} for _, r in rows.iterrows()]
        marks = step_marks(records)
        # the run's --max-steps when it set one (a missing value reads back from the DataFrame as None or NaN)
        limit = int(max_steps_cfg) if max_steps_cfg and not pd.isna(max_steps_cfg) else (
            spec.max_steps if spec is not None else None)
        kinds = Counter(k for m in marks for k in m)
        budget_end = bool(limit) and int(ep["steps"] or 0) >= limit and ep["status"] == Status.OK
        if budget_end:
            kinds["step_budget_end"] += 1
        if ep["status"] in (Status.BUDGET, Status.HARNESS_ERROR):
            kinds[ep["status"]] += 1
        if not any((r["reward"] or 0) > 0 for r in records):
            kinds["no_reward"] += 1
        counts.update({k: 1 for k in kinds})  # per batch: how many failed episodes show each kind
        diagnostic = json.loads(ep["diagnostic"]) if isinstance(ep["diagnostic"], str) and ep["diagnostic"] else {}
        failures.append({
            "task_id": ep["task_id"], "seed": int(ep["seed"]),
            "outcome": {"status": ep["status"], "success": False, "reward": round(float(ep["reward"] or 0), 4),
                        "steps": int(ep["steps"] or 0), "error": _clip(ep["error"], 300),
                        "diagnostic_kind": diagnostic.get("kind", "")},
            "kinds": dict(sorted(kinds.items())),
            "excerpt": _excerpt(records, marks, budget_end or ep["status"] == Status.BUDGET)})
    n = len(eps)
    wins = int(eps["success"].fillna(0).astype(bool).sum()) if n else 0
    return {
        "run": {k: config.get(k) for k in ("suite", "split", "family", "harness", "backbone", "seed", "max_steps")}
        | {"harness_sha": str(eps["harness_sha"].iloc[0]) if n else None},
        "tasks": dict(sorted(tasks.items())),
        "batch": {"episodes": n, "successes": wins, "success_rate": round(wins / n, 4) if n else 0.0,
                  "task_ids": sorted(set(eps["task_id"]))},
        "failure_counts": dict(sorted(counts.items())),
        "failures": failures,
    }


def packet_json(packet: dict) -> str:
    """The packet as canonical JSON (sorted keys, two-space indent): byte-identical for the same records."""
    return json.dumps(packet, indent=2, sort_keys=True, ensure_ascii=False, default=str)
