"""Stage II plumbing without a model: the config, the data's train/held-out selection, and the held-out repair
evaluation through the real repair loop and sandbox validator, with test-double policies: an oracle that answers each
recorded prompt with its recorded fix (so the evaluation's prompts must be the training prompts) and a scripted reply
that fixes nothing."""
import json

import pytest

from jitlab.errors import ConfigError
from jitlab.protocol import Completion
from jitlab.train.config import CONFIG_DIR, Stage2Config, Stage2DataConfig, load_config
from jitlab.train.repair_data import build_stage2


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from jitlab.sandbox import probe
    out = tmp_path_factory.mktemp("s2") / "data2"
    build_stage2(Stage2DataConfig(suite="toy", only=["react", "hiagent"], heldout_seeds=["hiagent"],
                                  ops=["drop_colon", "rename_class", "unknown_module", "unknown_param"],
                                  allow_unisolated=not probe()[0]), out)
    return out


class Oracle:
    """Test double: answers a prompt recorded in repairs.jsonl with its recorded completion, anything else with ''."""
    id = "oracle"

    def __init__(self, rows):
        self.answers = {json.dumps(r["prompt"], sort_keys=True): r["completion"][0]["content"] for r in rows}
        self.hits = 0

    def chat(self, messages, **params):
        reply = self.answers.get(json.dumps(messages, sort_keys=True), "")
        self.hits += bool(reply)
        return Completion(reply)


def test_config_defaults_and_gpu_profile():
    cfg = Stage2Config(data="d")
    assert cfg.formats == ["plan"] and not cfg.bf16 and cfg.eval_rounds == 2 and cfg.stage1 is None
    gpu = load_config(Stage2Config, CONFIG_DIR / "gpu" / "stage2.yaml", {"data": "d", "steps": "3"})
    assert gpu.bf16 and set(gpu.formats) == {"code", "plan"} and gpu.steps == 3 and gpu.max_length >= 4096
    from jitlab.train.stage2 import training_arguments
    assert training_arguments(gpu, CONFIG_DIR)["max_steps"] == 3
    with pytest.raises(ConfigError, match="--formats must be code and/or plan"):
        Stage2Config(data="d", formats=["prose"])


def test_run_refuses_missing_data_and_a_non_adapter_stage1(tmp_path, data):
    from jitlab.train.stage2 import run_stage2
    with pytest.raises(ConfigError, match="no repairs.jsonl"):
        run_stage2(Stage2Config(data=str(tmp_path / "none")), tmp_path / "o")
    with pytest.raises(ConfigError, match="--stage1 .*not an adapter folder"):
        run_stage2(Stage2Config(data=str(data), stage1=str(tmp_path)), tmp_path / "o")


def test_rehearsal_reads_a_stage1_data_folder_and_refuses_one_without_sft(tmp_path):
    """Stage II can train on Stage I's SFT examples beside the repairs (the pipeline passes its own data1): without
    them TextWorld's Stage II turned the Stage I plan into ReAct's on 12 of 18 test tasks."""
    from jitlab.train.stage2 import _rehearsal, run_stage2
    assert _rehearsal(None) == []
    row = {"prompt": [{"role": "user", "content": "Task: ..."}], "completion": [{"role": "assistant", "content": "{}"}],
           "task_id": "t", "reward": 1.0}
    (tmp_path / "sft.jsonl").write_text(json.dumps(row) + "\n" + json.dumps({**row, "task_id": "u"}) + "\n")
    assert _rehearsal(str(tmp_path)) == [{"prompt": row["prompt"], "completion": row["completion"]}] * 2
    # a task's second example (Stage I data lists a task's plans best first) is not rehearsed: rehearsing DBBench's
    # ReAct plan beside its sql plan undid Stage I's DPO preference
    worse = {**row, "completion": [{"role": "assistant", "content": '{"A": "ReActAction"}'}], "reward": 0.0}
    (tmp_path / "sft.jsonl").write_text("\n".join(json.dumps(r) for r in (row, worse)) + "\n")
    assert _rehearsal(str(tmp_path)) == [{"prompt": row["prompt"], "completion": row["completion"]}]
    with pytest.raises(ConfigError, match="--rehearsal .*: no sft.jsonl there"):
        run_stage2(Stage2Config(data="d", rehearsal=str(tmp_path / "none")), tmp_path / "o")


def test_train_and_heldout_rows_are_disjoint(data):
    from jitlab.train.stage2 import load_repairs
    train, _ = load_repairs(data, "train", ["plan", "code"])
    held, _ = load_repairs(data, "heldout", ["plan", "code"])
    assert train and held and {r["input"] for r in held} == {"hiagent"} and "hiagent" not in {r["input"] for r in train}
    with pytest.raises(ConfigError, match="no heldout example of format"):
        load_repairs(data, "heldout", ["nothing"])


@pytest.mark.parametrize("fmt", ["plan", "code"])
def test_heldout_evaluation_counts_real_repairs(data, tmp_path, fmt):
    from jitlab.llm.scripted import get_scripted
    from jitlab.sandbox import probe
    from jitlab.train.stage2 import evaluate_repair, load_repairs
    held, _ = load_repairs(data, "heldout", [fmt])
    oracle = Oracle(held)
    good = evaluate_repair(oracle, data, tmp_path / "good", [fmt], rounds=2, allow_unisolated=not probe()[0])
    assert good["n"] == len(held) and good["repaired"] == len(held) and good["rate"] == 1.0
    assert oracle.hits == len(held)           # one round each: the evaluation sends the training prompts
    records = [json.loads(line) for line in (tmp_path / "good" / "heldout.jsonl").read_text().splitlines()]
    assert all(r["outcomes"] == ["fixed"] for r in records)
    bad = evaluate_repair(get_scripted("reply:no idea"), data, tmp_path / "bad", [fmt], rounds=2, limit=2,
                          allow_unisolated=not probe()[0])
    assert bad["n"] == 2 and bad["repaired"] == 0 and bad["by_format"][fmt] == {"n": 2, "repaired": 0}
    logged = [json.loads(line) for line in (tmp_path / "bad" / "repairs.jsonl").read_text().splitlines()]
    assert len(logged) == 4 and {t["outcome"] for t in logged} <= {"unchanged", "still_broken"}


def test_a_stage1_input_is_repaired_on_its_own_train_task(tmp_path):
    """Session 26: Stage II data from Stage I's plans shows each plan's own (train) task; the held-out evaluation
    looked its task up among the dev tasks only and stopped the pipeline."""
    from jitlab.envs.base import get_suite
    from jitlab.sandbox import probe
    from jitlab.train.stage2 import evaluate_repair, load_repairs
    plan = json.dumps({"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "ReActAction", "prompt": "react"})
    task = get_suite("toy").tasks("train")[1]
    (tmp_path / "data1").mkdir()
    (tmp_path / "data1" / "sft.jsonl").write_text(json.dumps({"task_id": task.id, "split": "train", "plan": plan,
                                                              "reward": 1.0}) + "\n")
    build_stage2(Stage2DataConfig(suite="toy", seeds=False, stage1_data=str(tmp_path / "data1"), formats=["plan"],
                                  allow_unisolated=not probe()[0]), tmp_path / "data2")
    held, _ = load_repairs(tmp_path / "data2", "heldout", ["plan"])
    assert held and {r["task_id"] for r in held} == {task.id}
    done = evaluate_repair(Oracle(held), tmp_path / "data2", tmp_path / "eval", ["plan"], rounds=1,
                           allow_unisolated=not probe()[0])
    assert done["n"] == len(held) and done["repaired"] == len(held)
