"""Fixtures for training tests: a toy-suite seed grid in miniature, run here with scripted backbones (test doubles,
not models), and a bank holding one hand-recorded compose evaluation."""
import pytest

RUNS = [("react", "scripted:pick-first", "dev"), ("resum", "scripted:pick-first", "dev"),
        ("hiagent", "scripted:pick-hash", "dev"), ("random", "scripted:pick-first", "dev"),
        ("react", "scripted:pick-hash", "test")]
COMPOSE = {"M": "FullHistory", "P": "RoadmapPlanner", "F": "FullRegistry", "A": "ReActAction", "prompt": "terse"}


@pytest.fixture
def evidence(tmp_path, monkeypatch):
    """(run dirs, bank path, the compose plan): the seed grid in miniature plus a compose sample recorded in a bank."""
    monkeypatch.setenv("JITLAB_BANK_RETRIEVAL", "bm25")
    from jitlab.envs.base import get_suite
    from jitlab.jit.bank import Bank, Evaluation
    from jitlab.jit.generate.plan import plan_files
    from jitlab.runner import RunConfig, run
    runs = []
    for harness, backbone, split in RUNS:
        out = tmp_path / "runs" / f"{harness}-{backbone.split(':')[1]}-{split}"
        run(RunConfig(suite="toy", harness=harness, backbone=backbone, split=split, limit=3, max_steps=6,
                      out=str(out), quiet=True))
        runs.append(str(out))
    bank = Bank.create(tmp_path / "compose.sqlite", seeds=False)
    sha = bank.add(plan_files(COMPOSE, "compose"), generator="compose")
    task = get_suite("toy").tasks("dev")[2]
    bank.update(sha, [Evaluation.for_task(task, success=True, reward=1.0, tokens=700, cost=0.0007, tool_calls=3)])
    bank.close()
    return runs, str(tmp_path / "compose.sqlite"), COMPOSE


@pytest.fixture(scope="session")
def embedded_tokens():
    """Counts the tokens of chat ``messages`` as the embedded SmolLM2 sees them (its own tokenizer and chat template);
    skips when the model package is missing."""
    from jitlab.errors import ModelPackageMissing
    from jitlab.llm.hf import embedded_gguf_path
    try:
        gguf = embedded_gguf_path()
    except ModelPackageMissing as exc:
        pytest.skip(str(exc))
    from transformers import AutoTokenizer

    from jitlab.llm.hf.load import materialize_gguf
    tokenizer = AutoTokenizer.from_pretrained(materialize_gguf(gguf), local_files_only=True)

    def count(messages):
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])
    return count
