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
whose status is ok and whose notebook exists; failed ones run again.

Caveats: runs execute in separate processes (papermill starts one kernel each), default
``min(2, cpus)`` at once. The kernel's working directory is the notebook's folder (``--cwd
notebook``, as in JupyterLab) or a fresh ``OUT/<id>/`` per run (``--cwd run``) for notebooks that
write relative paths and would otherwise collide.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jitlab.errors import ConfigError

__all__ = ["BatchConfig", "load_grid", "combinations", "run_batch", "MANIFEST"]

MANIFEST = "manifest.json"


@dataclass
class BatchConfig:
    notebook: str = field(default="", metadata={"help": "notebook to execute (.ipynb with a 'parameters' cell)"})
    grid: str = field(default="", metadata={"help": "YAML file: parameter -> list of values, and/or runs: [dicts]"})
    out: str = field(default="", metadata={"help": "output folder: executed notebooks + manifest.json"})
    parallel: int | None = field(default=None, metadata={"help": "runs at once (default min(2, cpus))"})
    kernel: str | None = field(default=None, metadata={"help": "Jupyter kernel name (default: the notebook's)"})
    cwd: str = field(default="notebook", metadata={"help": "kernel working dir: 'notebook' (its folder) or 'run' (OUT/<id>/)"})
    timeout_s: int | None = field(default=None, metadata={"help": "per-cell timeout in seconds (default none)"})
    rerun_ok: bool = field(default=False, metadata={"help": "run again even the combinations that finished ok"})


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
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return f"{index:03d}-{digest}"


def _execute(notebook: str, output: str, params: dict, kernel: str | None, cwd: str, timeout_s: int | None) -> dict:
    """Run one combination (in a worker process). Never raises: returns status, error, duration."""
    import papermill as pm
    started = time.time()
    status, error = "ok", ""
    try:
        pm.execute_notebook(notebook, output, parameters=params, kernel_name=kernel, cwd=cwd,
                            progress_bar=False, log_output=False, execution_timeout=timeout_s)
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


def run_batch(cfg: BatchConfig, combos: list[dict] | None = None, echo=print) -> dict:
    """Execute ``cfg.notebook`` once per combination (from ``cfg.grid`` unless ``combos`` is given);
    returns the manifest (also written to ``OUT/manifest.json`` after every finished run)."""
    notebook = Path(cfg.notebook)
    if not notebook.is_file():
        raise ConfigError(f"notebook {notebook} does not exist")
    if cfg.cwd not in ("notebook", "run"):
        raise ConfigError(f"cwd must be 'notebook' or 'run', got {cfg.cwd!r}")
    combos = combos if combos is not None else load_grid(cfg.grid)
    out = Path(cfg.out or f"batches/{notebook.stem}")
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / MANIFEST
    old = {}
    if manifest_path.exists():
        old = {r["id"]: r for r in json.loads(manifest_path.read_text()).get("runs", [])}
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
        import multiprocessing
        ctx = multiprocessing.get_context("spawn")   # no fork of a threaded parent (pool, zmq)
        with ProcessPoolExecutor(max_workers=max(1, parallel), mp_context=ctx) as pool:
            futures = {}
            for run in todo:
                cwd = str(notebook.resolve().parent)
                if cfg.cwd == "run":
                    cwd = str((out / run["id"]).resolve())
                    Path(cwd).mkdir(parents=True, exist_ok=True)
                run["status"] = "running"
                futures[pool.submit(_execute, str(notebook), run["output"], run["params"], cfg.kernel, cwd,
                                    cfg.timeout_s)] = run
            _write_manifest(manifest_path, manifest)
            for fut in as_completed(futures):
                run = futures[fut]
                run.update(fut.result())
                _write_manifest(manifest_path, manifest)
                echo(f"  {run['id']} {run['status']:<6} {run['duration_s']:.1f}s {json.dumps(run['params'], default=str)}"
                     + (f"\n    {run['error']}" if run["error"] else ""))
    ok = sum(r["status"] == "ok" for r in runs)
    manifest["summary"] = {"total": len(runs), "ok": ok, "failed": sum(r["status"] == "failed" for r in runs),
                           "skipped": sum(bool(r.get("skipped")) for r in runs)}
    _write_manifest(manifest_path, manifest)
    return manifest
