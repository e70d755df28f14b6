"""Tables for the harness engineer (notebook 07): an engineer loop's candidates, Δ per engineer, training curves.

    from jitlab.viz import engineer as E
    E.candidates("runs/eng")                        # one row per proposed patch: validity, Δ, McNemar p, tokens
    E.best_candidate(E.candidates("runs/eng"))      # the valid patch with the highest Δ (first proposed on ties)
    E.engineer_deltas({"untrained": "runs/eng-0", "trained": "runs/eng-1"})   # Δ per engineer, side by side
    E.training_curves("runs/train/eng-sft")         # TensorBoard scalars TRL wrote, long format
    E.episode_of(R.open_run(run_dir), "toy-dev-0")  # the final episode id of a task, for R.trajectory
    E.packet(loop); E.candidate_run(loop, best)     # a loop's failure packet, a candidate's run (loop or its export)
    E.table_loops("results/engineer-table-textworld", "react")   # {engineer spec: loop folder} of an engineer table
    E.table_cells("results/engineer-table-textworld")            # the table with k/n (Wilson 95%) per split

Everything is read from saved records (candidates.jsonl, summary.json, TensorBoard event files); nothing runs here.
"""
from __future__ import annotations

import json
from pathlib import Path

from jitlab.compare import compare_runs
from jitlab.errors import ConfigError
from jitlab.store import DB_NAME, EXPORT_MARKER
from jitlab.viz.tables import rate_cell

__all__ = ["best_candidate", "candidate_run", "candidates", "engineer_deltas", "episode_of", "packet",
           "table_cells", "table_loops", "training_curves"]


def packet(loop: str | Path) -> dict:
    """The failure packet of an engineer loop's first round: ``round0/packet.json`` in a loop folder and in its
    ``jitlab engineer export``, ``packet.json`` in exports made by hand before that command (``results/engineer-table-
    textworld/<harness>/<engineer>/``)."""
    loop = Path(loop)
    for path in (loop / "round0" / "packet.json", loop / "packet.json"):
        if path.is_file():
            return json.loads(path.read_text())
    raise ConfigError(f"{loop}: no round0/packet.json or packet.json (not an engineer loop folder or its export)")


def candidate_run(loop: str | Path, c) -> Path:
    """A measured candidate's run directory, looked up below ``loop`` (``round<r>/<name>``: a loop that moved, or its
    export), else the path it was recorded with."""
    here = Path(loop) / f"round{c['round']}" / Path(c["run_dir"]).name
    return here if (here / DB_NAME).is_file() or (here / EXPORT_MARKER).is_file() else Path(c["run_dir"])


def table_loops(root: str | Path, harness: str) -> dict:
    """``{engineer spec: loop folder}`` of one harness in an engineer table's folder (``jitlab engineer table``'s
    ``--out`` or its export), in the table's engineer order (each loop's summary.json names its engineer)."""
    root = Path(root)
    order = json.loads((root / "table.json").read_text())["config"]["engineers"].split(",")
    found = {json.loads((d / "summary.json").read_text())["config"]["engineer"]: d
             for d in sorted((root / harness).iterdir()) if (d / "summary.json").is_file()}
    return {spec: found[spec] for spec in order if spec in found}


def table_cells(root: str | Path):
    """An engineer table (``table.json``) with each success as ``rate (k/n; lo–hi)`` (Wilson 95%) on the batch,
    the disjoint dev batch and the test tasks (n from the table's config), beside Δ and tokens per task."""
    import pandas as pd
    table = json.loads((Path(root) / "table.json").read_text())
    n = {"batch": table["config"]["batch"], "disjoint": table["config"]["batch"], "test": table["config"]["test"]}
    rows = []
    for r in table["rows"]:
        row = {"harness": r["harness"], "engineer": r["engineer"], "kept": r.get("kept")}
        for split, size in n.items():
            rate = r.get(f"success_{split}")
            row[f"success_{split}"] = None if rate is None else rate_cell(round(rate * size), size)
            row[f"delta_{split}"] = r.get(f"delta_{split}")
        rows.append({**row, **{f"tokens_{split}": r.get(f"tokens_{split}") for split in n}})
    return pd.DataFrame(rows)


def _paired(loop: Path, c: dict) -> dict:
    """Wins, losses and the exact McNemar p of a measured candidate against its round's base run (jitlab.compare);
    None where the candidate was not run or its runs are not here (the run_dir is looked up below ``loop``)."""
    none = {"wins": None, "losses": None, "mcnemar_p": None}
    if not c.get("run_dir"):
        return none
    here = loop / f"round{c['round']}"
    patched, base = here / Path(c["run_dir"]).name, here / "base"
    if not all((d / DB_NAME).is_file() or (d / EXPORT_MARKER).is_file() for d in (patched, base)):
        return none
    row = compare_runs([base, patched])[0].iloc[0]
    return {"wins": int(row["wins"]), "losses": int(row["losses"]), "mcnemar_p": float(row["mcnemar_p"])}


def candidates(loop: str | Path):
    """One row per candidate of an engineer loop (``candidates.jsonl``), in proposal order; a measured candidate's
    wins, losses and exact McNemar p against the round's base run on the same tasks and seed."""
    import pandas as pd
    rows = []
    for line in (Path(loop) / "candidates.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        c = json.loads(line)
        v = c["validation"]
        rows.append({"round": c["round"], "index": c["index"], "engineer": c["engineer"], "name": c["name"],
                     "sha": c["sha"][:12], "valid": bool(v["ok"]), "diagnostic": (v.get("diagnostic") or {}).get("kind"),
                     "delta": c.get("delta"), "base_success": c.get("base"), "patched_success": c.get("patched"),
                     "tokens_per_task": c.get("tokens_per_task"), "patch": c["patch"], "run_dir": c.get("run_dir"),
                     **_paired(Path(loop), c)})
    return pd.DataFrame(rows)


def best_candidate(cands, min_delta: float | None = None):
    """The best valid candidate of :func:`candidates`: the highest Δ, the first proposed on ties (the engineer loop's
    order; the loop keeps it only when Δ >= 0, ``min_delta=0``); None when there is none."""
    valid = cands[cands["valid"]]
    if min_delta is not None:
        valid = valid[valid["delta"] >= min_delta]
    return valid.sort_values(["delta", "index"], ascending=[False, True]).iloc[0] if len(valid) else None


def engineer_deltas(loops: dict):
    """Δ per engineer: candidates, valid share, best and mean Δ over valid patches, kept Δ (summary.json)."""
    import pandas as pd
    rows = []
    for label, loop in loops.items():
        df = candidates(loop)
        summary = json.loads((Path(loop) / "summary.json").read_text())
        valid = df[df["valid"]]
        rows.append({"engineer": label, "spec": summary["config"]["engineer"], "candidates": len(df),
                     "valid_rate": valid.shape[0] / len(df) if len(df) else 0.0,
                     "best_delta": valid["delta"].max() if len(valid) else None,
                     "mean_delta": valid["delta"].mean() if len(valid) else None,
                     "kept_delta": summary["delta_batch"], "base_success": summary["base_success"]})
    return pd.DataFrame(rows)


def training_curves(run: str | Path):
    """Every scalar TRL logged to TensorBoard under ``run`` (``<phase>/runs/*/events.out.tfevents.*``), long format:
    phase, tag, step, value."""
    import pandas as pd
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    rows = []
    for events in sorted(Path(run).glob("*/runs/**/events.out.tfevents.*")):
        phase = events.relative_to(run).parts[0]
        acc = EventAccumulator(str(events))
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            rows += [{"phase": phase, "tag": tag, "step": e.step, "value": e.value} for e in acc.Scalars(tag)]
    return pd.DataFrame(rows, columns=["phase", "tag", "step", "value"])


def episode_of(rec: dict, task_id: str) -> int:
    """The final episode id of ``task_id`` in an opened run (jitlab.viz.runs.open_run)."""
    eps = rec["episodes"]
    match = eps[(eps["task_id"] == task_id) & eps["final"]]
    if match.empty:
        raise ConfigError(f"task {task_id} has no finished episode in {rec['run_dir']}; pick one of "
                          f"{', '.join(sorted(set(eps['task_id'])))}")
    return int(match["id"].iloc[0])

