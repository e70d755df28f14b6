"""jitlab.train.report reads back what the trainers wrote: TensorBoard event files (written here by torch's own
SummaryWriter, as TRL's report_to does), log_history.jsonl when there are none, the evaluation summaries, and the
pipeline's closing table with its pairs on hand-checkable streaming runs (copies of a committed export, edited)."""
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from jitlab.stats import wilson
from jitlab.train.report import (
    candidate_channels,
    closing_table,
    eval_table,
    fig_curves,
    pair_rewards,
    paired_table,
    repair_by_op,
    repair_table,
    training_scalars,
)

REACT = Path(__file__).resolve().parents[2] / "results" / "full-budget-textworld-test" / "textworld-react"


def test_scalars_from_tensorboard_and_from_log_history(tmp_path):
    from torch.utils.tensorboard import SummaryWriter
    writer = SummaryWriter(str(tmp_path / "sft" / "runs" / "Nov30"))
    for step, loss in [(1, 2.0), (2, 1.5), (3, 1.25)]:
        writer.add_scalar("train/loss", loss, step)
    writer.close()
    (tmp_path / "dpo").mkdir()
    (tmp_path / "dpo" / "log_history.jsonl").write_text(
        json.dumps({"loss": 0.7, "rewards/margins": 0.1, "step": 1, "epoch": 0.5}) + "\n")
    df = training_scalars(tmp_path)
    sft = df[df.phase == "sft"]
    assert list(sft.step) == [1, 2, 3] and list(sft.value) == [2.0, 1.5, 1.25] and set(sft.source) == {"tensorboard"}
    dpo = df[df.phase == "dpo"].set_index("tag")
    assert dpo.loc["train/loss", "value"] == 0.7 and dpo.loc["train/rewards/margins", "source"] == "log_history"
    assert "train/epoch" not in dpo.index
    assert len(fig_curves(df, ["train/loss"])) == 1           # one panel per tag


def test_tables_from_summaries_and_channels(tmp_path):
    for name, rate in (("base", 0.0), ("stage1", 0.5)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps({
            "backbone": name, "n": 2, "parse_rate": rate, "first_try_valid_rate": rate, "valid_rate": rate}))
    table = eval_table({"base": tmp_path / "base", "stage1": tmp_path / "stage1"})
    assert list(table.policy) == ["base", "stage1"] and list(table.first_try_valid_rate) == [0.0, 0.5]
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "summary.json").write_text(json.dumps({
        "backbone": "embedded", "n": 3, "repaired": 1, "rate": 1 / 3,
        "by_kind": {"parse_error": {"n": 2, "repaired": 1}, "load": {"n": 1, "repaired": 0}}}))
    rt = repair_table({"before": tmp_path / "r"})
    assert list(rt.kind) == ["all", "load", "parse_error"] and list(rt.rate) == [1 / 3, 0.0, 0.5]
    row = {"task_id": "t", "channels": {"valid": 1.0, "task_delta": 0.0, "latency_gain": None, "cost_gain": None},
           "gate": False, "outcome": {"valid": True, "reward": 0.0, "meta": {"kind": None}},
           "incumbent": {"reward": 0.0}, "sha": "abc", "bank": None}
    (tmp_path / "completions.jsonl").write_text(json.dumps(row) + "\n")
    ch = candidate_channels(tmp_path)
    assert ch.loc[0, "latency_gain"] is None and ch.loc[0, "valid"] and not ch.loc[0, "entered_frontier"]


def test_pair_rewards_and_repair_by_op(tmp_path):
    pairs = pd.DataFrame([{"rule": "dominates", "chosen_metrics": {"reward": c}, "rejected_metrics": {"reward": r}}
                          for c, r in ((1.0, 0.0), (0.5, 0.5), (1.0, 0.25))])
    table = pair_rewards(pairs).set_index("rule")
    assert list(table.index) == ["dominates", "all"]
    assert table.loc["all", "pairs"] == 3 and table.loc["all", "reward_differs"] == 2
    assert (table.loc["all", "gap_min"], table.loc["all", "gap_max"]) == (0.0, 1.0)
    assert (table.loc["all", "reward_min"], table.loc["all", "reward_max"]) == (0.0, 1.0)
    assert pair_rewards(pd.DataFrame()).empty
    (tmp_path / "data2").mkdir()
    (tmp_path / "data2" / "repairs.jsonl").write_text("".join(json.dumps({"op": op, "split": split}) + "\n" for op, split in
                                                          (("unknown_param", "train"), ("param_type", "heldout"))))
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "heldout.jsonl").write_text("".join(json.dumps({"op": op, "ok": ok}) + "\n" for op, ok in
                                                        (("param_type", False), ("param_type", True),
                                                         ("unknown_param", True))))
    rows = repair_by_op({"after": tmp_path / "eval"}, tmp_path / "data2")
    assert rows[["op", "seen", "n", "repaired", "rate"]].values.tolist() == [["param_type", False, 2, 1, 0.5],
                                                                             ["unknown_param", True, 1, 1, 1.0]]


def _stream(folder, outcomes, tokens, config=None):
    """TEST DOUBLE of a streaming JIT run: a copy of the committed ReAct export (10 TextWorld test tasks, the split's
    order) cut to its first len(outcomes) tasks, with these successes and ``tokens`` per task (``config``: run.json
    config keys changed)."""
    shutil.copytree(REACT, folder)
    eps = pd.read_csv(folder / "episodes.csv", keep_default_na=False, dtype=str).iloc[:len(outcomes)].copy()
    eps["success"], eps["reward"] = [str(o) for o in outcomes], [f"{o:.1f}" for o in outcomes]
    eps["prompt_tokens"], eps["completion_tokens"] = str(tokens), "0"
    eps.to_csv(folder / "episodes.csv", index=False, lineterminator="\n")
    if config:
        info = json.loads((folder / "run.json").read_text())
        info["config"].update(config)
        (folder / "run.json").write_text(json.dumps(info))
    return folder


def test_the_closing_table_holds_each_row_s_n_validity_distinct_plans_streaming_and_the_grpo_signal(tmp_path):
    react = '{"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "ReActAction", "prompt": "react"}'
    goal = react.replace('"react"', '"goal"')
    loose = '{"M": "FullHistory", "P": "SqlAction", "params": {"max_chars": 3000}}'   # parses, not a plan: not counted
    for policy, replies in (("stage3", [react, f"Sure: {react}", goal, loose]), ("base", ["no plan", "none"])):
        folder = tmp_path / "validity" / policy
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps({"n": len(replies), "first_try_valid_rate": 0.5}))
        (folder / "tasks.jsonl").write_text("".join(json.dumps({"reply": r}) + "\n" for r in replies))
    _stream(tmp_path / "streaming" / "base", [1, 1, 0, 0, 0, 0, 0, 0, 0, 0], 100)
    _stream(tmp_path / "streaming" / "stage1", [1, 1, 1, 1], 50)                 # a prefix: the first 4 tasks
    _stream(tmp_path / "streaming" / "stage3", [1, 1, 1, 1, 1, 1, 1, 0, 0, 1], 200)
    compose = _stream(tmp_path / "compose", [1, 1, 0, 0, 1, 1, 1, 1, 1, 1], 80)
    (tmp_path / "stage3").mkdir()
    (tmp_path / "stage3" / "manifest.json").write_text(json.dumps(
        {"summary": {"groups": {"groups": 6, "nonzero": 2, "share": 1 / 3}}}))
    table = closing_table(tmp_path, [compose]).set_index("policy")
    assert list(table.index) == ["base", "stage1", "stage3", "compose"]    # the untrained policy first, compare last
    assert table.loc["stage3", "distinct_plans"] == 2 and table.loc["stage3", "n_validity"] == 4
    assert table.loc["stage3", "grpo_nonzero_advantage_share"] == 1 / 3
    assert table["distinct_plans"].isna()["base"] and table["grpo_groups"].isna()["base"]
    assert pd.isna(table.loc["stage1", "n_validity"]) and pd.isna(table.loc["compose", "first_try_valid_rate"])
    for row, k, n, tokens in (("base", 2, 10, 100), ("stage1", 4, 4, 50), ("stage3", 8, 10, 200), ("compose", 8, 10, 80)):
        got = table.loc[row]
        assert (got["n_success"], got["n_episodes"], got["success_rate"], got["tokens_per_task"]) == (k, n, k / n, tokens)
        assert (got["success_lo"], got["success_hi"]) == wilson(k, n), row
    assert (table.loc["base", "success_lo"], table.loc["base", "success_hi"]) == pytest.approx((0.0567, 0.5098), abs=1e-4)


def test_the_pairs_count_only_the_tasks_both_rows_played(tmp_path):
    _stream(tmp_path / "streaming" / "base", [1, 1, 0, 0, 0, 0, 0, 0, 0, 0], 100)
    _stream(tmp_path / "streaming" / "stage1", [1, 1, 1, 1], 50)
    _stream(tmp_path / "streaming" / "stage3", [1, 1, 1, 1, 1, 1, 1, 0, 0, 1], 200)
    compose = _stream(tmp_path / "compose", [1, 1, 0, 0, 1, 1, 1, 1, 1, 1], 80)
    dev = _stream(tmp_path / "dev-run", [1, 1, 1], 80, {"split": "dev"})
    # a retrained stage's old evaluation, set aside by the pipeline: in neither table, never the final policy
    _stream(tmp_path / "streaming" / "stage3.replaced-1", [0] * 10, 300)
    (tmp_path / "validity" / "stage3.replaced-1").mkdir(parents=True)
    (tmp_path / "validity" / "stage3.replaced-1" / "summary.json").write_text(json.dumps({"n": 10}))
    assert list(closing_table(tmp_path)["policy"]) == ["base", "stage1", "stage3"]
    pairs = paired_table(tmp_path, [compose, dev])
    rows = {(r["a"], r["b"]): r for r in pairs.to_dict("records")}
    assert list(rows) == [("base", "stage1"), ("base", "stage3"), ("compose", "stage3"), ("dev-run", "stage3")]
    got = rows["base", "stage1"]            # the 4 tasks stage1 played: base 1 1 0 0, stage1 1 1 1 1
    assert (got["n_tasks"], got["success_a"], got["success_b"], got["wins"], got["losses"]) == (4, 2, 4, 2, 0)
    assert got["mcnemar_p"] == 2 * 1 / 2 ** 2 and got["delta_tokens"] == -50
    got = rows["base", "stage3"]            # 6 wins (tasks 3-7, 10), no loss: p = 2 / 2^6
    assert (got["n_tasks"], got["wins"], got["losses"], got["mcnemar_p"], got["delta_tokens"]) == (10, 6, 0, 1 / 32, 100)
    got = rows["compose", "stage3"]         # the final policy: wins on tasks 3, 4, losses on 8, 9; p = 2 * 11/16 -> 1
    assert (got["n_tasks"], got["wins"], got["losses"], got["mcnemar_p"], got["delta_tokens"]) == (10, 2, 2, 1.0, 120)
    assert rows["compose", "stage3"]["note"] == ""
    refused = rows["dev-run", "stage3"]     # another split: no numbers, the reason
    assert pd.isna(refused["n_tasks"]) and "different split ('dev' vs 'test')" in refused["note"]
