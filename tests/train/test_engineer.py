"""Engineer training data and reward: a hand-written loop folder becomes SFT examples of valid, non-regressive patches
(largest Δ first) and one GRPO packet; the GRPO reward re-runs a patch like the loop does (toy suite, a scripted test
double as the harness's backbone): an invalid patch gets the lowest reward, a known-good rule patch a measured Δ > 0."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "sandbox"))
from sandbox_helpers import requires_bwrap  # noqa: E402

from jitlab.cli import main  # noqa: E402
from jitlab.engineer.patches import NOOP_PATCH  # noqa: E402
from jitlab.engineer.proposer import extract_patch, render_prompt  # noqa: E402
from jitlab.engineer.rules import rule_patch  # noqa: E402
from jitlab.errors import ConfigError  # noqa: E402
from jitlab.runtime import SpendCapReached  # noqa: E402
from jitlab.store import load  # noqa: E402
from jitlab.train.config import EngineerDataConfig, PatchRuns  # noqa: E402
from jitlab.train.engineer import PatchEvaluator, build_engineer_data, patch_reward  # noqa: E402
from jitlab.train.records import read_jsonl  # noqa: E402

PACKET = {"run": {"suite": "toy"}, "batch": {"episodes": 2, "successes": 0, "success_rate": 0.0,
                                             "task_ids": ["toy-dev-0", "toy-dev-1"]},
          "tasks": {"toy-dev-0": {"family": "toy", "description": "Go north then take key.", "max_steps": 8,
                                  "tools": [{"name": "act", "description": "a command"}]}},
          "failure_counts": {"refused": 2, "repeated_action": 2},
          "failures": [{"task_id": "toy-dev-0", "seed": 0, "kinds": {"refused": 3},
                        "outcome": {"status": "ok", "steps": 8, "reward": 0.0},
                        "excerpt": [{"step": 1, "action": "go east", "observation": "Nothing happens.",
                                     "marks": ["refused"], "reward": 0.0}]}]}


def _candidate(index, patch, delta, ok=True):
    return {"round": 0, "index": index, "packet_sha": "p0", "parent_patch": "", "patch": patch, "sha": f"sha-{patch[:40]}",
            "engineer": "rules", "validation": {"ok": ok, "diagnostic": None if ok else {"kind": "parse_error"}},
            "delta": delta if ok else None}


def _loop(folder: Path, split="dev") -> Path:
    """A hand-written engineer-loop folder: summary.json, round0/packet.json and five candidates."""
    (folder / "round0").mkdir(parents=True)
    (folder / "round0" / "packet.json").write_text(json.dumps(PACKET))
    (folder / "summary.json").write_text(json.dumps({"config": {
        "suite": "toy", "harness": "react", "backbone": "scripted:pick-first", "split": split, "seed": 0}}))
    good, zero, bad = rule_patch({"block_after": 1}), rule_patch({"loop_after": 2}), rule_patch({"hint_after": 1})
    rows = [_candidate(0, zero, 0.0), _candidate(1, "def broken(:\n", None, ok=False), _candidate(2, bad, -0.5),
            _candidate(3, good, 0.5), _candidate(4, good, 0.5)]
    (folder / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_data_keeps_valid_non_regressive_patches_best_first(tmp_path):
    loop = _loop(tmp_path / "loop")
    manifest = build_engineer_data(EngineerDataConfig(loops=[str(loop)], per_packet=2), tmp_path / "data")
    sft = read_jsonl(tmp_path / "data" / "sft.jsonl")
    assert [r["delta"] for r in sft] == [0.5, 0.0] and [r["index"] for r in sft] == [3, 0]
    assert manifest["dropped"] == {"invalid": 1, "regressive": 1, "duplicate": 1, "duplicate_packets": 0}
    prompt = render_prompt(PACKET, "")
    assert all(r["prompt"] == [{"role": "user", "content": prompt}] for r in sft)     # what the engineer sees
    assert extract_patch(sft[0]["completion"][0]["content"]) == rule_patch({"block_after": 1})   # what it parses
    packets = read_jsonl(tmp_path / "data" / "packets.jsonl")
    assert len(packets) == 1 and packets[0]["task_ids"] == ["toy-dev-0", "toy-dev-1"]
    assert packets[0]["run"]["backbone"] == "scripted:pick-first" and packets[0]["packet_id"] == sft[0]["packet_id"]
    # only Δ > 0, through the CLI
    assert main(["train", "engineer", "data", "--set", f"loops=[{loop}]", "--set", "min_delta=0.1",
                 "--out", str(tmp_path / "pos")]) == 0
    assert [r["delta"] for r in read_jsonl(tmp_path / "pos" / "sft.jsonl")] == [0.5]


def test_data_refuses_test_split_and_unfinished_loops(tmp_path):
    with pytest.raises(ConfigError, match="test split"):
        build_engineer_data(EngineerDataConfig(loops=[str(_loop(tmp_path / "t", split="test"))]), tmp_path / "d")
    (tmp_path / "half").mkdir()
    with pytest.raises(ConfigError, match="summary.json"):
        build_engineer_data(EngineerDataConfig(loops=[str(tmp_path / "half")]), tmp_path / "d")


@requires_bwrap
def test_grpo_reward_invalid_is_lowest_and_a_good_rule_patch_gains(tmp_path):
    loop = tmp_path / "loop"
    assert main(["engineer", "run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-first",
                 "--engineer", "rules", "--batch", "3", "-k", "1", "--out", str(loop), "--quiet"]) == 0
    build_engineer_data(EngineerDataConfig(loops=[str(loop)]), tmp_path / "data")
    packets = read_jsonl(tmp_path / "data" / "packets.jsonl")
    records = []
    reward = patch_reward(PatchEvaluator(packets, tmp_path / "grpo"), -1.0, records.extend)
    completions = [[{"role": "assistant", "content": "I would block repeated actions."}],            # no patch
                   [{"role": "assistant", "content": f"```python\n{rule_patch({'block_after': 1})}```"}],
                   [{"role": "assistant", "content": f"```python\n{NOOP_PATCH}```"}],
                   [{"role": "assistant", "content": "```python\nimport jitlab.envs.toy\nclass Hooks:\n    pass\n```"}]]
    pid = [packets[0]["packet_id"]] * len(completions)
    rewards = reward([None] * len(completions), completions, packet_id=pid)
    assert rewards[0] == rewards[3] == -1.0 == min(rewards)
    assert records[3]["kind"] == "import_error" and not records[0]["valid"]
    assert rewards[1] > 0 and records[1]["valid"]             # measured: pick-first alone wins nothing on this batch
    assert rewards[2] == 0.0                                  # the no-op control
    base = json.loads((tmp_path / "grpo" / "runs" / pid[0] / "base" / "summary.json").read_text())
    assert base["success_rate"] == 0.0 and base["n_episodes"] == 3   # the reference, re-run the same way


def test_cli_input_errors_are_one_line(tmp_path, capsys):
    assert main(["train", "engineer", "sft", "--set", f"data={tmp_path / 'none'}", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no sft.jsonl" in err and "jitlab train engineer data" in err and "Traceback" not in err
    assert main(["train", "engineer", "data", "--out", str(tmp_path / "d")]) == 2
    assert "no --loops given" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "packets.jsonl").write_text("")
    assert main(["train", "engineer", "grpo", "--set", f"data={tmp_path / 'empty'}", "--out", str(tmp_path / "g")]) == 2
    assert "holds no row" in capsys.readouterr().err


@requires_bwrap
def test_grpo_patch_runs_take_the_wall_budget_and_stop_at_the_spend_cap(tmp_path):
    """The engineer GRPO plays episodes: its run controls (jitlab.train.config.PatchRuns) reach every re-run, the
    wall budget bounds each episode and one RunSpend under its --out caps all of them."""
    loop = tmp_path / "loop"
    assert main(["engineer", "run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-first",
                 "--engineer", "rules", "--batch", "2", "-k", "1", "--no-cache", "--out", str(loop), "--quiet"]) == 0
    build_engineer_data(EngineerDataConfig(loops=[str(loop)]), tmp_path / "data")
    packets = read_jsonl(tmp_path / "data" / "packets.jsonl")   # their runs use no replay cache: every call costs
    pid, patch = packets[0]["packet_id"], rule_patch({"block_after": 1})
    walled = PatchEvaluator(packets, tmp_path / "walled", PatchRuns(max_wall_s=45.0, concurrency=1, retries=0))
    assert walled.score(pid, patch)["validation"]["ok"]
    for db in (tmp_path / "walled").rglob("run.sqlite"):
        config = load(db.parent)["config"].iloc[0]
        assert (config["max_wall_s"], config["seed"]) == (45.0, packets[0]["run"]["seed"])
    capped = PatchEvaluator(packets, tmp_path / "capped", PatchRuns(max_tokens_total=1))
    with pytest.raises(SpendCapReached, match="max-tokens-total"):
        capped.score(pid, patch)
