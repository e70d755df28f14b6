"""The JIT run's summary: ``jitlab.store.summarize`` plus the JIT figures (per-phase tokens, repairs, validity,
candidates rejected as repeats, fallbacks, bank size), read from each task's record (jitlab.jit.record) and
written to summary.json."""
from __future__ import annotations

import json
import os
from pathlib import Path

from jitlab.jit.record import read_jit_record
from jitlab.store import load, summarize

__all__ = ["summarize_jit"]


def summarize_jit(run_dir: str | Path) -> dict:
    """``jitlab.store.summarize`` plus the JIT figures (per phase tokens, repairs, validity, bank size);
    written to summary.json."""
    run_dir = Path(run_dir)
    summary = summarize(run_dir)
    eps = load(run_dir)["episodes"]
    done = eps[eps["final"]].sort_values("id")
    rows = []
    for _, ep in done.iterrows():
        x = read_jit_record(ep["extra"])
        rows.append({"task_id": ep["task_id"], "stream_index": x.stream_index, "status": ep["status"],
                     "success": bool(ep["success"]), "reward": float(ep["reward"] or 0.0),
                     "tokens": int(ep["tokens"]), "gen_tokens": x.gen_tokens or 0,
                     "select_tokens": x.select_tokens or 0, "repair_tokens": x.repair_tokens or 0,
                     "exec_tokens": x.exec_tokens or 0, "repair_rounds": x.repair_rounds or 0,
                     "n_candidates": x.n_candidates or 0, "valid_candidates": x.valid_candidates or 0,
                     "novelty_rejected": x.novelty_rejected or 0,
                     "repaired": x.repaired, "fallback": bool(x.fallback), "harness": ep["harness"],
                     "harness_sha": ep["harness_sha"],
                     "parsed_files": [len(c.get("parsed_files") or []) for c in x.candidates
                                      if c.get("parsed_files") is not None],
                     "bank_size_before": x.bank_size_before, "bank_size_after": x.bank_size_after})
    rows.sort(key=lambda r: (r["stream_index"] is None, r["stream_index"]))
    n = len(rows)

    def mean(key):
        return float(sum(r[key] for r in rows) / n) if n else 0.0
    cands = sum(r["n_candidates"] for r in rows)
    parsed = [p for r in rows for p in r["parsed_files"]]
    needing = [r for r in rows if r["valid_candidates"] == 0]
    config = load(run_dir)["config"].iloc[0].to_dict() if n else {}
    summary.update({
        "mode": config.get("mode"), "generator": config.get("generator"),
        "gen_tokens_per_task": mean("gen_tokens"), "select_tokens_per_task": mean("select_tokens"),
        "repair_tokens_per_task": mean("repair_tokens"), "exec_tokens_per_task": mean("exec_tokens"),
        "repair_rounds_used": int(sum(r["repair_rounds"] for r in rows)),
        "repair_rounds_per_task": mean("repair_rounds"),
        "candidates": cands, "valid_candidates": int(sum(r["valid_candidates"] for r in rows)),
        "novelty_rejected": int(sum(r["novelty_rejected"] for r in rows)),
        "first_try_valid_rate": float(sum(r["valid_candidates"] for r in rows) / cands) if cands else 0.0,
        "tasks_needing_repair": len(needing),
        "repair_success_rate": (float(sum(r["repaired"] for r in needing) / len(needing)) if needing else None),
        "fallback_rate": float(sum(r["fallback"] for r in rows) / n) if n else 0.0,
        "parse_rate": (float(sum(p == 6 for p in parsed) / len(parsed)) if parsed else None),
        "parsed_files_mean": (float(sum(parsed) / len(parsed)) if parsed else None),
        "bank_size_before": rows[0]["bank_size_before"] if rows else None,
        "bank_size_after": rows[-1]["bank_size_after"] if rows else None,
        "distinct_harnesses": len({r["harness_sha"] for r in rows}),
        "per_task": rows,
    })
    tmp = run_dir / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, default=str))
    os.replace(tmp, run_dir / "summary.json")
    return summary
