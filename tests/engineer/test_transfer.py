"""Cross-backbone transfer (jitlab.engineer.transfer): two scripted TEST DOUBLE backbones on the toy suite, real
sandboxed runs and run stores; the figure from a DataFrame."""
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "sandbox"))
from sandbox_helpers import requires_bwrap  # noqa: E402

from jitlab.cli import main  # noqa: E402
from jitlab.engineer.transfer import TransferConfig, run_transfer, slug  # noqa: E402
from jitlab.errors import ConfigError, UnknownName  # noqa: E402
from jitlab.stats import mcnemar_exact  # noqa: E402
from jitlab.store import load  # noqa: E402
from jitlab.viz.transfer import fig_transfer_matrix, transfer_matrix, transfer_table  # noqa: E402

A, B = "scripted:pick-first", "scripted:pick-last"


def _episodes(run_dir) -> pd.DataFrame:
    eps = load(run_dir)["episodes"]
    return eps[eps["final"]]


def _all_runs(out: Path) -> dict[str, int]:
    """Episode rows (every attempt, finished or not) per run directory under ``out``."""
    return {str(p.parent): len(load(p.parent)["episodes"]) for p in sorted(out.rglob("run.sqlite"))}


@requires_bwrap
def test_matrix_shape_paired_deltas_and_resume(tmp_path, capsys):
    out = tmp_path / "t"
    cfg = TransferConfig(suite="toy", learn_on=f"{A},{B}", apply_to=B, limit=3, dev=3, seed=2, out=str(out), quiet=True)
    result = run_transfer(cfg)
    assert result["learners"] == [A, B] and result["targets"] == [B, A]  # the learners join the columns
    frame = pd.read_csv(out / "matrix.csv")
    assert transfer_matrix(frame).shape == (2, 2)
    assert list(transfer_matrix(frame).index) == [A, B] and list(transfer_matrix(frame).columns) == [B, A]
    assert (out / "matrix.png").stat().st_size > 0 and "| learned_on |" in (out / "matrix.md").read_text()
    assert result["backbones"][A] == "scripted test double pick-first"
    for cell in result["cells"]:
        base, patched = _episodes(cell["base_run_dir"]), _episodes(cell["patched_run_dir"])
        keys = {(str(r.task_id), int(r.seed)) for r in base.itertuples()}
        assert keys == {(str(r.task_id), int(r.seed)) for r in patched.itertuples()}
        assert keys == {(t, 2) for t in result["test_task_ids"]} and cell["n"] == 3
        # Δ recomputed from the records, not trusted from the code under test
        assert cell["delta"] == pytest.approx(patched["success"].mean() - base["success"].mean())
        both = base.set_index("task_id")["success"].to_frame("b").join(patched.set_index("task_id")["success"])
        assert (cell["wins"], cell["losses"]) == (int(((both["success"] == 1) & (both["b"] == 0)).sum()),
                                                  int(((both["success"] == 0) & (both["b"] == 1)).sum()))
        assert cell["mcnemar_p"] == mcnemar_exact(cell["losses"], cell["wins"])
    learned = json.loads((out / "transfer.json").read_text())["learned"]
    assert learned[A]["evidence"]["backbones"] == [A]  # learned from A's own dev trajectories
    # episodes run concurrently, so rows come in start order
    assert sorted(_episodes(learned[A]["dev_run_dir"])["task_id"]) == sorted(result["dev_task_ids"])
    # pick-first repeats itself: its mined overlay helps on the backbone it was mined from
    own = next(c for c in result["cells"] if c["learned_on"] == A and c["applied_to"] == A)
    assert own["delta"] > 0

    before = _all_runs(out)
    assert len(before) == 2 + 2 + 4  # two dev runs, a base run per column, a patched run per cell
    again = run_transfer(cfg)
    assert _all_runs(out) == before  # resumed: no finished episode ran again
    assert [c["delta"] for c in again["cells"]] == [c["delta"] for c in result["cells"]]

    # the command: same config, same folder -> nothing reruns, the table is rewritten
    assert main(["transfer", "--suite", "toy", "--learn-on", f"{A},{B}", "--apply-to", B, "--limit", "3", "--dev", "3",
                 "--seed", "2", "--out", str(out), "--quiet"]) == 0
    assert _all_runs(out) == before and "2 x 2 transfer matrix" in capsys.readouterr().out


def test_bad_config_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="method"):
        TransferConfig(method="magic")
    with pytest.raises(UnknownName, match="nope:x"):
        run_transfer(TransferConfig(suite="toy", learn_on="nope:x", out=str(tmp_path)))
    assert slug("hf:/m/x#f.gguf") == "hf-m-x-f.gguf"


def test_figure_and_table_from_a_dataframe():
    frame = pd.DataFrame([
        {"learned_on": "a", "applied_to": "a", "delta": 0.5, "base_success": 0.25, "patched_success": 0.75, "n": 4,
         "base_tokens_per_task": 100.0, "patched_tokens_per_task": 80.0, "base_cost_per_task": 1e-5,
         "patched_cost_per_task": 8e-6},
        {"learned_on": "a", "applied_to": "b", "delta": None, "base_success": None, "patched_success": None, "n": 0,
         "base_tokens_per_task": 0.0, "patched_tokens_per_task": 0.0, "base_cost_per_task": 0.0,
         "patched_cost_per_task": 0.0}])
    assert transfer_matrix(frame).shape == (1, 2)
    fig = fig_transfer_matrix(frame)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert len(texts) == 1 and "Δ +0.50" in texts[0]  # the cell without pairs is left blank
    assert "n/a" in transfer_table(frame)


def test_rules_method_learns_a_valid_rule_patch(tmp_path):
    from jitlab.engineer.patches import check_patch
    from jitlab.engineer.transfer import learn_overlay
    from jitlab.runner import RunConfig, run
    out = run(RunConfig(suite="toy", harness="react", backbone=A, limit=3, out=str(tmp_path / "r"), quiet=True))
    text, evidence = learn_overlay("rules", out)
    assert check_patch(text) is None and evidence["rule"] and evidence["failure_counts"]
    assert learn_overlay("rules", out) == (text, evidence)  # same records -> the same overlay
