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


