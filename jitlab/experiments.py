"""Running experiments from notebooks: grids of fixed-harness runs, static and streaming JIT runs, their summary
tables, the spend cap a grid shares, and where a notebook writes. Reading one run back is jitlab.viz.runs.

    from jitlab import experiments as X
    runs = X.run_grid(["textworld", "babyai", "dbbench"], X.seed_harnesses(), ["embedded"],
                      limit=2, out_root="runs/seed_bank")      # one run directory per combination
    X.grid_table(runs)                                         # harness x suite: success, tokens
    X.best_per_suite(runs)                                     # best and cheapest harness per suite
    X.run_jit_modes("textworld", "compose", "embedded", limit=20)   # static + streaming JIT runs
    X.jit_summaries(dirs)                                      # one row per JIT run

Each grid cell is an ordinary ``jitlab run`` (jitlab.runner), so rerunning resumes and the run
directories feed ``jitlab figures`` and the dashboards. Relative output paths (``out_root``,
``figures_out``) are taken from :func:`output_path`: ``$JITLAB_OUT_ROOT`` when set (``jitlab batch`` sets
it to each run's folder under its ``--out``), else the repository root, so a notebook writes to the same
place whether its kernel starts in the repo or in ``notebooks/``.

Spend: ``max_cost`` / ``max_tokens_total`` given to :func:`run_grid` or :func:`run_jit_modes` cap the
*total* real backbone spend recorded under ``$JITLAB_SPEND_ROOT`` (set by ``jitlab batch`` to its
``--out``) or else under ``out_root``, all cells together; when it is reached no new episode starts and
SpendCapReached is raised (rerun with a higher cap to resume); ``max_wall_total_s`` caps the wall seconds of the
call the same way (counted from its start: a rerun resumes). :func:`check_spend` checks the spend before a step
that takes no cap itself (the engineer commands take ``max_cost`` / ``max_tokens_total`` / ``max_wall_total_s``
themselves now: jitlab/run_options.py).

Ray: ``run_grid(..., executor="ray")`` runs each cell as a Ray task (jitlab/cluster.py). It uses the Ray
this process is connected to, so ``ray.init(address="ray://head:10001")`` first points a grid at an existing
cluster (or set ``RAY_ADDRESS``); without either it starts a local Ray. A worker that dies fails its cell only;
rerunning the grid resumes that cell like any interrupted run.

Caveats: grid runs execute one after another unless ``workers`` > 1 or ``executor="ray"``. A cell that cannot
start (unknown suite, harness or backbone) raises; with ``workers`` > 1 or Ray it is logged when it fails,
the other cells finish, and then its error is raised.
"""
from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from jitlab.cluster import check_executor, ray_map
from jitlab.fields import check_number
from jitlab.harness import describe_files, seed_bank_dir, seed_names
from jitlab.jit.inference import JITConfig, run_jit
from jitlab.llm.base import DEFAULT_BACKBONE
from jitlab.paths import repo_root
from jitlab.progress import group
from jitlab.run_options import CAP_NAMES, SPEND_ROOT_ENV, shared_spend
from jitlab.runner import RunConfig, run
from jitlab.selection import judge, successes
from jitlab.store import load

__all__ = ["JIT_SUMMARY_COLUMNS", "OUT_ROOT_ENV", "REPEAT_COLUMNS", "SPEND_ROOT_ENV", "SUMMARY_COLUMNS", "best_per_suite",
           "check_spend", "grid_spend", "grid_table", "jit_summaries", "notebook_command", "output_path", "repo_path",
           "run_grid", "run_jit_modes", "run_slug", "seed_harnesses"]

OUT_ROOT_ENV = "JITLAB_OUT_ROOT"      # relative output paths resolve here (jitlab batch: OUT/<run id>)

log = logging.getLogger(__name__)

SUMMARY_COLUMNS = ["suite", "harness", "backbone", "run_dir", "n_episodes", "success_rate", "mean_reward",
                   "tokens_per_task", "cost_per_task", "tool_calls_per_task", "llm_calls_per_task",
                   "wall_s_per_task", "status_counts"]
# with repeat=K (RunConfig.repeat, jitlab/repeats.py) a grid's rows also hold these, from the summary's ``repeats``
REPEAT_COLUMNS = ["repeats_k", "pass_at_1", "pass_hat_k", "success_var_per_task"]



# -- fixed-harness grids -------------------------------------------------------------------------
def seed_harnesses(baselines: bool = False) -> list[str]:
    """Seed harness names in seed_bank/; baselines (``baseline: true`` in description.yaml, e.g.
    ``random``) only when ``baselines``."""
    names = []
    for name in seed_names():
        desc = describe_files({"description.yaml": (seed_bank_dir() / name / "description.yaml").read_text()})
        if baselines or not desc.get("baseline"):
            names.append(name)
    return names


def repo_path(path: str | Path) -> Path:
    """``path`` if absolute, else the same path under the repository root."""
    path = Path(path)
    return path if path.is_absolute() else repo_root() / path


def output_path(path: str | Path) -> Path:
    """Where a notebook or grid writes ``path``: itself if absolute, else under ``$JITLAB_OUT_ROOT`` when set
    (``jitlab batch`` sets it, so batch runs never write into the source checkout), else under the repository
    root (:func:`repo_path`)."""
    import os
    path = Path(path)
    root = os.environ.get(OUT_ROOT_ENV)
    if path.is_absolute():
        return path
    # normalised, so a batch grid can name a folder several notebooks share: ``../../common`` -> OUT/../common
    return Path(os.path.normpath(Path(root) / path)) if root else repo_path(path)


def grid_spend(root: str | Path, max_cost: float | None = None, max_tokens_total: int | None = None,
               max_wall_total_s: float | None = None):
    """A RunSpend shared by several runs, seeded with the real spend of every run recorded under
    ``$JITLAB_SPEND_ROOT`` (when set) or else ``root``, its wall clock started now; None when no cap is given
    (jitlab.run_options.shared_spend)."""
    return shared_spend(root, max_cost, max_tokens_total, max_wall_total_s)


def check_spend(root: str | Path, max_cost: float | None = None, max_tokens_total: int | None = None) -> None:
    """Raise SpendCapReached when the real backbone spend recorded under ``root`` (or ``$JITLAB_SPEND_ROOT``, set by
    ``jitlab batch``) reached a cap; a notebook calls it before a step that takes no cap itself."""
    spend = grid_spend(root, max_cost, max_tokens_total)
    if spend is not None:
        spend.check()


def run_slug(*parts) -> str:
    """A folder name from run parameters (``embedded``, ``litellm:openai/gpt-4o`` -> ``litellm_openai_gpt-4o``)."""
    return "-".join("".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(p)) for p in parts)


def run_grid(suites, harnesses, backbones, limit: int | None = 2, out_root: str | Path = "runs/grid",
             split: str = "dev", quiet: bool = True, workers: int = 1, executor: str = "local", **run_options):
    """Run every (suite, harness, backbone) combination on the first ``limit`` tasks of ``split``.

    Each writes ``out_root/<suite>/<harness>-<backbone>/`` (resumable). ``workers`` runs execute at
    once (threads of this process: a local model is loaded once and batches all their calls). With
    ``executor="ray"`` each cell is a Ray task instead (jitlab.cluster: the running Ray connection, else
    ``$RAY_ADDRESS``, else a local Ray), ``workers`` of them at once (default 1 is raised to all cells; Ray
    queues them on its CPUs); the cell's worker is the one writer of its directory. Extra keyword arguments
    go to :class:`jitlab.runner.RunConfig` (max_steps, max_tokens, concurrency, backbone_options, repeat, ...), except
    ``max_cost`` / ``max_tokens_total`` / ``max_wall_total_s``, which cap the whole grid (module docstring; with Ray
    each cell checks the cap against the spend recorded when it starts and its own, and counts its wall from its own
    start). Returns one row per run:
    ``SUMMARY_COLUMNS`` (from each run's summary.json), and ``REPEAT_COLUMNS`` with ``repeat`` > 1."""
    import pandas as pd

    check_number("workers", workers, min=1)
    check_executor(executor)
    suites, harnesses, backbones = (_as_list(x) for x in (suites, harnesses, backbones))
    root = output_path(out_root)
    caps = tuple(run_options.pop(name, None) for name in CAP_NAMES)
    spend = grid_spend(root, *caps)
    combos = [(s, h, b) for s in suites for b in backbones for h in harnesses]
    with group(len(combos), f"grid ({len(combos)} cells)", quiet=quiet, unit="cell", run_dir=root) as total:
        if executor == "ray":
            args = [(str(root), *combo, limit, split, quiet, run_options, caps) for combo in combos]
            rows = ray_map(_grid_cell, args, workers if workers > 1 else None,
                           labels=["grid cell " + " · ".join(map(str, c)) for c in combos])
            total.update(len(rows))
            for row in rows:  # the first failed cell's error, once every other cell has finished
                if isinstance(row, BaseException):
                    raise row
        elif workers > 1:
            with ThreadPoolExecutor(workers) as pool:
                futures = {pool.submit(_grid_cell, root, *c, limit, split, quiet, run_options, spend=spend): c
                           for c in combos}
                for future in as_completed(futures):  # say so when a cell fails; the other cells run on
                    total.update()
                    if future.exception() is not None:
                        log.error("grid cell %s failed: %r", " · ".join(map(str, futures[future])), future.exception())
            rows = [future.result() for future in futures]  # raises the first failed cell's error
        else:
            rows = []
            for c in combos:
                rows.append(_grid_cell(root, *c, limit, split, quiet, run_options, spend=spend))
                total.update()
    repeats = REPEAT_COLUMNS if run_options.get("repeat", 1) > 1 else []
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS + repeats)


def _grid_cell(root, suite, harness, backbone, limit, split, quiet, run_options, caps=(), spend=None) -> dict:
    """One grid cell: run (or resume) it, return its summary row. Module-level so a Ray task can run it; there
    ``caps`` (jitlab.run_options.CAP_NAMES, in order) make the cell's own grid spend (a RunSpend cannot cross processes)."""
    out = Path(root) / suite / run_slug(Path(str(harness)).name, backbone)
    if not quiet:
        print(f"{suite} · {harness} · {backbone} -> {out}", flush=True)
    if spend is None:
        spend = grid_spend(root, *caps)
    run_dir = run(RunConfig(suite=suite, harness=str(harness), backbone=backbone, limit=limit,
                            split=split, out=str(out), quiet=quiet, **run_options), spend=spend)
    summary = json.loads((run_dir / "summary.json").read_text())
    r = summary.get("repeats") or {}
    repeats = {"repeats_k": r.get("k"), "pass_at_1": r.get("pass_at_1"), "pass_hat_k": r.get("pass_hat_k"),
               "success_var_per_task": r.get("success_var_per_task")}
    return {**{k: summary.get(k) for k in SUMMARY_COLUMNS}, **repeats, "suite": suite,
            "harness": Path(str(harness)).name, "backbone": backbone, "run_dir": str(run_dir)}


def _as_list(value) -> list:
    return [value] if isinstance(value, (str, Path)) else list(value)


def grid_table(runs, values=("success_rate", "tokens_per_task"), index: str = "harness", columns: str = "suite"):
    """``runs`` (from :func:`run_grid`) pivoted: one row per ``index`` value (and backbone, when there
    are several), one column per ``columns`` value and metric, named ``<suite>:<metric>``."""
    keys = [index] + (["backbone"] if runs["backbone"].nunique() > 1 and index != "backbone" else [])
    wide = runs.pivot_table(index=keys, columns=columns, values=list(values), aggfunc="first")
    wide.columns = [f"{col}:{metric}" for metric, col in wide.columns]
    order = [f"{c}:{m}" for c in dict.fromkeys(runs[columns]) for m in values]
    return wide[[c for c in order if c in wide.columns]]


def best_per_suite(runs, rule: str = "paired", level: float = 0.05):
    """Per (suite, backbone): the best harness (highest success rate; fewer tokens breaks ties) and
    the cheapest (fewest tokens per task; higher success breaks ties), with their numbers. Where the rows have
    ``run_dir``, the best is also judged against the runner-up on their shared (task id, seed) pairs under the
    selection ``rule`` (jitlab/selection.py; default the exact McNemar test at ``level``): ``best_admitted``
    says whether the rule tells them apart, ``best_vs_runner_up`` why (None without run directories)."""
    import pandas as pd
    rows = []
    for (suite, backbone), g in runs.groupby(["suite", "backbone"], sort=False):
        ranked = g.sort_values(["success_rate", "tokens_per_task"], ascending=[False, True])
        best = ranked.iloc[0]
        cheap = g.sort_values(["tokens_per_task", "success_rate"], ascending=[True, False]).iloc[0]
        verdict = _best_verdict(ranked, rule, level)
        rows.append({"suite": suite, "backbone": backbone, "n_harnesses": len(g),
                     "best": best["harness"], "best_success": best["success_rate"],
                     "best_tokens": best["tokens_per_task"], "cheapest": cheap["harness"],
                     "cheapest_tokens": cheap["tokens_per_task"], "cheapest_success": cheap["success_rate"],
                     "runner_up": ranked.iloc[1]["harness"] if len(ranked) > 1 else None, "selection": rule,
                     "best_admitted": None if verdict is None else verdict.admitted,
                     "best_vs_runner_up": None if verdict is None else verdict.reason})
    return pd.DataFrame(rows)


def _best_verdict(ranked, rule: str, level: float):
    """The selection rule's verdict on the top row of ``ranked`` against the second (None without run_dir)."""
    if len(ranked) < 2 or "run_dir" not in ranked:
        return None
    runner_up, best = (successes(load(ranked.iloc[i]["run_dir"])["episodes"]) for i in (1, 0))
    return judge(rule, runner_up, best, level=level)


# -- JIT runs -----------------------------------------------------------------------------------
JIT_SUMMARY_COLUMNS = ["suite", "mode", "generator", "backbone", "run_dir", "n_episodes", "success_rate",
                       "tokens_per_task", "gen_tokens_per_task", "select_tokens_per_task", "repair_tokens_per_task",
                       "exec_tokens_per_task", "cost_per_task", "tool_calls_per_task", "first_try_valid_rate",
                       "repair_rounds_used", "fallback_rate", "bank_size_before", "bank_size_after",
                       "distinct_harnesses"]


def run_jit_modes(suite: str, generator: str = "compose", backbone: str = DEFAULT_BACKBONE, limit: int | None = 20,
                  n_candidates: int | None = None, out_root: str | Path = "runs/jit", modes=("static", "streaming"),
                  quiet: bool = True, concurrency: int = 1, **jit_options) -> dict:
    """Run JIT inference (jitlab.jit.inference) in each of ``modes`` on the first ``limit`` tasks of a suite.

    Writes ``out_root/<suite>/jit-<generator>-<backbone>/<mode>/`` (resumable). ``n_candidates`` is
    for static mode (default 4); streaming generates one harness per task, as in the paper.
    ``concurrency`` static tasks are solved at once (a stream runs in order). Extra
    keyword arguments go to :class:`jitlab.jit.JITConfig` (split, selector, retrieval, max_steps, ...).
    ``max_cost`` / ``max_tokens_total`` / ``max_wall_total_s`` cap the modes together (module docstring). Returns
    ``{mode: run_dir}``."""
    spend = grid_spend(output_path(out_root), *(jit_options.pop(name, None) for name in CAP_NAMES))
    root = output_path(out_root) / suite / run_slug("jit", generator, backbone)
    out = {}
    for mode in _as_list(modes):
        cfg = JITConfig(suite=suite, mode=mode, generator=generator, backbone=backbone, limit=limit,
                        n_candidates=n_candidates if mode == "static" else None, out=str(root / mode),
                        quiet=quiet, concurrency=concurrency if mode == "static" else 1, **jit_options)
        out[mode] = run_jit(cfg, spend=spend)
    return out


def jit_summaries(run_dirs):
    """One row per JIT run from its summary.json: ``JIT_SUMMARY_COLUMNS`` (tokens per phase, validity,
    repair rounds, fallbacks, bank size before/after)."""
    import pandas as pd
    rows = []
    for run_dir in (run_dirs.values() if isinstance(run_dirs, dict) else _as_list(run_dirs)):
        s = json.loads((Path(run_dir) / "summary.json").read_text())
        rows.append({**{k: s.get(k) for k in JIT_SUMMARY_COLUMNS}, "run_dir": str(run_dir)})
    return pd.DataFrame(rows, columns=JIT_SUMMARY_COLUMNS)



# -- figures written by notebooks ----------------------------------------------------------------
def notebook_command(notebook: str, params: dict) -> str:
    """The papermill command that reruns ``notebook`` with ``params`` (for figures/README.md)."""
    import shlex
    stem = Path(notebook).stem
    return (f"papermill {shlex.quote(str(notebook))} /tmp/{stem}.out.ipynb -y "
            + shlex.quote(json.dumps(params, sort_keys=True, default=str)))
