"""Compact exports of run directories: records small enough to commit, that outlive the machine that ran them.

    jitlab export runs/tw-static runs/tw-streaming --out results/tw-jit/
    jitlab figures --runs results/tw-jit/ --out figures/          # the same figures as from the run dirs

or ``export_runs(["runs/grid"], "results/grid")``. ``runs/`` is ignored by git; ``results/<name>/`` is where the
export of every run behind a published table or figure is committed (docs/records.md, "Exports").

Each run becomes ``OUT/<run>/`` (``<run>`` is the run directory's path below the folder given, or its name):

    summary.json   the run's summary.json (JIT runs: with the per-phase figures and ``per_task``), plus any key the
                   current ``summarize`` adds that it lacks (e.g. the 95% intervals of a run made before them)
    card.json      the harness card (jitlab/card.py): harness, modules, backbone, budgets, suite, tasks, commit
    run.json       format, source directory, export time, the run's config and meta (fingerprint, created)
    episodes.csv   every episode row, all attempts, every column of the ``episodes`` table (``extra`` as JSON)
    steps.csv      per step: episode_id, step, tool, args, reward, done, tokens, compliance (jitlab/compliance.py;
                   no thoughts, observations, traces)
    calls.csv      per episode x phase x kind x backbone x cached: ``n_calls`` and the sums of the numeric
                   columns (tokens, cost, latency, ...); no prompts or replies

``jitlab.store.load`` reads such a folder as it reads a run directory (episodes exactly as stored; ``calls`` are
the aggregates and ``steps`` the compact columns), so ``jitlab figures``, ``experiments.open_run`` and the
tables work on either. CSV keeps the files diffable: ``\\N`` marks SQL NULL (an empty field is an empty string)
and floats are written to round-trip exactly.

Caveats: what the export leaves out (prompts, replies, observations, the harness folders and bank of a JIT
run) is not recoverable from it; keep the run directory where a trajectory or a harness must be replayed.
An export is a copy: exporting again to the same folder replaces it, but only an export (a folder of the files
above, its ``run.json`` naming the export format): a ``OUT/<run>`` that is anything else, that is a run being
exported or holds one (``jitlab export runs/demo --out runs``) is refused before anything is written. The new
export is written beside the target in a fresh temporary folder and swapped in whole; a failed write (a full disk)
removes it and leaves the old export as it was. The summary's keys that ``summarize`` computes come from the
records: a ``summary.json`` that says otherwise (edited by hand, or written by an older jitlab) is named in a
warning and not copied.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from pathlib import Path

from jitlab.card import CARD_NAME, compute_card
from jitlab.errors import ConfigError, StorageError
from jitlab.store import DB_NAME, EXPORT_FORMAT, EXPORT_MARKER, NULL, load, make_dir, summarize

__all__ = ["EXPORT_FILES", "STEP_COLUMNS", "check_target", "export_run", "export_runs", "find_runs"]

STEP_COLUMNS = ["episode_id", "step", "tool", "args", "reward", "done", "tokens", "compliance"]
_TABLES = ("episodes", "steps", "calls")
EXPORT_FILES = frozenset({"summary.json", CARD_NAME, EXPORT_MARKER, *(f"{t}.csv" for t in _TABLES)})
_CALL_KEYS = ["episode_id", "phase", "kind", "backbone", "cached"]


def find_runs(paths) -> list[tuple[Path, str]]:
    """(run directory, its name in the export) for each run directory named by ``paths``: a run directory itself
    (named by its folder name) or a folder holding runs beneath it (named by their path below it)."""
    found = []
    for p in [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]:
        if (p / DB_NAME).is_file():
            found.append((p, p.resolve().name))
        elif p.is_dir() and (subs := sorted(db.parent for db in p.rglob(DB_NAME))):
            found += [(s, str(s.relative_to(p))) for s in subs]
        else:
            raise ConfigError(f"{p} is neither a run directory (no {DB_NAME}) nor a folder of run directories; "
                              "pass the --out folder of a `jitlab run` / `jitlab jit`, or the folder holding several")
    names = [name for _, name in found]
    if len(set(names)) < len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ConfigError(f"two runs would be exported as {', '.join(dup)}; pass the folder holding them instead, "
                          "so each is named by its path below it")
    return found


def _write_csv(df, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    df.to_csv(tmp, index=False, na_rep=NULL, lineterminator="\n")
    os.replace(tmp, path)


def _call_aggregates(calls):
    """Per-call records folded to one row per episode x phase x kind x backbone x cached: n_calls and the
    sum of every other numeric column (new numeric columns of the calls table are summed too; NULL where every
    call of the group is NULL)."""
    import pandas as pd
    keys = [k for k in _CALL_KEYS if k in calls.columns]
    numeric = [c for c in calls.columns if c not in keys and c != "t" and pd.api.types.is_numeric_dtype(calls[c])]
    if calls.empty:
        return pd.DataFrame(columns=keys + ["n_calls"] + numeric)
    grouped = calls.groupby(keys, dropna=False, sort=True)
    # min_count=1: a group with nothing recorded (e.g. reused_tokens of score calls counted in words) stays NULL
    out = grouped[numeric].sum(min_count=1).reset_index() if numeric else grouped.size().reset_index()[keys]
    out.insert(len(keys), "n_calls", grouped.size().values)
    return out


def _replaceable(folder: Path) -> bool:
    """Whether replacing ``folder`` loses nothing: a real, empty folder, or an export this module wrote (a folder of
    EXPORT_FILES only, with a run.json naming the export format)."""
    if folder.is_symlink() or not folder.is_dir():
        return False
    entries = list(folder.iterdir())
    if not entries:
        return True
    if not all(e.name in EXPORT_FILES and e.is_file() and not e.is_symlink() for e in entries):
        return False
    try:
        info = json.loads((folder / EXPORT_MARKER).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and str(info.get("format", "")).startswith("jitlab-export/")


def check_target(target: Path, runs) -> None:
    """ConfigError unless ``target`` may receive an export: it is not one of ``runs`` (run directories) nor a
    folder holding one, and it is absent or an export this module wrote (so replacing it loses nothing)."""
    dest = target.resolve()
    for run in runs:
        source = Path(run).resolve()
        if dest == source or dest in source.parents:
            what = "is the run directory" if dest == source else "holds the run directory"
            raise ConfigError(f"cannot export {run} to {target}: it {what} itself ({source}), which the export would "
                              "replace; pass an --out folder outside it, e.g. results/<name>")
    if (target.exists() or target.is_symlink()) and not _replaceable(target):
        raise ConfigError(f"cannot export to {target}: it exists and is not an export jitlab wrote (only "
                          f"{', '.join(sorted(EXPORT_FILES))}); move it away or pass another --out")


def _summary(run_dir: Path) -> dict:
    """The run's summary for its export: every key ``summarize`` computes from the records, plus the keys of its
    summary.json that it does not compute (a JIT run's per-phase figures); a summary.json that disagrees with the
    records is named in a warning."""
    current = json.loads(json.dumps(summarize(run_dir, write=False), default=str))
    path = run_dir / "summary.json"
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):  # missing, empty or damaged: recomputed from the records, as show and resume do
        stored = {}
    if not isinstance(stored, dict):
        warnings.warn(f"{path} is not a JSON mapping; the export's summary.json is recomputed from the records",
                      stacklevel=3)
        stored = {}

    def same(key):
        return json.dumps(stored[key], sort_keys=True) == json.dumps(current[key], sort_keys=True)
    differ = sorted(k for k in stored.keys() & current.keys() if not same(k))
    if differ:
        shown = "; ".join(f"{k} {stored[k]!r} vs {current[k]!r}" for k in differ[:3] if not isinstance(current[k], dict))
        warnings.warn(f"{path} disagrees with the run's records on {', '.join(differ)}"
                      f"{f' ({shown})' if shown else ''}; edited, or written by an older jitlab: the export holds the "
                      "values recomputed from the records", stacklevel=3)
    return {**stored, **current}


def export_run(run_dir: str | Path, out: str | Path) -> Path:
    """Write the compact export of one run directory into folder ``out``: refused (ConfigError, nothing written)
    when ``out`` is or holds the run, or exists and is not an export (:func:`check_target`); an export there is
    replaced only once the new one is complete."""
    run_dir, out = Path(run_dir), Path(out)
    check_target(out, [run_dir])
    frames = load(run_dir)
    summary = _summary(run_dir)
    tables = {"episodes": frames["episodes"].drop(columns=["final", "tokens"]),
              "steps": frames["steps"][[c for c in STEP_COLUMNS if c in frames["steps"].columns]],
              "calls": _call_aggregates(frames["calls"])}
    make_dir(out.parent, "--out")
    tmp = out.with_name(f".{out.name}.{os.getpid()}-{time.time_ns()}.export-tmp")  # this call's own: none to clear
    try:
        tmp.mkdir()
        for name, frame in tables.items():
            _write_csv(frame, tmp / f"{name}.csv")
        dtypes = {name: {c: str(t) for c, t in frame.dtypes.items()} for name, frame in tables.items()}
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        (tmp / CARD_NAME).write_text(json.dumps(compute_card(frames), indent=2, default=str) + "\n")
        (tmp / EXPORT_MARKER).write_text(json.dumps({
            "format": EXPORT_FORMAT, "source": str(run_dir.resolve()), "exported": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "config": frames["config"].iloc[0].to_dict() if len(frames["config"]) else {}, "meta": frames["meta"],
            "dtypes": dtypes}, indent=2, default=str) + "\n")
        _swap_in(tmp, out)
    except OSError as exc:   # a full disk, a folder made read-only: nothing half-written is left
        raise StorageError(f"cannot write the export {out} ({exc.strerror or exc}); nothing half-written is left: "
                           "free space (or make the folder writable), then rerun the same command") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _swap_in(new: Path, out: Path) -> None:
    """Put the complete folder ``new`` at ``out``; an old export there is moved aside first and removed after (put
    back if the swap fails)."""
    old = None
    if out.exists():
        old = new.with_name(new.name + ".old")
        os.replace(out, old)
    try:
        os.replace(new, out)
    except OSError:
        if old is not None:
            os.replace(old, out)
        raise
    if old is not None:
        shutil.rmtree(old)


def export_runs(paths, out: str | Path) -> list[Path]:
    """Export every run directory named by ``paths`` (see :func:`find_runs`) into ``out/<run>/``; every target is
    checked (:func:`check_target`) before anything is written."""
    runs = find_runs(paths)
    out = Path(out)
    for _, name in runs:
        check_target(out / name, [run_dir for run_dir, _ in runs])
    out = make_dir(out, "--out")
    return [export_run(run_dir, out / name) for run_dir, name in runs]
