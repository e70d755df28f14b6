"""jitlab.train.report reads back what the trainers wrote: TensorBoard event files (written here by torch's own
SummaryWriter, as TRL's report_to does), log_history.jsonl when there are none, and the evaluation summaries."""
import json

from jitlab.train.report import candidate_channels, eval_table, fig_curves, repair_table, training_scalars


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


def test_the_closing_table_holds_validity_distinct_plans_streaming_and_the_grpo_signal(tmp_path):
    from jitlab.train.report import closing_table
    react = '{"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "ReActAction", "prompt": "react"}'
    goal = react.replace('"react"', '"goal"')
    for policy, replies in (("stage3", [react, f"Sure: {react}", goal]), ("base", ["no plan", "none"])):
        folder = tmp_path / "validity" / policy
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps({"n": len(replies), "first_try_valid_rate": 0.5}))
        (folder / "tasks.jsonl").write_text("".join(json.dumps({"reply": r}) + "\n" for r in replies))
    (tmp_path / "streaming" / "stage3").mkdir(parents=True)
    (tmp_path / "streaming" / "stage3" / "summary.json").write_text(json.dumps(
        {"success_rate": 0.3, "tokens_per_task": 1200.0, "n_episodes": 10}))
    (tmp_path / "stage3").mkdir()
    (tmp_path / "stage3" / "manifest.json").write_text(json.dumps(
        {"summary": {"groups": {"groups": 6, "nonzero": 2, "share": 1 / 3}}}))
    table = closing_table(tmp_path).set_index("policy")
    assert list(table.index) == ["base", "stage3"]                     # the untrained policy first
    assert table.loc["stage3", "distinct_plans"] == 2 and table.loc["stage3", "n_validity"] == 3
    assert table.loc["stage3", "success_rate"] == 0.3 and table.loc["stage3", "grpo_nonzero_advantage_share"] == 1 / 3
    assert table["distinct_plans"].isna()["base"] and table["grpo_groups"].isna()["base"]
