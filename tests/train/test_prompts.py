"""One plan prompt everywhere: Stage I's data, Stage III's groups and the held-out evaluation all show the policy the
references a B0 bank retrieves for the task, as JIT inference does (before, data1 trained with 3 references while
Stage III and the evaluation prompted with none, so a trained policy was scored on a prompt it never saw)."""
import json

from jitlab.envs.base import get_suite
from jitlab.jit.bank import Bank
from jitlab.jit.generate import prompt_hash, references
from jitlab.jit.generate.plan import plan_messages
from jitlab.sandbox import probe
from jitlab.train.evaluate import evaluate_generator
from jitlab.train.pipeline import PipelineConfig, k_references
from jitlab.train.stage3 import prompt_rows


def test_evaluation_and_stage3_send_stage1s_prompt_with_its_references(tmp_path):
    task = get_suite("toy").tasks("dev")[0]
    with Bank.create(tmp_path / "b0.sqlite", seeds=True) as bank:
        refs = references(bank, task.description, 2)
        stage1_prompt = plan_messages(task.public(), refs)          # what jitlab.train.data writes for this task
        [row] = prompt_rows([task], bank, 2)
    assert len(refs) == 2 and all(r.name in stage1_prompt[0]["content"] for r in refs)
    assert row["prompt"] == stage1_prompt

    # the policy here is a scripted test double (not a model): only the prompt it was sent is checked
    summary = evaluate_generator("scripted:pick-first", tmp_path / "eval", suite="toy", split="dev", limit=1, rounds=0,
                                 max_new_tokens=16, k_references=2, allow_unisolated=not probe()[0])
    [record] = [json.loads(line) for line in (tmp_path / "eval" / "tasks.jsonl").read_text().splitlines()]
    assert summary["k_references"] == 2 and record["references"] == [r.name for r in refs]
    assert record["prompt_hash"] == prompt_hash(stage1_prompt)


def test_the_pipeline_takes_k_from_stage1_data():
    assert k_references(PipelineConfig()) == 3
    assert k_references(PipelineConfig(data1={"k_references": 0})) == 0


def test_code_format_evaluation_sends_stage1s_code_prompt(tmp_path):
    from jitlab.train.common import policy_generator
    task = get_suite("toy").tasks("dev")[0]
    with Bank.create(tmp_path / "b0.sqlite", seeds=True) as bank:
        refs = references(bank, task.description, 2)
        [row] = prompt_rows([task], bank, 2, "code", 0)
    prompt = policy_generator("code", code_references=0).messages(task.public(), refs)
    assert row["prompt"] == prompt and row["nearest"] == refs[0].files
    # the policy is a scripted test double (not a model): its reply holds no file block, so it is not parsed
    summary = evaluate_generator("scripted:pick-first", tmp_path / "eval", suite="toy", split="dev", limit=1, rounds=0,
                                 max_new_tokens=16, k_references=2, format="code", code_references=0,
                                 allow_unisolated=not probe()[0])
    [record] = [json.loads(line) for line in (tmp_path / "eval" / "tasks.jsonl").read_text().splitlines()]
    assert record["prompt_hash"] == prompt_hash(prompt) and summary["format"] == "code"
    assert not record["parsed"] and not record["valid_first"] and record["final_kind"] == "parse_error"


def test_concurrent_evaluation_records_the_same_tasks_in_order(tmp_path):
    # the policy is a scripted test double (not a model)
    kwargs = dict(suite="toy", split="dev", limit=3, rounds=1, max_new_tokens=16, k_references=1,
                  allow_unisolated=not probe()[0])
    one = evaluate_generator("scripted:pick-first", tmp_path / "one", **kwargs)
    three = evaluate_generator("scripted:pick-first", tmp_path / "three", concurrency=3, **kwargs)
    read = lambda name: [json.loads(line) for line in (tmp_path / name / "tasks.jsonl").read_text().splitlines()]
    assert read("one") == read("three") and one == three and len(read("one")) == 3
