"""Issue 13's closing table on the toy suite with scripted TEST DOUBLES (pick-hash plays, pick-first "writes" patches):
the interventions engineer's candidates, and a table whose cells are the runs' own records, resumed on a rerun."""
import json
import sys
from dataclasses import fields
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "sandbox"))
from sandbox_helpers import requires_bwrap  # noqa: E402

from jitlab.cli import main  # noqa: E402
from jitlab.compare import compare_runs  # noqa: E402
from jitlab.engineer.loop import EngineerConfig, run_batch  # noqa: E402
from jitlab.engineer.packets import build_packet  # noqa: E402
from jitlab.engineer.patches import check_patch  # noqa: E402
from jitlab.engineer.proposer import make_engineer  # noqa: E402
from jitlab.engineer.rules import rule_fields, rule_patch  # noqa: E402
from jitlab.engineer.table import TableConfig, run_table  # noqa: E402
from jitlab.envs.toy import ToySuite  # noqa: E402
from jitlab.errors import ConfigError  # noqa: E402
from jitlab.modules.hooks import InterventionHooks  # noqa: E402
from jitlab.stats import wilson  # noqa: E402
from jitlab.store import load  # noqa: E402

HOOK_FIELDS = {f.name for f in fields(InterventionHooks)}


def _record(run_dir) -> tuple[float, float, int]:
    """(success rate, tokens per task, finished episodes) straight from a run's episode rows."""
    eps = load(run_dir)["episodes"]
    done = eps[eps["final"]]
    return float(done["success"].mean()), float((done["prompt_tokens"] + done["completion_tokens"]).mean()), len(done)


def test_interventions_engineer_mines_distinct_patches_from_the_batch_run(tmp_path):
    cfg = EngineerConfig(suite="toy", backbone="scripted:pick-hash", out=str(tmp_path))
    base = run_batch(cfg, "react", ToySuite().tasks("dev")[:6], tmp_path / "base")["run_dir"]
    packet = build_packet(base)
    engineer = make_engineer("interventions")
    proposals = engineer.propose(packet, 4, "", run_dir=base)
    texts = [p.text for p in proposals]
    assert len(texts) == len(set(texts)) >= 2 and all(check_patch(t) is None for t in texts)
    mined = [rule_fields(t, names=HOOK_FIELDS) for t in texts]
    # pick-hash repeats an action in ~1 step of 5: re-ranking is mined below 0.2, not from 0.2 on; the thresholds
    # that mine the same patch as an earlier one (0.1, 0.3) give no candidate of their own
    assert [p.name for p in proposals] == ["interventions@0.05", "interventions@0.2"]
    assert mined[0]["rerank"] == "untried" and "rerank" not in mined[1] and mined[1]["correct_invalid"]
    assert [p.text for p in engineer.propose(packet, 1, "", run_dir=base)] == texts[:1]
    on_top = engineer.propose(packet, 4, rule_patch({"hint_after": 2}), run_dir=base)  # later rounds keep the patch
    assert all(rule_fields(p.text)["hint_after"] == 2 for p in on_top)
    with pytest.raises(ConfigError, match="run_dir"):
        engineer.propose(packet, 4, "")


@requires_bwrap
def test_table_rows_are_the_runs_records_and_a_rerun_resumes(tmp_path):
    out = tmp_path / "table"
    cfg = TableConfig(suite="toy", harness="react", engineers="rules,interventions,scripted:pick-first",
                      backbone="scripted:pick-hash", batch=2, k=4, test=2, concurrency=2, out=str(out), quiet=True)
    run_table(cfg)
    table = pd.read_csv(out / "table.csv")
    assert list(table["engineer"]) == ["base", "rules", "interventions", "scripted:pick-first"]
    loops = {e: out / "react" / e.replace(":", "-") for e in table["engineer"][1:]}
    candidates = {e: [json.loads(line) for line in (d / "candidates.jsonl").read_text().splitlines()]
                  for e, d in loops.items()}
    mined = candidates["interventions"]
    assert len({c["sha"] for c in mined}) >= 2 and all(c["validation"]["ok"] for c in mined)
    assert not any(c["validation"]["ok"] for c in candidates["scripted:pick-first"])  # it writes no patch: none kept

    def expect(row, runs: dict):
        for label, run_dir in runs.items():
            success, tokens, n = _record(run_dir)
            assert n == 2
            assert row[f"success_{label}"] == pytest.approx(success) and row[f"tokens_{label}"] == pytest.approx(tokens)

    rows = {r["engineer"]: r for r in table.to_dict("records")}
    base_runs = {"batch": loops["rules"] / "round0" / "base", "disjoint": loops["rules"] / "disjoint" / "base",
                 "test": loops["rules"] / "test" / "base"}
    expect(rows["base"], base_runs)
    assert rows["base"]["success_test"] != rows["base"]["success_batch"]  # the three runs differ: columns are telling
    kept_any = False
    for engineer, d in loops.items():
        row = rows[engineer]
        kept = [c for c in candidates[engineer] if c["validation"]["ok"] and c["sha"][:16] == row["kept_sha"]]
        assert row["kept"] == bool(kept)
        if kept:
            kept_any = True
            runs = {"batch": kept[0]["run_dir"], "disjoint": d / "disjoint" / "patched", "test": d / "test" / "patched"}
        else:  # no patch kept: the base's own held-out runs, measured all the same
            runs = {"batch": d / "round0" / "base", "disjoint": d / "disjoint" / "base", "test": d / "test" / "base"}
            assert not (d / "disjoint" / "patched").exists()
        expect(row, runs)
        for label in ("batch", "disjoint", "test"):  # Δ against the loop's own base runs, same tasks and seed
            base_success = _record(d / ("round0" if label == "batch" else label) / "base")[0]
            assert row[f"delta_{label}"] == pytest.approx(_record(runs[label])[0] - base_success)
            lo, hi = wilson(round(row[f"success_{label}"] * 2), 2)
            assert row[f"success_{label}_wilson"] == f"{lo:.2f}–{hi:.2f}"
            base_dir = d / ("round0" if label == "batch" else label) / "base"
            paired = compare_runs([base_dir, runs[label]])[0].iloc[0]["mcnemar_p"] if kept else 1.0
            assert row[f"mcnemar_p_{label}"] == pytest.approx(paired)
    assert kept_any and rows["rules"]["delta_batch"] > 0

    counts = {p: len(load(p.parent)["episodes"]) for p in out.rglob("run.sqlite")}
    before = (out / "table.csv").read_text(), {e: (d / "candidates.jsonl").read_text() for e, d in loops.items()}
    assert main(["engineer", "table", "--suite", "toy", "--harness", "react", "--engineers",
                 "rules,interventions,scripted:pick-first", "--backbone", "scripted:pick-hash", "--batch", "2",
                 "-k", "4", "--test", "2", "--concurrency", "2", "--out", str(out), "--quiet"]) == 0
    assert {p: len(load(p.parent)["episodes"]) for p in out.rglob("run.sqlite")} == counts  # no episode ran again
    assert ((out / "table.csv").read_text(), {e: (d / "candidates.jsonl").read_text() for e, d in loops.items()}) == before
