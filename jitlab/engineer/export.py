"""Compact exports of engineer loops and tables, the layout jitlab.viz.engineer (and notebook 07) reads back.

    jitlab engineer table --suite textworld ... --out runs/engineer-table
    jitlab engineer export runs/engineer-table --out results/engineer-table-textworld

SRC is a loop folder (``jitlab engineer run --out``) or a folder holding loops (a table's ``--out``, with its
``<harness>/<engineer>/`` loops). OUT gets, at each loop's path below SRC: ``candidates.jsonl`` (every proposal, its
validation and Δ), ``summary.json``, each round's ``round<r>/packet.json`` (the failure packet), each patch's
``patches/<sha>/hooks.py``; every run directory below SRC as a ``jitlab export`` at its own path (jitlab/export.py:
records without prompts, replies or observations); and a table's ``table.md``/``.csv``/``.json`` at OUT's root.
Every run's target is checked before anything is written (jitlab.export.export_runs); exporting again replaces.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from jitlab.errors import ConfigError
from jitlab.export import export_runs

__all__ = ["export_engineer", "find_loops"]

CANDIDATES = "candidates.jsonl"
LOOP_FILES = (CANDIDATES, "summary.json")
TABLE_FILES = ("table.md", "table.csv", "table.json")


def find_loops(src: str | Path) -> list[Path]:
    """The engineer loop folders at or below ``src`` (each holds a candidates.jsonl)."""
    src = Path(src)
    loops = sorted(p.parent for p in src.rglob(CANDIDATES)) if src.is_dir() else []
    if not loops:
        raise ConfigError(f"{src} holds no engineer loop (no {CANDIDATES} at or below it); pass the --out folder of "
                          "`jitlab engineer run` or `jitlab engineer table`")
    return loops


def export_engineer(src: str | Path, out: str | Path) -> dict:
    """Export the loops (and table) under ``src`` into ``out``; returns the counts written."""
    src, out = Path(src), Path(out)
    loops = find_loops(src)
    if out.resolve() == src.resolve() or src.resolve() in out.resolve().parents:
        raise ConfigError(f"--out {out} is inside the folder being exported ({src}); pass a folder outside it, "
                          "e.g. results/<name>")
    runs = export_runs([src], out)
    patches = 0
    for loop in loops:
        dest = out / loop.relative_to(src)
        files = [loop / name for name in LOOP_FILES] + sorted(loop.glob("round*/packet.json"))
        hooks = sorted(loop.glob("patches/*/hooks.py"))
        for path in [p for p in files if p.is_file()] + hooks:
            target = dest / path.relative_to(loop)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        patches += len(hooks)
    tables = [src / name for name in TABLE_FILES if (src / name).is_file()]
    for path in tables:
        shutil.copyfile(path, out / path.name)
    return {"loops": len(loops), "runs": len(runs), "patches": patches, "table": bool(tables)}
