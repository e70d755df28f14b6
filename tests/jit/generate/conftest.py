"""Fixtures for generator tests: toy task, B0 references, handles on scripted doubles (test doubles, not models)."""
import pytest

from jitlab.envs.base import get_suite
from jitlab.jit.bank import Bank, BankConfig
from jitlab.jit.generate import Reference
from jitlab.runtime import Budget, LLMHandle


@pytest.fixture
def toy_task():
    return get_suite("toy").tasks("test")[0]


@pytest.fixture
def references(tmp_path, toy_task):
    bank = Bank.create(tmp_path / "bank.sqlite", config=BankConfig(retrieval="bm25"))
    refs = [Reference(e.sha, e.name, e.description, bank.files(e.sha), float(e.score or 0), e.n_evals > 0,
                      e.mean_reward) for e in bank.retrieve(toy_task.description, k=3)]
    bank.close()
    return refs


@pytest.fixture
def handle():
    """handle(backbone, phase) -> an LLMHandle without cache."""
    return lambda backbone, phase="generate": LLMHandle(backbone, Budget(max_tokens=10 ** 7), None, seed=0, phase=phase)
