"""Experiment helpers the notebooks call: grids of fixed-harness runs, and reading one run back.

    from jitlab.viz import experiments as X
    runs = X.run_grid(["textworld", "babyai", "dbbench"], X.seed_harnesses(), ["embedded"],
                      limit=2, out_root="runs/seed_bank")      # one run directory per combination
    X.grid_table(runs)                                         # harness x suite: success, tokens
    X.best_per_suite(runs)                                     # best and cheapest harness per suite

    rec = X.open_run("runs/quickstart")                        # episodes, steps, calls, config
    X.trajectory(rec, episode_id)                              # the steps of one episode
    X.backbone_calls(rec, episode_id)                          # every backbone call of it
    X.diagnostics(rec)                                         # status, error and diagnostic per episode
    X.harness_anatomies(rec)                                   # anatomy of each harness that ran
    X.jit_tasks(rec); X.harness_diff(rec, episode_id)          # JIT runs: per-task record, diff vs reference
    tasks, mech = X.mechanism_usage("runs/jit")                # case-study mechanisms chosen, success when chosen

    X.run_jit_modes("textworld", "compose", "embedded", limit=20)   # static + streaming JIT runs
    X.save_figure(fig, "figures", stem, title, command)        # PNG/PDF/HTML + figures/README.md entry

Each grid cell is an ordinary ``jitlab run`` (jitlab.runner), so rerunning resumes and the run
directories feed ``jitlab figures`` and the dashboards. Relative output paths (``out_root``,
``figures_out``) are taken from :func:`output_path`: ``$JITLAB_OUT_ROOT`` when set (``jitlab batch`` sets
it to each run's folder under its ``--out``), else the repository root, so a notebook writes to the same
place whether its kernel starts in the repo or in ``notebooks/``.

Spend: ``max_cost`` / ``max_tokens_total`` given to :func:`run_grid` or :func:`run_jit_modes` cap the
*total* real backbone spend recorded under ``$JITLAB_SPEND_ROOT`` (set by ``jitlab batch`` to its
``--out``) or else under ``out_root``, all cells together; when it is reached no new episode starts and
SpendCapReached is raised (rerun with a higher cap to resume).

Ray: ``run_grid(..., executor="ray")`` runs each cell as a Ray task (jitlab/cluster.py). It uses the Ray
this process is connected to, so ``ray.init(address="ray://head:10001")`` first points a grid at an existing
cluster (or set ``RAY_ADDRESS``); without either it starts a local Ray. A worker that dies fails its cell only;
rerunning the grid resumes that cell like any interrupted run.

Caveats: grid runs execute one after another unless ``workers`` > 1 or ``executor="ray"``. A cell that cannot
start (unknown suite, harness or backbone) raises; with ``workers`` > 1 or Ray it is logged when it fails,
the other cells finish, and then its error is raised. Anatomy of a harness that is not
a seed imports its code in this process, so :func:`harness_anatomies` skips those unless
``trust_code=True``.
"""
from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from jitlab.jit.record import read_jit_record
from jitlab.progress import group
from jitlab.viz.tables import markdown_table

__all__ = ["JIT_SUMMARY_COLUMNS", "JIT_TASK_COLUMNS", "MECHANISM_COLUMNS", "MECHANISM_TASK_COLUMNS", "OUT_ROOT_ENV",
           "REPEAT_COLUMNS", "SPEND_ROOT_ENV", "SUMMARY_COLUMNS", "backbone_calls", "best_per_suite", "diagnostics", "grid_spend",
           "grid_table", "harness_anatomies", "harness_diff", "jit_summaries", "jit_tasks", "mechanism_usage",
           "notebook_command", "open_run", "output_path", "register_figure", "repo_path", "run_grid", "run_jit_modes",
           "run_slug", "save_figure", "seed_harnesses", "trajectory"]

OUT_ROOT_ENV = "JITLAB_OUT_ROOT"      # relative output paths resolve here (jitlab batch: OUT/<run id>)
SPEND_ROOT_ENV = "JITLAB_SPEND_ROOT"  # a grid's spend cap counts every run recorded here (jitlab batch: OUT)

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
    import yaml

    from jitlab.harness import seed_bank_dir, seed_names
    names = []
    for name in seed_names():
        desc = yaml.safe_load((seed_bank_dir() / name / "description.yaml").read_text()) or {}
        if baselines or not desc.get("baseline"):
            names.append(name)
    return names


def repo_path(path: str | Path) -> Path:
    """``path`` if absolute, else the same path under the repository root."""
    from jitlab.paths import repo_root
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


def grid_spend(root: str | Path, max_cost: float | None = None, max_tokens_total: int | None = None):
    """A RunSpend shared by several runs, seeded with the real spend of every run recorded under
    ``$JITLAB_SPEND_ROOT`` (when set) or else ``root``; None when no cap is given."""
    import os

    from jitlab.fields import check_number
    from jitlab.runtime import RunSpend
    from jitlab.store import DB_NAME, recorded_spend
    if max_cost is None and max_tokens_total is None:
        return None
    check_number("max_cost", max_cost, "float", optional=True, min=0)
    check_number("max_tokens_total", max_tokens_total, optional=True, min=0)
    base = Path(os.environ.get(SPEND_ROOT_ENV) or root)
    cost = tokens = 0
    for db in sorted(base.rglob(DB_NAME)) if base.is_dir() else []:
        c, t = recorded_spend(db.parent)
        cost, tokens = cost + c, tokens + t
    return RunSpend(max_cost, max_tokens_total, cost, tokens)


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
    ``max_cost`` / ``max_tokens_total``, which cap the whole grid (module docstring; with Ray each cell checks
    the cap against the spend recorded when it starts and its own). Returns one row per run:
    ``SUMMARY_COLUMNS`` (from each run's summary.json), and ``REPEAT_COLUMNS`` with ``repeat`` > 1."""
    import pandas as pd

    from jitlab.cluster import check_executor
    from jitlab.fields import check_number
    check_number("workers", workers, min=1)
    check_executor(executor)
    suites, harnesses, backbones = (_as_list(x) for x in (suites, harnesses, backbones))
    root = output_path(out_root)
    caps = (run_options.pop("max_cost", None), run_options.pop("max_tokens_total", None))
    spend = grid_spend(root, *caps)
    combos = [(s, h, b) for s in suites for b in backbones for h in harnesses]
    with group(len(combos), f"grid ({len(combos)} cells)", quiet=quiet, unit="cell", run_dir=root) as total:
        if executor == "ray":
            from jitlab.cluster import ray_map
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


def _grid_cell(root, suite, harness, backbone, limit, split, quiet, run_options, caps=(None, None), spend=None) -> dict:
    """One grid cell: run (or resume) it, return its summary row. Module-level so a Ray task can run it; there
    ``caps`` (max_cost, max_tokens_total) make the cell's own grid spend (a RunSpend cannot cross processes)."""
    from jitlab.runner import RunConfig, run
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
    from jitlab.selection import judge
    from jitlab.store import load

    def successes(run_dir):
        eps = load(run_dir)["episodes"]
        return {(str(r.task_id), int(r.seed)): bool(r.success) for r in eps[eps["final"]].itertuples()}
    return judge(rule, successes(ranked.iloc[1]["run_dir"]), successes(ranked.iloc[0]["run_dir"]), level=level)


# -- JIT runs -----------------------------------------------------------------------------------
JIT_SUMMARY_COLUMNS = ["suite", "mode", "generator", "backbone", "run_dir", "n_episodes", "success_rate",
                       "tokens_per_task", "gen_tokens_per_task", "select_tokens_per_task", "repair_tokens_per_task",
                       "exec_tokens_per_task", "cost_per_task", "tool_calls_per_task", "first_try_valid_rate",
                       "repair_rounds_used", "fallback_rate", "bank_size_before", "bank_size_after",
                       "distinct_harnesses"]


def run_jit_modes(suite: str, generator: str = "compose", backbone: str = "embedded", limit: int | None = 20,
                  n_candidates: int | None = None, out_root: str | Path = "runs/jit", modes=("static", "streaming"),
                  quiet: bool = True, concurrency: int = 1, **jit_options) -> dict:
    """Run JIT inference (jitlab.jit.inference) in each of ``modes`` on the first ``limit`` tasks of a suite.

    Writes ``out_root/<suite>/jit-<generator>-<backbone>/<mode>/`` (resumable). ``n_candidates`` is
    for static mode (default 4); streaming generates one harness per task, as in the paper.
    ``concurrency`` static tasks are solved at once (a stream runs in order). Extra
    keyword arguments go to :class:`jitlab.jit.JITConfig` (split, selector, retrieval, max_steps, ...).
    ``max_cost`` / ``max_tokens_total`` cap the modes together (module docstring). Returns ``{mode: run_dir}``."""
    from jitlab.jit.inference import JITConfig, run_jit
    spend = grid_spend(output_path(out_root), jit_options.pop("max_cost", None), jit_options.pop("max_tokens_total", None))
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


# -- reading one run -----------------------------------------------------------------------------
def open_run(run_dir: str | Path) -> dict:
    """:func:`jitlab.store.load` plus ``run_dir``, ``summary`` (summary.json, recomputed if missing)
    and ``finished`` (final episodes, ``extra`` read into a column ``jit_record`` of
    :class:`jitlab.jit.record.JITTaskRecord`)."""
    from jitlab.store import load, summarize
    run_dir = Path(run_dir)
    rec = load(run_dir)
    path = run_dir / "summary.json"
    rec["summary"] = json.loads(path.read_text()) if path.exists() else summarize(run_dir)
    rec["run_dir"] = run_dir
    eps = rec["episodes"]
    rec["finished"] = eps[eps["final"]].assign(jit_record=[read_jit_record(x) for x in eps[eps["final"]]["extra"]])
    return rec


def _json(text, default):
    if not isinstance(text, str) or not text:
        return default
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return default


def trajectory(rec: dict, episode_id: int | None = None):
    """The steps of one episode (default: the first finished one): step, tool, args, thought,
    observation, reward, done, tokens, and from the trace the directive and exposed capabilities. An export
    (results/) keeps no thoughts, observations or traces: those columns are empty."""
    episode_id = _episode(rec, episode_id)
    steps = rec["steps"][rec["steps"]["episode_id"] == episode_id].sort_values("step").copy()
    for col in ("thought", "observation", "trace"):
        if col not in steps:
            steps[col] = None
    traces = [_json(t, {}) for t in steps["trace"]]
    steps["directive"] = [t.get("directive") for t in traces]
    steps["capabilities"] = [t.get("capabilities") for t in traces]
    steps["args"] = [_json(a, a) for a in steps["args"]]
    cols = ["step", "tool", "args", "thought", "observation", "reward", "done", "tokens", "directive", "capabilities"]
    return steps[cols].reset_index(drop=True)


def backbone_calls(rec: dict, episode_id: int | None = None, full: bool = False):
    """Backbone calls of one episode (default: the first finished one); ``episode_id=-1`` for all.
    Without ``full`` the messages are reduced to their count and the reply to its first 200 chars."""
    calls = rec["calls"]
    if episode_id != -1:
        calls = calls[calls["episode_id"] == _episode(rec, episode_id)]
    calls = calls.copy()
    if not full and "messages" in calls:   # an export (results/) has per-call aggregates, no messages or replies
        calls["n_messages"] = [len(_json(m, [])) for m in calls["messages"]]
        calls["text"] = calls["text"].fillna("").str.slice(0, 200)
        calls = calls.drop(columns=["messages"])
    return calls.reset_index(drop=True)


def _episode(rec: dict, episode_id: int | None) -> int:
    from jitlab.errors import ConfigError
    finished = rec["finished"]
    if episode_id is None:
        if finished.empty:
            raise ConfigError(f"{rec['run_dir']} has no finished episode yet; pass an episode id from rec['episodes']")
        return int(finished["id"].iloc[0])
    if episode_id not in set(rec["episodes"]["id"]):
        raise ConfigError(f"episode {episode_id} is not in {rec['run_dir']}; ids: {sorted(rec['episodes']['id'])}")
    return int(episode_id)


def diagnostics(rec: dict, only_problems: bool = False):
    """One row per attempt: id, task_id, attempt, status, error, and the diagnostic's kind, file and
    message (parsed from JSON). ``only_problems``: attempts whose status is not ``ok``."""
    eps = rec["episodes"].copy()
    if only_problems:
        eps = eps[eps["status"] != "ok"]
    diag = [_json(d, {}) for d in eps["diagnostic"]]
    for key in ("kind", "file", "message"):
        eps[f"diag_{key}"] = [d.get(key) if isinstance(d, dict) else None for d in diag]
    return eps[["id", "task_id", "attempt", "status", "success", "steps", "error", "diag_kind", "diag_file",
                "diag_message", "isolation"]].reset_index(drop=True)


JIT_TASK_COLUMNS = ["id", "task_id", "stream_index", "status", "success", "harness_name", "harness_generator",
                    "gen_tokens", "select_tokens", "repair_tokens", "exec_tokens", "repair_rounds", "valid_candidates",
                    "n_candidates", "fallback", "reference_names", "bank_size_before", "bank_size_after"]


def jit_tasks(rec: dict):
    """For a JIT run, one row per finished task from ``extra`` (docs/records.md): the harness chosen, tokens
    per phase, repair rounds, candidate validity, fallback, references and bank size. Empty for other runs."""
    import pandas as pd
    rows = [{"id": r["id"], "task_id": r["task_id"], "status": r["status"], "success": r["success"],
             **{k: getattr(r["jit_record"], k) for k in JIT_TASK_COLUMNS[5:] + ["stream_index"]}}
            for r in rec["finished"].to_dict("records") if r["jit_record"].mode]
    return pd.DataFrame(rows, columns=JIT_TASK_COLUMNS).sort_values("stream_index").reset_index(drop=True)


def harness_diff(rec: dict, episode_id: int | None = None) -> str:
    """Unified diff of the harness an episode ran against its nearest bank reference (JIT runs record
    ``extra.nearest_reference``); '' when there is none or the files are identical."""
    from jitlab.viz.dash.data import harness_diff as _diff
    from jitlab.viz.dash.data import harness_folder, reference_files
    episode_id = _episode(rec, episode_id)
    row = rec["episodes"].set_index("id").loc[episode_id].to_dict()
    extra = read_jit_record(row.get("extra"))
    folder = harness_folder(rec["run_dir"], {**row, "harness_dir": extra.harness_dir,
                                             "episode_harness": row.get("harness")})
    reference = reference_files(rec["run_dir"], extra.nearest_reference)
    return _diff(folder, reference[1]) if folder is not None and reference is not None else ""


def harness_anatomies(rec: dict, trust_code: bool = False) -> dict:
    """``{label: Anatomy or reason}`` for each distinct harness that ran (by sha). Seed harnesses are
    analysed from seed_bank/; a generated harness (the run's ``harnesses/<sha>`` copy) only with
    ``trust_code`` (it imports the code here), else the value is a string saying why it was skipped."""
    from jitlab.viz.anatomy import anatomy
    from jitlab.viz.dash.data import harness_folder, is_seed
    out: dict = {}
    finished = rec["finished"]
    for sha, g in finished.groupby("harness_sha", sort=False):
        row = g.iloc[0].to_dict()
        record = row.pop("jit_record", None)
        if record is not None and record.harness_dir is not None:
            row["harness_dir"] = record.harness_dir
        row["episode_harness"] = row.get("harness")
        label = f"{row.get('harness')} ({str(sha)[:8]})"
        folder = harness_folder(rec["run_dir"], row)
        if folder is None:
            out[label] = "no harness files found for this sha (oracle or a run without saved harnesses)"
        elif not (trust_code or is_seed(folder)):
            out[label] = f"{folder}: generated code; pass trust_code=True to import and analyse it"
        else:
            out[label] = anatomy(folder)
    return out


MECHANISM_TASK_COLUMNS = ["id", "task_id", "stream_index", "harness_sha", "harness_name", "M", "P", "F", "A",
                          "mechanisms", "case_studies", "modules_from", "success", "reward", "n_candidates",
                          "candidates_read"]
MECHANISM_COLUMNS = ["mechanism", "role", "case_studies", "tasks_chosen", "success_chosen", "reward_chosen",
                     "tasks_not_chosen", "success_not_chosen", "reward_not_chosen", "candidates_with", "candidates_read"]


def _harness_modules(run_dir: Path, sha, candidate: bool = False) -> tuple[dict | None, str]:
    """({role: module:Class}, where from) of a harness by sha from the files the run kept: a candidate's
    ``candidates/<sha16>/`` copy, ``harnesses/<sha>``, a seed, the run's bank; (None, "missing") otherwise."""
    from jitlab.errors import HarnessError
    from jitlab.harness import read_files
    from jitlab.jit.generate.library import modules_of
    from jitlab.viz.dash.data import reference_files
    if not isinstance(sha, str) or not sha:
        return None, "missing"
    if candidate:
        try:
            return modules_of(read_files(run_dir / "candidates" / sha[:16])), "files"
        except HarnessError:  # not written (a parse error) or gone: the harness copies below may still have it
            pass
    found = reference_files(run_dir, sha)
    return (modules_of(found[1]), "files") if found else (None, "missing")


def mechanism_usage(run):
    """Which case-study mechanisms (the options of ``jitlab.modules.case_studies``) the harnesses of a run used,
    and how their tasks went. ``run``: a run directory, an export (``results/...``) or :func:`open_run`'s record.
    Returns two DataFrames:

    - ``tasks`` (``MECHANISM_TASK_COLUMNS``), one row per finished task: the harness that ran (sha, name), the
      library class each role derives from (``M``/``P``/``F``/``A``, class names), the case-study ``mechanisms``
      among them and their ``case_studies``, ``success``/``reward``, and for JIT tasks the candidates generated
      (``n_candidates``) and how many of them had readable modules (``candidates_read``);
    - ``mechanisms`` (``MECHANISM_COLUMNS``), one row per mechanism: tasks whose harness used it, success rate and
      mean reward on those and on the other tasks, and the candidates (chosen or not) that contained it.

    Where the classes come from (``modules_from``): the JIT record's ``modules`` (written since issue 15, so kept
    by exports too), else the files the run kept (``harnesses/<sha>``, ``candidates/<sha16>/``, a seed, the
    run's bank), else ``missing``: an export of a run recorded before ``modules`` existed keeps no harness
    files, so only seeds are found there. Tasks whose modules are missing count on neither side, and candidates
    whose modules are missing are not in ``candidates_read``. A class is read from the code (the role class's
    library base, :func:`jitlab.jit.generate.library.library_class`), so it is what ran, whatever generated it."""
    import pandas as pd

    from jitlab.jit.generate.library import ROLES, case_study_mechanisms, option
    rec = run if isinstance(run, dict) else open_run(run)
    run_dir = Path(rec["run_dir"])
    mechanisms = case_study_mechanisms()
    short = lambda path: path.split(":")[-1] if path else None  # noqa: E731
    rows, cand_rows = [], []
    for r in rec["finished"].sort_values("id").to_dict("records"):
        x = r["jit_record"]
        modules, source = (x.modules, "record") if x.modules else _harness_modules(run_dir, r["harness_sha"])
        read = 0
        for c in x.candidates:
            mods = c.get("modules") or _harness_modules(run_dir, c.get("sha"), candidate=True)[0]
            if mods:
                read += 1
                cand_rows.append(set(mods.values()))
        used = [p for p in (modules or {}).values() if p in mechanisms]
        rows.append({"id": r["id"], "task_id": r["task_id"], "stream_index": x.stream_index,
                     "harness_sha": r["harness_sha"], "harness_name": x.harness_name or r["harness"],
                     **{role: short((modules or {}).get(role)) for role in ROLES},
                     "mechanisms": [short(p) for p in used],
                     "case_studies": sorted({n.split("/")[-1] for p in used for n in mechanisms[p]}),
                     "modules_from": source, "success": bool(r["success"]), "reward": float(r["reward"] or 0.0),
                     "n_candidates": x.n_candidates, "candidates_read": read if x.candidates else None,
                     "_paths": set((modules or {}).values()) if modules else None})
    tasks = pd.DataFrame(rows, columns=MECHANISM_TASK_COLUMNS + ["_paths"])
    if len(tasks) and tasks["stream_index"].notna().any():
        tasks = tasks.sort_values("stream_index", kind="stable")
    known = tasks[tasks["_paths"].notna()]
    out = []
    for path, studies in mechanisms.items():
        chosen = known["_paths"].map(lambda paths, p=path: p in paths).astype(bool)
        yes, no = known[chosen], known[~chosen]
        out.append({"mechanism": short(path), "role": option(path).role,
                    "case_studies": ", ".join(n.split("/")[-1] for n in studies),
                    # the mean of no rows is NaN: a side with no task
                    "tasks_chosen": len(yes), "success_chosen": yes["success"].mean(),
                    "reward_chosen": yes["reward"].mean(), "tasks_not_chosen": len(no),
                    "success_not_chosen": no["success"].mean(), "reward_not_chosen": no["reward"].mean(),
                    "candidates_with": sum(path in c for c in cand_rows), "candidates_read": len(cand_rows)})
    summary = pd.DataFrame(out, columns=MECHANISM_COLUMNS)
    summary = summary.sort_values(["tasks_chosen", "candidates_with"], ascending=False, kind="stable")
    return tasks.drop(columns="_paths").reset_index(drop=True), summary.reset_index(drop=True)


# -- figures written by notebooks ----------------------------------------------------------------
def notebook_command(notebook: str, params: dict) -> str:
    """The papermill command that reruns ``notebook`` with ``params`` (for figures/README.md)."""
    import shlex
    stem = Path(notebook).stem
    return (f"papermill {shlex.quote(str(notebook))} /tmp/{stem}.out.ipynb -y "
            + shlex.quote(json.dumps(params, sort_keys=True, default=str)))


def register_figure(fig_dir: str | Path, stem: str, files, title: str, command: str, caption: str = "",
                    numbers=None, **more) -> Path:
    """List ``files`` (paths inside ``fig_dir``, or a folder of them) under ``stem`` in
    ``fig_dir/figures.json`` and ``fig_dir/README.md`` (:func:`jitlab.viz.figures.register`). ``numbers``
    (a DataFrame or markdown text) is printed under the figure; ``more`` is stored in the entry (e.g.
    ``final_accuracy`` rows, which README's closing note tabulates)."""
    import datetime as dt

    from jitlab.viz.figures import register
    fig_dir = Path(fig_dir)
    root = fig_dir.resolve()
    names = []
    for f in _as_list(files):
        f = Path(f).resolve() if Path(f).is_absolute() else root / f
        names += sorted(str(p.relative_to(root)) for p in f.glob("*") if p.is_file()) if f.is_dir() \
            else [str(f.relative_to(root))]
    if numbers is not None and not isinstance(numbers, str):
        numbers = markdown_table(numbers)
    entry = {"stem": stem, "files": names, "title": title, "caption": caption, "command": command,
             "numbers": numbers, "generated": dt.datetime.now().isoformat(timespec="seconds"), **more}
    return register(fig_dir, [entry])


def save_figure(fig, fig_dir: str | Path, stem: str, title: str, command: str, caption: str = "", numbers=None,
                formats=("png", "pdf", "html"), **more) -> list[Path]:
    """Save a jitlab.viz.figures figure as ``fig_dir/stem.{png,pdf,html}`` and list it in README.md
    (:func:`register_figure`). Returns the written paths (the PNG first when written)."""
    from jitlab.viz.figures import save
    paths = save(fig, Path(fig_dir) / stem, formats)
    register_figure(fig_dir, stem, [p.resolve() for p in paths], title, command, caption, numbers, **more)
    return paths


