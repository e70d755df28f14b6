"""What the dashboards show, computed from saved run records only (pandas; no Panel, no plotting).

    from jitlab.viz.dash.data import load_run, at_position, harness_points, frontier_at, harness_diff
    df = load_run("runs/tw-streaming")            # tidy, one row per finished episode, stream order
    harness_points(df, 7)                          # per harness run so far: n, score, cost, on_frontier

Caveats: a run still being written is read through SQLite's read-only mode; rows still ``running``
are not in ``df`` (``status_counts`` counts them). The bank frontier is taken from
``extra["frontier"]`` of JIT runs; for other runs it is the Pareto frontier of the harnesses run so far.
"""
from __future__ import annotations

import difflib
import json
import sqlite3
from functools import lru_cache
from pathlib import Path

from jitlab.harness import harness_sha, read_files, seed_bank_dir, seed_names
from jitlab.resolve import resolved_or_raw
from jitlab.store import DB_NAME, connect_readonly, storage_error
from jitlab.viz.figures import collect, pareto_frontier

__all__ = ["load_run", "status_counts", "at_position", "frontier_at", "harness_points", "harness_folder",
           "reference_files", "harness_diff", "is_seed", "DIFF_MAX_LINES"]

DIFF_MAX_LINES = 400


def load_run(run_dir: str | Path):
    """One run as a tidy DataFrame (jitlab.viz.figures.collect), sorted by stream position, with
    ``position`` = 0..n-1 (stream_index may skip values when a task is still running)."""
    df = collect([run_dir]).sort_values("stream_index").reset_index(drop=True)
    df["position"] = range(len(df))
    return df


def status_counts(run_dir: str | Path) -> dict:
    """Episode status -> count, read directly (cheap enough to poll)."""
    path = Path(run_dir) / DB_NAME
    try:
        db = connect_readonly(path)
        try:
            return dict(db.execute("SELECT status, COUNT(*) FROM episodes GROUP BY status").fetchall())
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:  # a damaged run: name the file and what to do
        raise storage_error(path, exc) from exc


def at_position(df, pos: int):
    """The episode row at stream position ``pos`` (clipped to the run)."""
    return df.iloc[max(0, min(int(pos), len(df) - 1))]


def frontier_at(df, pos: int) -> list[str] | None:
    """Shas on the bank's Pareto frontier after the task at ``pos`` (None when the run records none)."""
    for value in reversed(df.iloc[: pos + 1]["frontier"].tolist()):
        if isinstance(value, list):
            return value
    return None


def harness_points(df, pos: int):
    """Per harness (sha) run up to ``pos``: label, n, score, cost_per_case, on_frontier, last_position.
    ``on_frontier`` follows the recorded bank frontier, else the Pareto frontier of these points."""
    upto = df.iloc[: pos + 1]
    pts = upto.groupby("harness_sha", sort=False).agg(
        label=("episode_harness", "last"), n=("success", "size"), score=("success", "mean"),
        cost_per_case=("cost", "mean"), last_position=("position", "max")).reset_index()
    recorded = frontier_at(df, pos)
    if recorded is not None:
        pts["on_frontier"] = pts["harness_sha"].isin(recorded)
    else:
        pts["on_frontier"] = pts.index.isin(pareto_frontier(pts).index) if len(pts) else []
    pts["sha8"] = pts["harness_sha"].str[:8]
    return pts


def is_seed(folder: Path) -> bool:
    return Path(folder).resolve().parent == seed_bank_dir().resolve()


@lru_cache(maxsize=64)
def _seed_shas() -> dict[str, Path]:
    out = {}
    for name in seed_names():
        try:
            out[harness_sha(read_files(seed_bank_dir() / name))] = seed_bank_dir() / name
        except Exception:  # a broken seed folder is not a reference candidate
            continue
    return out


def harness_folder(run_dir: str | Path, row) -> Path | None:
    """The folder of the harness that ran this episode: ``run_dir/<extra.harness_dir>``, else the
    run's saved copy under ``harnesses/<sha>``, else the seed folder with that sha or name."""
    run_dir = Path(run_dir)
    for rel in (row.get("harness_dir"), f"harnesses/{row.get('harness_sha')}"):
        if isinstance(rel, str) and rel and (run_dir / rel).is_dir():
            return run_dir / rel
    seeds = _seed_shas()
    if row.get("harness_sha") in seeds:
        return seeds[row["harness_sha"]]
    name = str(row.get("episode_harness") or row.get("harness") or "")
    return seed_bank_dir() / name if name and (seed_bank_dir() / name).is_dir() else None


def reference_files(run_dir: str | Path, sha) -> tuple[str, dict[str, str]] | None:
    """(where, {file: text}) of a bank harness by sha: the run's ``harnesses/<sha>`` copy, a seed with
    that sha, or the run's ``bank.sqlite`` (read-only). None when none of them has it."""
    if not isinstance(sha, str) or not sha:
        return None
    saved = Path(run_dir) / "harnesses" / sha
    if saved.is_dir():
        return str(saved), _read_folder(saved)
    seed = _seed_shas().get(sha)
    if seed is not None:
        return str(seed), _read_folder(seed)
    bank = Path(run_dir) / "bank.sqlite"
    if bank.exists():
        db = connect_readonly(bank)
        try:
            row = db.execute("SELECT files FROM harnesses WHERE sha=?", (sha,)).fetchone()
        except sqlite3.DatabaseError:
            row = None
        finally:
            db.close()
        if row:
            return f"{bank} (bank entry)", json.loads(row[0])
    return None


def _read_folder(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(errors="replace") for p in sorted(Path(folder).iterdir()) if p.is_file()}


def harness_diff(harness: Path | dict, reference: Path | dict, max_lines: int = DIFF_MAX_LINES) -> str:
    """Unified diff of every file, reference -> harness (folders or {file: text}; '' when identical).
    Both sides are compared as resolved source (library code they use written out, jitlab.resolve), so a
    thin subclass and its reference differ in code, not in import lines."""
    new = resolved_or_raw(harness if isinstance(harness, dict) else _read_folder(harness))
    old = resolved_or_raw(reference if isinstance(reference, dict) else _read_folder(reference))
    lines: list[str] = []
    for name in sorted(set(new) | set(old)):
        a = old.get(name, "").splitlines(keepends=True)
        b = new.get(name, "").splitlines(keepends=True)
        lines += difflib.unified_diff(a, b, f"reference/{name}", f"harness/{name}")
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more diff lines)\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
