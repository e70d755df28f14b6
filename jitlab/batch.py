"""papermill batches: run one notebook once per parameter combination, in parallel, resumably.

    jitlab batch notebooks/05_static_vs_streaming.ipynb --grid params.yaml --out runs/batch05 --parallel 2

``params.yaml`` is either a grid (mapping parameter -> list of values; the cartesian product is run;
a scalar is a one-value list) or an explicit list of parameter dicts, or both::

    grid: {suite: [toy, textworld], smoke: [true]}     # or the mapping at top level
    runs:                                               # extra combinations, run as given
      - {suite: babyai, smoke: true}

Each combination gets an id (``<index>-<hash of its params>``) and writes ``OUT/<id>.ipynb``;
``OUT/manifest.json`` lists for each: params, status (ok | failed), the failing cell's error,
duration and output path. A failing cell fails that run only. Rerunning the same command skips runs
whose status is ok and whose notebook exists; failed ones run again. A batch that is stopped (SIGTERM,
Ctrl-C, a ``timeout`` around it) marks its unfinished runs failed before it exits.

One batch per ``OUT``: a batch holds ``OUT/batch.lock`` (the run directories' single-writer lock,
jitlab.store.WriterLock) while it runs; a second batch on the same ``OUT`` is refused, naming the holder's
PID. Its worker processes die with it (``PR_SET_PDEATHSIG``, Linux) and their kernels with them (ipykernel
exits within a second of losing its parent), so a ``kill -9`` of the batch leaves nothing executing: the
rerun runs the unfinished notebooks once.

Progress: the bar counts finished runs and shows the real backbone spend recorded under ``OUT`` since the
batch started (every run of its notebooks, read every few seconds while they run).

Parameters are checked against the notebook's ``parameters`` cell (papermill's ``inspect_notebook``)
before anything runs: a name the notebook does not define is an error, not a run with its defaults.

Outputs: each run's kernel gets ``JITLAB_OUT_ROOT=OUT/<id>``, so the relative output paths of the
notebooks (``out``, ``out_root``, ``figures_out``, resolved by ``jitlab.experiments.output_path``) land
under the batch's ``OUT``, never in the source checkout; absolute paths are kept as given.

Spend: ``max_cost`` / ``max_tokens_total`` cap the real backbone spend of the whole batch, recorded
in every run under ``OUT`` (``JITLAB_SPEND_ROOT=OUT``). No new combination starts once it is reached, and
each notebook gets the caps as parameters (it must define ``max_cost`` / ``max_tokens_total``), so its
grids stop too. Caveat: notebooks running at once see each other's spend when their grids start, so a
batch may overrun the cap by what its other parallel notebooks spend meanwhile. The caps are not part of
a combination's id: rerunning with a higher cap resumes. The wall cap ``max_wall_total_s`` stays with the batch:
once this invocation has run that long (checked every few seconds), it stops as on SIGTERM (below); a plain rerun
resumes.

Ray: ``--executor ray`` runs each combination as a Ray task (jitlab/cluster.py), ``--parallel`` at once: on the
Ray this process connects to, ``$RAY_ADDRESS`` (e.g. ``ray://head:10001``) when set, else a local one. The
kernels run on the workers' nodes, so ``OUT`` and the notebook must be on storage every node sees.

Caveats: runs execute in separate processes (papermill starts one kernel each), default
``min(2, cpus)`` at once. The kernel's working directory is the notebook's folder (``--cwd
notebook``, as in JupyterLab) or a fresh ``OUT/<id>/`` per run (``--cwd run``) for notebooks that
write relative paths and would otherwise collide.
"""
from __future__ import annotations

import itertools
import json
import os
import signal
import sqlite3
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jitlab.cluster import check_executor, ray_map
from jitlab.errors import ConfigError, JitlabError
from jitlab.fields import WORKERS_MAX, check_fields
from jitlab.plumbing import json_digest
from jitlab.progress import Progress
from jitlab.run_options import SpendCaps, adjust
from jitlab.runtime import RunSpend, resume_hint
from jitlab.store import DB_NAME, recorded_spend, sole_writer

__all__ = ["BatchConfig", "load_grid", "combinations", "run_batch", "export_html", "MANIFEST"]

MANIFEST = "manifest.json"
LOCK = "batch.lock"
SPEND_POLL_S = 3.0   # how often the bar rereads the spend recorded under OUT while notebooks run


@dataclass
@adjust(help={"max_wall_total_s": "cap on the wall seconds of this invocation of the whole batch, counted from its "
              "start: no notebook starts after it and the ones running are stopped (marked failed); rerun to resume"})
class BatchConfig(SpendCaps):
    notebook: str = field(default="", metadata={"help": "notebook to execute (.ipynb with a 'parameters' cell)"})
    grid: str = field(default="", metadata={"help": "YAML file: parameter -> list of values, and/or runs: [dicts]"})
    out: str = field(default="", metadata={"help": "output folder: executed notebooks + manifest.json"})
    parallel: int | None = field(default=None, metadata={"help": "runs at once (default min(2, cpus))", "min": 1, **WORKERS_MAX})
    kernel: str | None = field(default=None, metadata={"help": "Jupyter kernel name (default: the notebook's)"})
    cwd: str = field(default="notebook", metadata={"help": "kernel working dir: 'notebook' (its folder) or 'run' (OUT/<id>/)",
                                                     "choices": ("notebook", "run")})
    timeout_s: int | None = field(default=None, metadata={"help": "per-cell timeout in seconds (default none)",
                                                          "min": 1})
    rerun_ok: bool = field(default=False, metadata={"help": "run again even the combinations that finished ok"})
    executor: str = field(default="local", metadata={"help": "'local' (worker processes here) or 'ray' (one Ray "
                                                            "task per run, --parallel at once; RAY_ADDRESS picks the "
                                                            "cluster)", "choices": ("local", "ray")})
    html: str | None = field(default=None, metadata={"help": "also write each ok run's executed notebook as HTML "
                                                             "into this folder (<notebook>.html for a one-run grid, "
                                                             "else <notebook>-<id>.html)", "metavar": "DIR"})

    def __post_init__(self):
        check_fields(self)

    def notebook_caps(self) -> dict:
        """The spend caps that are set, as notebook parameters (the wall cap is the batch's own)."""
        return {k: v for k, v in (("max_cost", self.max_cost), ("max_tokens_total", self.max_tokens_total))
                if v is not None}


def load_grid(path: str | Path) -> list[dict]:
    """Parameter combinations from a grid YAML (see the module docstring), in a stable order."""
    import yaml
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"grid file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:  # one line: where the YAML breaks
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"grid file {path} is not valid YAML{where} ({getattr(exc, 'problem', None) or exc}); "
                          "fix it (see `jitlab batch --help` for its shape)") from exc
    if isinstance(data, list):
        data = {"runs": data}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping (param: [values]) and/or 'runs: [ {{...}}, ... ]'")
    explicit = data.pop("runs", []) or []
    grid = data.pop("grid", None)
    if grid is not None and data:
        raise ConfigError(f"{path}: put every parameter under 'grid:' or none of them (found both: {sorted(data)})")
    grid = grid if grid is not None else data
    if not isinstance(explicit, list) or not all(isinstance(r, dict) for r in explicit):
        raise ConfigError(f"{path}: 'runs' must be a list of mappings (parameter: value)")
    combos = combinations(grid) if grid else []
    combos += [dict(r) for r in explicit]
    if not combos:
        raise ConfigError(f"{path} defines no parameter combination")
    return combos


def combinations(grid: dict) -> list[dict]:
    """Cartesian product of a mapping parameter -> values (a scalar counts as one value)."""
    if not isinstance(grid, dict):
        raise ConfigError(f"a grid is a mapping parameter -> list of values, got {type(grid).__name__}")
    keys = list(grid)
    values = [v if isinstance(v, list) else [v] for v in grid.values()]
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def _run_id(index: int, params: dict) -> str:
    digest = json_digest(params)[:8]
    return f"{index:03d}-{digest}"


def check_parameters(notebook: str | Path, combos: list[dict], extra: dict | None = None) -> None:
    """ConfigError unless every parameter of every combination (and ``extra``) is defined in the notebook's
    ``parameters`` cell. papermill itself only warns and runs the notebook with its defaults."""
    import papermill as pm
    from papermill.exceptions import PapermillException
    try:
        known = set(pm.inspect_notebook(str(notebook)))
    except (OSError, ValueError, PapermillException) as exc:  # nbformat's NotJSONError is a ValueError
        raise ConfigError(f"notebook {notebook} cannot be read: {type(exc).__name__}: {exc}") from exc
    for index, params in enumerate(combos):
        unknown = sorted(set(params) - known)
        if unknown:
            raise ConfigError(f"combination {index} {json.dumps(params, default=str)}: parameter(s) {', '.join(unknown)} "
                              f"not in the parameters cell of {notebook} (it defines: {', '.join(sorted(known)) or 'none'})")
    missing = sorted(set(extra or {}) - known)
    if missing:
        raise ConfigError(f"{notebook} defines no {', '.join(missing)} parameter, so its spend cannot be capped; "
                          "add it to the notebook's parameters cell or run without the cap")


# Jupyter picks a kernel's five TCP ports before the kernel binds them, so two workers starting kernels at once can
# pick the same port; the loser never answers ("Kernel didn't respond in 60 seconds", ZMQError "Address already in
# use" on its stderr) before any cell has run. Such a start is tried again, with fresh ports, up to this many times.
KERNEL_START_TRIES = 3
_NO_KERNEL = "Kernel didn't respond"


def _execute(notebook: str, output: str, params: dict, kernel: str | None, cwd: str, timeout_s: int | None,
             env: dict | None = None) -> dict:
    """Run one combination (in a worker process). Never raises: returns status, error, duration.
    ``env`` is set in this worker's environment, which the kernel inherits."""
    import papermill as pm
    os.environ.update(env or {})
    started = time.time()
    status, error = "ok", ""
    try:
        for attempt in range(KERNEL_START_TRIES):
            try:
                pm.execute_notebook(notebook, output, parameters=params, kernel_name=kernel, cwd=cwd,
                                    progress_bar=False, log_output=False, execution_timeout=timeout_s)
                break
            except RuntimeError as exc:  # no cell ran: the kernel never answered (see KERNEL_START_TRIES)
                if not str(exc).startswith(_NO_KERNEL) or attempt == KERNEL_START_TRIES - 1:
                    raise
    except pm.PapermillExecutionError as exc:
        status = "failed"
        error = f"{exc.ename}: {exc.evalue} (cell {exc.exec_count})"
    except Exception as exc:  # a kernel that dies or a bad notebook fails this run, not the batch
        status = "failed"
        error = f"{type(exc).__name__}: {exc}"
    return {"status": status, "error": error, "duration_s": round(time.time() - started, 3),
            "started": started, "finished": time.time()}


def _write_manifest(path: Path, manifest: dict) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, default=str))
    os.replace(tmp, path)


def _spent(out: Path, cfg: BatchConfig) -> str:
    """Why no new combination may start ('' while under the caps): the spend recorded under ``out``."""
    if not cfg.notebook_caps():
        return ""
    from jitlab.experiments import grid_spend
    return grid_spend(out, cfg.max_cost, cfg.max_tokens_total).reached()


class _Stopped(JitlabError):
    """SIGTERM reached the batch (e.g. ``timeout`` around it), or its wall cap did; ``why`` (which) goes into the
    error of each run it leaves unfinished."""

    def __init__(self, message: str, why: str):
        super().__init__(message)
        self.why = why


def _on_sigterm(signum, frame):
    raise _Stopped(f"batch stopped by signal {signum}; its unfinished runs are marked failed in {MANIFEST}; "
                   "rerun the same command to run them", why=f"signal {signum}")


def _check_wall(wall: RunSpend) -> None:
    """Raise _Stopped once the batch's wall cap is reached."""
    reason = wall.reached()
    if reason:
        raise _Stopped(f"batch {reason}; its unfinished runs are marked failed in {MANIFEST}. {resume_hint(reason)}",
                       why=reason)


def _stopped(todo: list[dict], exc: BaseException) -> None:
    """Mark the runs of ``todo`` that had not finished when ``exc`` (_Stopped, KeyboardInterrupt) stopped the batch."""
    why = exc.why if isinstance(exc, _Stopped) else "Ctrl-C"
    for run in todo:
        if run["status"] in ("running", "pending"):
            run.update(status="failed", error=f"batch stopped ({why}) before this run finished; rerun the same "
                                              "command to run it again")


def run_batch(cfg: BatchConfig, combos: list[dict] | None = None, echo=print) -> dict:
    """Execute ``cfg.notebook`` once per combination (from ``cfg.grid`` unless ``combos`` is given);
    returns the manifest (also written to ``OUT/manifest.json`` after every finished run)."""
    check_fields(cfg)
    wall = RunSpend(max_wall_total_s=cfg.max_wall_total_s)   # this invocation's clock
    notebook = Path(cfg.notebook)
    if not notebook.is_file():
        raise ConfigError(f"notebook {notebook} does not exist")
    if cfg.cwd not in ("notebook", "run"):
        raise ConfigError(f"cwd must be 'notebook' or 'run', got {cfg.cwd!r}")
    check_executor(cfg.executor)
    combos = combos if combos is not None else load_grid(cfg.grid)
    check_parameters(notebook, combos, cfg.notebook_caps())   # before anything is written or run
    out = Path(cfg.out or f"batches/{notebook.stem}")
    with sole_writer(out, f"batch output folder {out}", LOCK):   # one batch per OUT, as one run per run dir
        return _run_locked(cfg, notebook, combos, out, echo, wall)


def _run_locked(cfg: BatchConfig, notebook: Path, combos: list[dict], out: Path, echo, wall: RunSpend) -> dict:
    """:func:`run_batch` once it holds ``OUT``'s lock."""
    manifest_path = out / MANIFEST
    old = {}
    if manifest_path.exists():
        old = _earlier_runs(manifest_path)
        left = [rid for rid, r in old.items() if r.get("status") in ("running", "pending")]
        if left:
            echo(f"jitlab batch: {len(left)} run(s) left unfinished by an earlier batch that was killed; they run again")
    runs, todo = [], []
    for index, params in enumerate(combos):
        rid = _run_id(index, params)
        output = out / f"{rid}.ipynb"
        prev = old.get(rid)
        if prev and prev.get("status") == "ok" and output.exists() and not cfg.rerun_ok:
            runs.append({**prev, "skipped": True})
            continue
        runs.append({"id": rid, "params": params, "status": "pending", "error": "", "duration_s": None,
                     "output": str(output), "skipped": False})
        todo.append(runs[-1])
    manifest = {"notebook": str(notebook), "grid": cfg.grid, "config": asdict(cfg), "runs": runs}
    _write_manifest(manifest_path, manifest)
    parallel = cfg.parallel or min(2, os.cpu_count() or 1)
    echo(f"jitlab batch: {notebook.name}: {len(combos)} combinations, {len(combos) - len(todo)} already ok, "
         f"{len(todo)} to run, {parallel} at a time -> {out}")
    if todo:
        run_all = _run_all_ray if cfg.executor == "ray" else _run_all
        run_all(cfg, notebook, out, todo, parallel, manifest, manifest_path, echo, wall)
    ok = sum(r["status"] == "ok" for r in runs)
    manifest["summary"] = {"total": len(runs), "ok": ok, "failed": sum(r["status"] == "failed" for r in runs),
                           "skipped": sum(bool(r.get("skipped")) for r in runs)}
    if cfg.html:
        for run in runs:
            if run["status"] == "ok":
                name = notebook.stem if len(runs) == 1 else f"{notebook.stem}-{run['id']}"
                run["html"] = str(export_html(run["output"], Path(cfg.html) / f"{name}.html"))
    _write_manifest(manifest_path, manifest)
    return manifest


def _earlier_runs(path: Path) -> dict[str, dict]:
    """The runs an earlier batch recorded in its manifest, by id; ConfigError (one line) when the file is damaged, so
    that no finished run is taken for unrun and its output overwritten."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        data, why = None, f"{type(exc).__name__}: {exc}"
    else:
        why = "not a mapping with a list of runs, each with an id"
    runs = data.get("runs", []) if isinstance(data, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and isinstance(r.get("id"), str) for r in runs):
        raise ConfigError(f"{path} is damaged ({why}); it records which runs of this batch finished: restore it, or "
                          "move it away to run every combination again (their outputs there are then replaced)")
    return {r["id"]: r for r in runs}


def export_html(notebook: str | Path, path: str | Path) -> Path:
    """``notebook`` (executed) as a standalone HTML page with its outputs, at ``path``. Interactive bokeh outputs
    keep working in a browser, offline too: the notebook's outputs hold BokehJS and Panel inline. Outputs with no
    data at all (HoloViews leaves one beside each plot it displays) are dropped: they draw nothing, and nbconvert
    warns about each ("not able to be represented")."""
    import nbformat
    from nbconvert import HTMLExporter
    nb = nbformat.read(str(notebook), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.get("outputs", []) if o.get("output_type") != "display_data" or o.get("data")]
    body, _ = HTMLExporter().from_notebook_node(nb)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(body, encoding="utf-8")
    os.replace(tmp, path)
    return path


def _execute_args(cfg: BatchConfig, notebook: Path, out: Path, run: dict) -> tuple:
    """The arguments of :func:`_execute` for ``run`` (its kernel's working folder made)."""
    cwd = str(notebook.resolve().parent)
    if cfg.cwd == "run":
        cwd = str((out / run["id"]).resolve())
        Path(cwd).mkdir(parents=True, exist_ok=True)
    return (str(notebook), run["output"], {**run["params"], **cfg.notebook_caps()}, cfg.kernel, cwd, cfg.timeout_s,
            {**_kernel_env(cfg, out), "JITLAB_OUT_ROOT": str((out / run["id"]).resolve())})


def _kernel_env(cfg: BatchConfig, out: Path) -> dict:
    """Environment of every run's kernel: the batch's spend root. Plots keep BokehJS and Panel inline
    (jitlab.viz.notebook.setup), also with ``html``: the HTML copies then draw offline (about 3.5 MB more each)."""
    return {"JITLAB_SPEND_ROOT": str(out.resolve())}


def _die_with_parent(parent: int) -> None:
    """Pool worker initializer: Linux SIGKILLs this worker when the batch process ``parent`` dies
    (``PR_SET_PDEATHSIG``); a worker whose batch died before that took effect exits at once."""
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


class _Spend:
    """The real backbone spend recorded under ``out`` (jitlab.store.recorded_spend of every run database there),
    fed to ``bar`` as it grows; what was there when the batch started is not counted."""

    def __init__(self, out: Path, bar: Progress):
        self.out, self.bar = out, bar
        self.shown = self._read()

    def _read(self) -> tuple[float, int]:
        cost, tokens = 0.0, 0
        for db in sorted(self.out.rglob(DB_NAME)):
            try:
                c, t = recorded_spend(db.parent)
            except (JitlabError, OSError, sqlite3.Error):   # a database being created or moved aside: next time
                continue
            cost, tokens = cost + c, tokens + t
        return cost, tokens

    def refresh(self) -> None:
        cost, tokens = self._read()
        self.bar.absorb(tokens=tokens - self.shown[1], cost=cost - self.shown[0])
        self.shown = (cost, tokens)


def _finished(run: dict, result: dict, manifest: dict, manifest_path: Path, echo) -> None:
    run.update(result)
    _write_manifest(manifest_path, manifest)
    echo(f"  {run['id']} {run['status']:<6} {run['duration_s']:.1f}s {json.dumps(run['params'], default=str)}"
         + (f"\n    {run['error']}" if run["error"] else ""))


def _run_all_ray(cfg: BatchConfig, notebook: Path, out: Path, todo: list[dict], parallel: int, manifest: dict,
                 manifest_path: Path, echo, wall: RunSpend) -> None:
    """``todo`` as Ray tasks (jitlab/cluster.py), ``parallel`` at once; each starts only while the batch is under
    its spend caps. The kernel runs on the worker's node, so ``OUT`` must be on storage both sides see. A run
    whose worker dies is marked failed; on SIGTERM / Ctrl-C the unfinished runs are marked failed (Ray stops the
    tasks of a driver that exits), and at the wall cap too (its tasks still running are cancelled). Rerun the batch
    to run them again."""

    def before_start(i):
        reason = _spent(out, cfg)
        if reason:
            echo(f"  {todo[i]['id']} not started: {reason}")
            return {"status": "failed", "error": f"not started: batch {reason}; rerun with a higher cap to resume"}
        todo[i]["status"] = "running"
        _write_manifest(manifest_path, manifest)
        return None

    def failed(exc) -> dict:
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}", "duration_s": 0.0}

    args = [_execute_args(cfg, notebook, out, run) for run in todo]
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    try:
        results = ray_map(_execute, args, parallel, labels=[f"batch run {r['id']}" for r in todo],
                          on_result=lambda i, res: _finished(todo[i], res, manifest, manifest_path, echo),
                          before_start=before_start, poll=lambda: _check_wall(wall))
    except (_Stopped, KeyboardInterrupt) as exc:
        _stopped(todo, exc)
        _write_manifest(manifest_path, manifest)
        raise
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    for run, res in zip(todo, results):
        if isinstance(res, BaseException):
            _finished(run, failed(res), manifest, manifest_path, echo)
        elif run["status"] in ("running", "pending"):   # not started at the cap
            run.update(res)
    _write_manifest(manifest_path, manifest)


def _run_all(cfg: BatchConfig, notebook: Path, out: Path, todo: list[dict], parallel: int, manifest: dict,
             manifest_path: Path, echo, wall: RunSpend) -> None:
    """Run ``todo`` at most ``parallel`` at a time, starting each only while the batch is under its spend
    caps; on SIGTERM / Ctrl-C or at the wall cap the unfinished runs are marked failed and the workers stopped."""
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")   # no fork of a threaded parent (pool, zmq)
    env = _kernel_env(cfg, out)
    queue, futures = list(todo), {}
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    pool = ProcessPoolExecutor(max_workers=parallel, mp_context=ctx, initializer=_die_with_parent,
                               initargs=(os.getpid(),))
    bar = Progress(len(todo), f"batch {notebook.name}", unit="run")   # ok so far = runs that finished without error
    spend = _Spend(out, bar)
    try:
        while queue or futures:
            _check_wall(wall)
            while queue and len(futures) < parallel:
                run = queue.pop(0)
                reason = _spent(out, cfg)
                if reason:
                    run.update(status="failed", error=f"not started: batch {reason}; rerun with a higher cap to resume")
                    echo(f"  {run['id']} not started: {reason}")
                    continue
                cwd = str(notebook.resolve().parent)
                if cfg.cwd == "run":
                    cwd = str((out / run["id"]).resolve())
                    Path(cwd).mkdir(parents=True, exist_ok=True)
                run["status"] = "running"
                futures[pool.submit(_execute, str(notebook), run["output"], {**run["params"], **cfg.notebook_caps()},
                                    cfg.kernel, cwd, cfg.timeout_s,
                                    {**env, "JITLAB_OUT_ROOT": str((out / run["id"]).resolve())})] = run
            _write_manifest(manifest_path, manifest)
            if not futures:
                continue
            done, _ = wait(futures, timeout=SPEND_POLL_S, return_when=FIRST_COMPLETED)
            spend.refresh()
            for fut in done:
                run = futures.pop(fut)
                run.update(fut.result())
                bar.update(success=run["status"] == "ok")
                _write_manifest(manifest_path, manifest)
                echo(f"  {run['id']} {run['status']:<6} {run['duration_s']:.1f}s {json.dumps(run['params'], default=str)}"
                     + (f"\n    {run['error']}" if run["error"] else ""))
    except (_Stopped, KeyboardInterrupt) as exc:
        _stopped(todo, exc)
        _write_manifest(manifest_path, manifest)
        for proc in list((getattr(pool, "_processes", None) or {}).values()):  # no public way to stop busy workers
            proc.terminate()
        # wait for the pool's manager thread to see its dead workers and close its pipe; left running, it races
        # the interpreter's exit hook that writes to that pipe (OSError: Bad file descriptor at exit, CPython 3.11)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        bar.close()
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    pool.shutdown()
