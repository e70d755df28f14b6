"""Stage I data (offline teacher) on a tiny fixture: toy-suite runs made here with scripted backbones (test doubles,
not models) and a bank holding one hand-recorded compose evaluation. The expected teacher choice is recomputed
from the run records, not hard-coded."""
import json

import pytest

from jitlab.errors import ConfigError
from jitlab.jit.generate.plan import check_plan, plan_messages, plan_of, plan_text
from jitlab.train.config import Stage1DataConfig
from jitlab.train.data import PlanStats, build_stage1, prefers


def _recorded_best(runs) -> dict:
    """task id -> plan text of the best (reward up, cost down) harness, recomputed from the run records."""
    from jitlab.harness import read_files, resolve
    from jitlab.store import load
    scores = {}
    for run_dir in runs:
        frames = load(run_dir)
        config = frames["config"].iloc[0]
        plan = plan_of(read_files(resolve(config["harness"])))
        if plan is None or config["split"] != "dev":
            continue
        for row in frames["episodes"].to_dict("records"):
            scores.setdefault(row["task_id"], {}).setdefault(plan_text(plan), []).append((row["reward"], row["cost"]))
    best = {}
    for task, plans in scores.items():
        means = {p: (sum(r for r, _ in v) / len(v), sum(c for _, c in v) / len(v)) for p, v in plans.items()}
        best[task] = min(means, key=lambda p: (-means[p][0], means[p][1]))
    return best


def test_sft_examples_are_each_tasks_best_valid_plan_with_the_inference_prompt(evidence, tmp_path):
    runs, bank, compose = evidence
    manifest = build_stage1(Stage1DataConfig(runs=runs, banks=[bank]), tmp_path / "data")
    sft = [json.loads(line) for line in (tmp_path / "data" / "sft.jsonl").read_text().splitlines()]
    expected = _recorded_best(runs)
    expected["toy-dev-2"] = plan_text(compose)  # the bank's compose sample (reward 1.0) beats every run there
    assert {r["task_id"]: r["plan"] for r in sft} == expected
    for row in sft:
        check_plan(json.loads(row["completion"][0]["content"]))
        assert row["split"] == "dev" and row["prompt"][0]["role"] == "user"
        from jitlab.envs.base import get_suite
        task = next(t for t in get_suite("toy").tasks("dev") if t.id == row["task_id"])
        assert row["prompt"][0]["content"].startswith(plan_messages(task.public(), [])[0]["content"].split("\n")[0])
        assert "Plans of similar harnesses" in row["prompt"][0]["content"]
    assert manifest["dropped"]["test_split"] == 3 and manifest["dropped"]["not_a_plan"] == 3
    assert manifest["counts"]["sft"] == 3 and manifest["hashes"]["sft.jsonl"]
    assert manifest["versions"]["trl"] == "1.16.0"


def test_pairs_follow_the_pareto_rule(evidence, tmp_path):
    runs, bank, _ = evidence
    build_stage1(Stage1DataConfig(runs=runs, banks=[bank]), tmp_path / "data")
    pairs = [json.loads(line) for line in (tmp_path / "data" / "pairs.jsonl").read_text().splitlines()]
    assert pairs
    for p in pairs:
        a, b = p["chosen_metrics"], p["rejected_metrics"]
        assert a["valid"] and p["chosen"] != p["rejected"]
        if p["rule"] == "dominates":
            assert a["reward"] >= b["reward"] and a["cost"] <= b["cost"] and a["tokens"] <= b["tokens"]
            assert (a["reward"], -a["cost"], -a["tokens"]) != (b["reward"], -b["cost"], -b["tokens"])
        else:
            assert p["rule"] == "tie_cheaper" and a["reward"] == b["reward"] and a["cost"] < b["cost"]
    # a plan never appears as chosen over one that beats it on reward
    assert all(p["chosen_metrics"]["reward"] >= p["rejected_metrics"]["reward"] for p in pairs)


def test_prefers_on_hand_made_stats():
    def s(reward, cost, tokens, valid=True):
        return PlanStats("p", "t", "toy", "chain", reward, cost, tokens, 1, 0, [], valid)
    assert prefers(s(1, 1, 1), s(0.5, 1, 1)) == "dominates"
    assert prefers(s(0.5, 1, 9), s(0.5, 2, 1)) == "tie_cheaper"          # same reward, cheaper, slower: still chosen
    assert prefers(s(1, 2, 1), s(0.5, 1, 1)) is None                      # a trade-off: no pair
    assert prefers(s(0, 5, 5), s(1, 1, 1, valid=False)) == "valid_over_invalid"
    assert prefers(s(1, 1, 1, valid=False), s(0, 5, 5)) is None


def test_rerun_uses_the_validation_cache_and_is_identical(evidence, tmp_path):
    runs, bank, _ = evidence
    first = build_stage1(Stage1DataConfig(runs=runs, banks=[bank]), tmp_path / "data")
    cached = json.loads((tmp_path / "data" / "validation.json").read_text())
    assert cached and all(v["ok"] for v in cached.values())
    second = build_stage1(Stage1DataConfig(runs=runs, banks=[bank]), tmp_path / "data")
    assert first["hashes"] == second["hashes"]


def test_test_split_and_empty_evidence_are_refused():
    with pytest.raises(ConfigError, match="must not include 'test'"):
        Stage1DataConfig(runs=["x"], splits=["dev", "test"])
    with pytest.raises(ConfigError, match="no evidence"):
        build_stage1(Stage1DataConfig(), "/tmp/never-written")


def test_an_evaluation_in_both_a_run_and_a_bank_counts_once(evidence, tmp_path):
    from jitlab.harness import read_files, resolve
    from jitlab.jit.bank import Bank, Evaluation
    from jitlab.store import load
    runs, _, _ = evidence
    frames = load(runs[0])   # react on dev: record its episodes in a bank too, as a JIT run does
    bank = Bank.create(tmp_path / "mirror.sqlite", seeds=False)
    sha = bank.add(read_files(resolve("react")), generator="seed")
    bank.update(sha, [Evaluation.from_episode({**row, "suite": "toy"}) for row in frames["episodes"].to_dict("records")])
    bank.close()
    once = build_stage1(Stage1DataConfig(runs=[runs[0]]), tmp_path / "a")
    both = build_stage1(Stage1DataConfig(runs=[runs[0]], banks=[str(tmp_path / "mirror.sqlite")]), tmp_path / "b")
    assert both["dropped"]["duplicate"] == 3 and both["counts"]["evidence"] == once["counts"]["evidence"] == 3


def test_code_format_examples_are_the_best_plans_files_on_the_code_prompt(evidence, tmp_path):
    from jitlab.envs.base import get_suite
    from jitlab.jit.generate import get_generator
    from jitlab.jit.generate.blocks import parse_blocks
    from jitlab.jit.generate.plan import plan_files
    runs, bank, _ = evidence
    build_stage1(Stage1DataConfig(runs=runs, banks=[bank]), tmp_path / "plan")
    build_stage1(Stage1DataConfig(runs=runs, banks=[bank], format="code", code_form="thin", code_references=0),
                 tmp_path / "code")
    read = lambda name: [json.loads(line) for line in (tmp_path / name / "sft.jsonl").read_text().splitlines()]
    plans, code = read("plan"), read("code")
    assert [r["plan"] for r in code] == [r["plan"] for r in plans] and all(r["format"] == "code" for r in code)
    tasks = {t.id: t for t in get_suite("toy").tasks("dev")}
    for row in code:
        files = parse_blocks(row["completion"][0]["content"])
        assert files == plan_files(json.loads(row["plan"]), "teacher")     # thin: the rendered files themselves
        generator = get_generator("code:policy", None, code_references=0)
        assert row["prompt"][-1]["content"].startswith(
            generator.messages(tasks[row["task_id"]].public(), [])[-1]["content"].split("\n")[0])
        assert row["prompt"][0]["role"] == "system" and "<file name=" not in row["prompt"][-1]["content"]
    resolved = build_stage1(Stage1DataConfig(runs=runs, banks=[bank], format="code"), tmp_path / "resolved")
    [first] = read("resolved")[:1]
    assert resolved["counts"]["sft"] == len(code)
    assert len(first["completion"][0]["content"]) > 3 * len(code[0]["completion"][0]["content"])  # library written out
    with pytest.raises(ConfigError, match="--format must be plan or code"):
        Stage1DataConfig(runs=runs, format="python")
