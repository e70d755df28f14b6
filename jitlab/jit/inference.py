"""Just-in-time harness inference: static (N candidates, pick one) and streaming (evolving bank).

    jitlab jit --suite textworld --mode streaming --generator compose --limit 20
    jitlab jit --suite toy --mode static --generator code:embedded --n-candidates 4 --selector logprob

or ``run_jit(JITConfig(...))``. Per task:

    retrieve K references from the bank -> generate N candidates (threads) -> validate each in the
    sandbox (compile, interface, smoke episode on a dev task) -> pick the first valid one in selector
    order (validity | logprob | judge; never a benchmark score) -> if none is valid, repair the top one
    (<= max_repair_rounds) -> if still none, run the nearest reference (``on_invalid="fallback"``) or
    record a harness_error (``"fail"``) -> run it on the task in the sandbox -> record ->
    (streaming) add it to the bank and apply the conservative frontier update.

Static mode reads the bank (B0) and never writes it; streaming updates it after every task, so
later tasks retrieve what worked on earlier ones (no weight update).

Accounting: every backbone call of every phase (generate, select, repair, execute) is logged in the
``calls`` table under the task's episode, and the episode's tokens/cost include all phases, so JIT
compares with fixed harnesses at matched budget; ``extra`` holds the per-phase split (docs/records.md).
Smoke episodes count as ``select`` (first validation of each candidate) or ``repair`` (revalidation).
The bank stores the *execution* tokens/cost of a harness (what reusing it costs).

Files: ``run.sqlite`` + ``summary.json`` (jitlab.store), ``bank.sqlite`` (seeded with B0 at start),
``harnesses/<sha>/`` (each harness that ran), ``candidates/`` (validation scratch), ``repairs.jsonl``.

Resume: like jitlab.runner (same config fingerprint, ConfigDrift otherwise; B0's shas are part of the
fingerprint). A task with a finished episode is skipped. The bank is updated only after the episode is
recorded, and a finished task's bank update is replayed on resume; bank adds are idempotent by sha and
evaluations by (sha, task, seed, run dir), so a SIGKILL at any point leaves no duplicate entries. The bank
stores its own run's dir as ``.`` (jitlab.jit.bank), so a run directory copied, moved or renamed resumes the
same way. The state a task sees (bank, references) depends only on the tasks before it, so a rerun task
regenerates the same candidates (and the replay cache makes that free).

Ray (static mode): ``--executor ray`` solves each unfinished task in a Ray task (jitlab/cluster.py; the Ray this
process is connected to, else ``$RAY_ADDRESS``, else a local one), ``--concurrency`` at once (default all),
against the worker's own copy of B0 in a scratch folder. The worker returns the task's episodes (calls,
steps, result), harness folders and repair records; this process alone writes run.sqlite, harnesses/,
repairs.jsonl and the bank, as each task comes back. A worker that dies fails its task only; a rerun solves
it again. The spend caps are checked against the spend recorded when each task was sent.

Repeats (``--repeat K``, jitlab/repeats.py): K independent JIT runs at seeds seed..seed+K-1, each in
``out/seed<s>/`` with a bank of its own (a repeat never retrieves what another repeat made), refused like
``jitlab run``'s when a seed varies nothing; ``out/summary.json`` holds each repeat's summary and the reliability
(pass@1 over repeats, pass^k, per-task variance) under ``repeats``. A sampling backbone (temperature > 0) samples
every call with the run's seed.

Files of this package, one job each: jitlab.jit.config (JITConfig, cost estimate), jitlab.jit.meter (per-phase
call sets), jitlab.jit.loop (one task, and the run), jitlab.jit.worker (Ray), jitlab.jit.summary (summary.json);
this module is the front that cli, notebooks and experiments import.

Caveats: tasks run one at a time (streaming is sequential by definition) unless ``--concurrency`` > 1 or Ray.
Every harness, seeds included, runs in the sandbox here. A Ray worker keeps its scratch folder (B0 copy) for
the life of its process.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from jitlab.envs.base import get_suite
from jitlab.jit.config import MODES, PHASES, JITConfig, cost_estimate, default_out
from jitlab.jit.loop import JITEngine  # the engine a run drives (jitlab.jit.loop; the Ray worker builds its own)
from jitlab.jit.summary import summarize_jit
from jitlab.jit.worker import _solve_on_worker as _solve_on_worker  # re-exported, as above
from jitlab.jit.worker import run_on_ray
from jitlab.repeats import check_repeat, repeat_seeds, repeat_summary
from jitlab.runtime import RunSpend
from jitlab.store import load

__all__ = ["MODES", "PHASES", "JITConfig", "JITEngine", "cost_estimate", "run_jit", "summarize_jit"]


def run_jit(cfg: JITConfig, spend: RunSpend | None = None) -> Path:
    """Run (or resume) a JIT run; returns the run directory (run.sqlite, summary.json, bank.sqlite, ...).
    ``spend``: a RunSpend shared with other runs (a grid's total cap) instead of the run's own caps; when a
    cap is reached no new task starts, a task in flight stops as ``spend_cap`` and SpendCapReached is raised."""
    if cfg.repeat > 1:
        return _run_repeats(cfg, spend)
    return _run_one(cfg, spend)


def _run_one(cfg: JITConfig, spend: RunSpend | None) -> Path:
    """One run directory: its tasks solved here, or on Ray (``executor="ray"``, static mode)."""
    return JITEngine(cfg, spend).run(remote=run_on_ray if cfg.executor == "ray" else None)


def _run_repeats(cfg: JITConfig, spend: RunSpend | None) -> Path:
    """``cfg.repeat`` independent runs at consecutive seeds (own run directory and bank each) and their
    reliability in ``out/summary.json`` (see the module docstring)."""
    import pandas as pd

    cfg.check()
    varies = check_repeat(get_suite(cfg.suite), cfg.backbone_options, cfg.repeat)
    out = Path(cfg.out) if cfg.out else default_out(cfg)
    if spend is None:   # the caps bound the whole command: every repeat counted together, one wall clock
        spend = cfg.command_spend(out)
    dirs = []
    for seed in repeat_seeds(cfg.seed, cfg.repeat):
        one = dataclasses.replace(cfg, seed=seed, repeat=1, out=str(out / f"seed{seed}"))
        dirs.append(_run_one(one, spend))
    frames = [load(d)["episodes"].assign(id=lambda e, i=i: e["id"] + i * 10 ** 9) for i, d in enumerate(dirs)]
    done = pd.concat(frames, ignore_index=True)
    done = done[done["final"]]
    per_repeat = [json.loads((d / "summary.json").read_text()) for d in dirs]
    summary = {k: per_repeat[0].get(k) for k in ("suite", "split", "backbone", "harness", "mode", "generator")}
    summary.update({"n_episodes": int(len(done)), "success_rate": float(done["success"].mean()) if len(done) else 0.0,
                    "mean_reward": float(done["reward"].mean()) if len(done) else 0.0,
                    "n_tasks_unfinished": sum(s["n_tasks_unfinished"] for s in per_repeat),
                    "runs": [str(d) for d in dirs], "varies": varies, "per_repeat": per_repeat})
    repeats = repeat_summary(done.assign(extra=json.dumps({"varies": varies})))
    if repeats is not None:
        summary["repeats"] = repeats
    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, default=str))
    os.replace(tmp, out / "summary.json")
    return out
