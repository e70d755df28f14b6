"""Stage II data: fault operators produce the diagnostic kind they name (checked by the real sandbox validator, with
a scripted smoke backbone: a test double), the fix is the original file, prompts are the generators' own repair
prompts, held-out seeds/operators are split off."""
import json
import re

import pytest

from jitlab.errors import ConfigError
from jitlab.harness import read_files, seed_bank_dir
from jitlab.jit.generate import format_blocks
from jitlab.jit.generate.plan import check_plan, plan_of
from jitlab.train.config import Stage2DataConfig
from jitlab.train.faults import CODE_FAULTS, PLAN_FAULTS, inject, inject_plan
from jitlab.train.repair_data import build_stage2


@pytest.fixture(scope="module")
def data(tmp_path_factory):  # built once: the three tests below only read it
    tmp_path = tmp_path_factory.mktemp("stage2")
    from jitlab.sandbox import probe
    cfg = Stage2DataConfig(suite="toy", only=["react", "hiagent", "agentfold"], heldout_seeds=["hiagent"],
                           heldout_ops=["param_type"], allow_unisolated=not probe()[0])
    manifest = build_stage2(cfg, tmp_path / "data2")
    rows = [json.loads(line) for line in (tmp_path / "data2" / "repairs.jsonl").read_text().splitlines()]
    return manifest, rows, tmp_path / "data2"


def test_every_operator_applies_to_a_seed_and_the_fix_restores_it():
    files = read_files(seed_bank_dir() / "react")
    faults = inject(files)
    assert {f.op for f in faults} == set(CODE_FAULTS)
    for f in faults:
        assert f.broken != files and {**f.broken, **f.fixed} == files
    plan = plan_of(read_files(seed_bank_dir() / "agentfold"))
    plan_faults = inject_plan(plan)
    assert {f.op for f in plan_faults} == set(PLAN_FAULTS)   # agentfold's fold memory needs its fold action
    for f in plan_faults:
        assert f.fixed["plan"] == plan and check_plan(f.fixed["plan"])


def test_injected_faults_fail_validation_with_the_intended_kind(data):
    manifest, rows, _ = data
    code = [r for r in rows if r["format"] == "code"]
    assert {r["op"] for r in code} == set(CODE_FAULTS)
    assert manifest["counts"]["kind_mismatches"] == 0 and manifest["dropped"]["fault_passed_validation"] == 0
    assert {r["kind"] for r in code} == {"parse_error", "interface_mismatch", "import_error", "runtime_error"}
    runtime = [r for r in code if r["kind"] == "runtime_error"]
    assert runtime and all(r["stage"] == "smoke" for r in runtime)
    assert "test double" in manifest["smoke_backbone"]


def test_prompts_are_the_generators_repair_prompts_and_completions_the_fix(data):
    _, rows, _ = data
    from jitlab.jit.generate import parse_blocks
    for r in rows:
        if r["format"] == "code":
            assert r["prompt"][0]["role"] == "system" and "Diagnostic:" in r["prompt"][-1]["content"]
            assert r["diagnostic"]["message"].split("\n")[0][:40] in r["prompt"][-1]["content"]
            assert set(parse_blocks(r["completion"][0]["content"])) == set(r["touched"])
        else:
            assert r["prompt"][-2] == {"role": "assistant", "content": r["broken_plan"]}
            assert "parse_error" in r["prompt"][-1]["content"]
            check_plan(json.loads(r["completion"][0]["content"]))


def test_held_out_inputs_and_operators_are_split_off(data):
    _, rows, _ = data
    for r in rows:
        assert r["split"] == ("heldout" if r["input"] == "hiagent" or r["op"] == "param_type" else "train")
    assert {r["split"] for r in rows} == {"train", "heldout"}


def test_stage1_plans_are_inputs_per_task_shown_with_their_own_task(tmp_path):
    """Session 26: every repair prompt showed the suite's first dev task (a coin game) and most fixes were ReAct-like
    seeds' plans, so Stage II taught 'coin or treasure game -> ReAct'. A Stage I plan is now an input per task whose
    plan earned reward, its repair prompts showing that task; a plan that earned nothing is no input."""
    from jitlab.envs.base import get_suite
    from jitlab.sandbox import probe
    plan = json.dumps({"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "ReActAction", "prompt": "react"})
    tasks = get_suite("toy").tasks("train")
    (tmp_path / "data1").mkdir()
    (tmp_path / "data1" / "sft.jsonl").write_text("".join(
        json.dumps({"task_id": t.id, "split": "train", "plan": plan, "reward": r}) + "\n"
        for t, r in zip(tasks, (1.0, 0.0, 0.5))))
    cfg = Stage2DataConfig(suite="toy", seeds=False, stage1_data=str(tmp_path / "data1"), formats=["plan"],
                           allow_unisolated=not probe()[0])
    build_stage2(cfg, tmp_path / "data2")
    rows = [json.loads(line) for line in (tmp_path / "data2" / "repairs.jsonl").read_text().splitlines()]
    assert {r["input"] for r in rows} == {f"stage1:{tasks[0].id}", f"stage1:{tasks[2].id}"}
    for r in rows:
        task = tasks[0] if r["input"].endswith(tasks[0].id) else tasks[2]
        assert r["task_id"] == task.id and task.description in r["prompt"][0]["content"]
        assert json.loads(r["completion"][0]["content"]) == json.loads(plan)
    with pytest.raises(ConfigError, match="task nope is not in toy's train split"):
        (tmp_path / "data1" / "sft.jsonl").write_text(json.dumps({"task_id": "nope", "split": "train", "plan": plan,
                                                                  "reward": 1.0}) + "\n")
        build_stage2(cfg, tmp_path / "data3")
    assert not (tmp_path / "data3").exists()                          # refused before anything is written


def test_bad_options_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="--formats must be code and/or plan"):
        Stage2DataConfig(formats=["prose"])
    with pytest.raises(ConfigError, match="unknown operator"):
        build_stage2(Stage2DataConfig(ops=["melt"], suite="toy"), tmp_path / "x")
    with pytest.raises(ConfigError, match="no input named nope"):
        build_stage2(Stage2DataConfig(only=["nope"], suite="toy"), tmp_path / "x")


def test_a_thin_repair_prompt_fits_the_embedded_models_context_and_its_reply_restores_the_file(tmp_path, embedded_tokens):
    """A real repair prompt: a fault injected into the largest seed, its diagnostic from the sandbox validator, the
    prompt code:<backbone> sends; counted with the embedded SmolLM2 tokenizer (8,192-token context)."""
    from jitlab.envs.base import get_suite
    from jitlab.jit.generate import Candidate, get_generator, parse_blocks
    from jitlab.jit.repair import RepairConfig, validate_files
    from jitlab.sandbox import probe
    from jitlab.train.repair_data import repair_prompt
    tokens = embedded_tokens
    suite = get_suite("textworld")
    task = suite.tasks("dev")[0]
    files = read_files(seed_bank_dir() / "aorchestra")
    fault = next(f for f in inject(files, ["drop_colon"]))
    check = validate_files(fault.broken, task, suite, None, RepairConfig(max_rounds=0, smoke_steps=0,
                           allow_unisolated=not probe()[0]), tmp_path / "v")
    diag = check.diagnostic
    assert not check.ok and diag["kind"] == "parse_error" and diag["line"]
    whole = repair_prompt("code:student", fault.broken, diag, task.public(), repair_view="resolved")
    thin = repair_prompt("code:student", fault.broken, diag, task.public())
    assert tokens(whole) > 8192 > tokens(thin)
    shown = parse_blocks(thin[-1]["content"])
    assert set(shown) == set(fault.touched)              # the broken file only, the others named
    (name,) = fault.touched
    line = int(re.search(r"line (\d+)", thin[-1]["content"]).group(1))
    assert shown[name].splitlines()[line - 1] == fault.broken[name].splitlines()[diag["line"] - 1]   # moved to match
    # a reply in the same thin form (the Stage II completion) restores the original file once resolved
    from jitlab.jit.generate.code import thin_files
    reply = format_blocks(thin_files(fault.fixed))
    fixed = get_generator("code:student").repair(Candidate(dict(fault.broken), "code:student"), diag, task.public(),
                                                 _Answer(reply))
    assert fixed.files == files


class _Answer:
    """A test double of a backbone: answers ``reply`` to every call."""
    id = "answer"

    def __init__(self, reply):
        self.reply = reply

    def chat(self, messages, **params):
        from jitlab.protocol import Completion
        return Completion(self.reply)
