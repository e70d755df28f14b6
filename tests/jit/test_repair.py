"""Validation and bounded repair: a scripted backbone (a test double) fixes a seeded syntax error and an
interface mismatch within 2 rounds; a hopeless candidate is given up after 2; every transition is logged
once; an InfraError never reaches repair."""
import json

import pytest

from jitlab.envs.base import get_suite
from jitlab.errors import InfraError
from jitlab.harness import read_files, seed_bank_dir
from jitlab.jit.generate import Candidate, get_generator
from jitlab.jit.repair import (
    RepairConfig,
    RepairLog,
    dev_task_for,
    validate_and_repair,
    validate_files,
)
from jitlab.llm.scripted import ScriptedBackbone, get_scripted
from jitlab.resolve import resolve_file
from jitlab.runtime import Budget, LLMHandle

GOOD_ACTION = '''from jitlab.modules.basic import ReActAction


class Action(ReActAction):
    pass
'''
SYNTAX_ERROR = "from jitlab.modules.basic import ReActAction\n\n\nclass Action(ReActAction:\n    pass\n"
WRONG_CLASS = "from jitlab.modules.basic import ReActAction\n\n\nclass Actor(ReActAction):\n    pass\n"
NO_ACT = "class Action:\n    def reset(self, ctx):\n        pass\n"
RAISES = '''from jitlab.modules.basic import ReActAction


class Action(ReActAction):
    def act(self, context, ctx):
        raise ValueError("seeded runtime error")
'''


@pytest.fixture
def config():
    from jitlab.sandbox import probe
    return RepairConfig(max_rounds=2, smoke_steps=2, allow_unisolated=not probe()[0])


@pytest.fixture
def toy():
    suite = get_suite("toy")
    task = suite.tasks("test")[0]
    return suite, task, dev_task_for(suite, task)


def _new_llm(backbone):
    return lambda phase: LLMHandle(backbone, Budget(max_tokens=10 ** 6), None, seed=0, phase=phase)


def _candidate(action: str) -> Candidate:
    files = read_files(seed_bank_dir() / "react")
    return Candidate({**files, "action.py": action}, "code:scripted:fixer")


def _fixer(*replies):
    """A scripted repairer: the i-th repair call answers replies[i] (the last one repeats)."""
    calls = []

    def responder(messages):
        calls.append(messages[-1]["content"])
        return f'<file name="action.py">\n{replies[min(len(calls), len(replies)) - 1]}</file>'
    return ScriptedBackbone(responder, name="fixer"), calls


def test_dev_task_is_never_the_task_itself(toy):
    suite, task, dev = toy
    assert dev.split == "dev" and dev.id != task.id
    assert dev_task_for(suite, suite.tasks("dev")[0]).id != suite.tasks("dev")[0].id


def test_valid_harness_passes_load_and_smoke(toy, config, tmp_path):
    suite, _, dev = toy
    v = validate_files(_candidate(GOOD_ACTION).files, dev, suite, _new_llm(get_scripted("pick-first"))("select"),
                       config, tmp_path)
    assert v.ok and v.stage == "passed" and v.smoke["steps"] == 2
    assert "success" not in v.smoke and "reward" not in v.smoke   # selection never sees scores


def test_runtime_error_is_caught_by_the_smoke_episode(toy, config, tmp_path):
    suite, _, dev = toy
    v = validate_files(_candidate(RAISES).files, dev, suite, _new_llm(get_scripted("look"))("select"), config, tmp_path)
    assert not v.ok and v.stage == "smoke"
    assert v.diagnostic["kind"] == "runtime_error" and "seeded runtime error" in v.diagnostic["message"]


def test_syntax_error_fixed_in_one_round(toy, config, tmp_path):
    suite, task, dev = toy
    backbone, calls = _fixer(GOOD_ACTION)
    log = RepairLog(tmp_path / "repairs.jsonl")
    out = validate_and_repair(_candidate(SYNTAX_ERROR), get_generator("code:scripted:fixer"), task.public(), dev, suite,
                              _new_llm(backbone), config, tmp_path / "c", log)
    assert out.ok and out.rounds == 1
    assert "parse_error" in calls[0] and "action.py" in calls[0]      # the diagnostic reached the repair prompt
    rows = log.read()
    assert len(rows) == 1 and rows[0]["outcome"] == "fixed" and rows[0]["diagnostic"]["kind"] == "parse_error"
    assert rows[0]["broken_files"]["action.py"] == SYNTAX_ERROR                  # does not parse: kept as written
    assert rows[0]["fixed_files"]["action.py"] == resolve_file(GOOD_ACTION, "action.py")   # stored resolved


def test_interface_mismatch_fixed_in_the_second_round(toy, config, tmp_path):
    suite, task, dev = toy
    backbone, _ = _fixer(NO_ACT, GOOD_ACTION)
    log = RepairLog(tmp_path / "repairs.jsonl")
    out = validate_and_repair(_candidate(WRONG_CLASS), get_generator("code:scripted:fixer"), task.public(), dev, suite,
                              _new_llm(backbone), config, tmp_path / "c", log)
    assert out.ok and out.rounds == 2
    rows = log.read()
    assert [r["outcome"] for r in rows] == ["still_broken", "fixed"]
    assert rows[0]["diagnostic"]["kind"] == "interface_mismatch" and rows[1]["diagnostic"]["kind"] == "interface_mismatch"
    assert rows[0]["fixed_sha"] == rows[1]["broken_sha"]


def test_gives_up_cleanly_after_two_rounds(toy, config, tmp_path):
    suite, task, dev = toy
    backbone, calls = _fixer(SYNTAX_ERROR, WRONG_CLASS)
    log = RepairLog(tmp_path / "repairs.jsonl")
    out = validate_and_repair(_candidate(WRONG_CLASS), get_generator("code:scripted:fixer"), task.public(), dev, suite,
                              _new_llm(backbone), config, tmp_path / "c", log)
    assert not out.ok and out.rounds == 2 and len(calls) == 2
    assert out.validation.diagnostic["kind"] in ("parse_error", "interface_mismatch")
    assert [r["outcome"] for r in log.read()] == ["still_broken", "still_broken"]


def test_a_reply_without_file_blocks_is_a_parse_error_not_a_copied_reference(toy, config, tmp_path):
    from jitlab.harness import harness_sha
    from jitlab.jit.generate import Reference
    suite, task, dev = toy
    files = read_files(seed_bank_dir() / "react")
    ref = Reference(harness_sha(files), "react", "ReAct", files)
    gen = get_generator("code:scripted:reply:I would use a ReAct loop.")
    backbone = get_scripted("reply:I would use a ReAct loop.")
    cand = gen.generate(task.public(), [ref], _new_llm(backbone)("generate"))
    assert cand.meta["parsed_files"] == [] and len(cand.meta["fallback_files"]) == 6
    log = RepairLog(tmp_path / "repairs.jsonl")
    out = validate_and_repair(cand, gen, task.public(), dev, suite, _new_llm(backbone), config, tmp_path / "c", log)
    assert not out.ok and out.rounds == 2 and out.validation.diagnostic["kind"] == "parse_error"
    assert [r["outcome"] for r in log.read()] == ["unchanged", "unchanged"]
    assert "no <file name=...> block" in log.read()[0]["diagnostic"]["message"]


def test_compose_repair_repicks_the_failing_module(toy, config, tmp_path):
    suite, task, dev = toy
    backbone = get_scripted("pick-first")
    gen = get_generator("compose", strategy="score")
    cand = gen.generate(task.public(), [], _new_llm(backbone)("generate"))
    broken = Candidate({**cand.files, "action.py": RAISES}, "compose", meta=cand.meta)
    out = validate_and_repair(broken, gen, task.public(), dev, suite, _new_llm(backbone), config, tmp_path / "c")
    assert out.ok and out.rounds == 1 and out.candidate.meta["repaired_role"] == "A"


def test_infra_error_never_enters_repair(toy, config, tmp_path, monkeypatch):
    import jitlab.sandbox
    from jitlab.sandbox import SandboxSetupError

    def broken_sandbox(*args, **kwargs):
        raise SandboxSetupError("bubblewrap vanished (test)")
    monkeypatch.setattr(jitlab.sandbox, "validate", broken_sandbox)
    suite, task, dev = toy
    backbone, calls = _fixer(GOOD_ACTION)
    with pytest.raises(InfraError):
        validate_and_repair(_candidate(SYNTAX_ERROR), get_generator("code:scripted:fixer"), task.public(), dev, suite,
                            _new_llm(backbone), config, tmp_path / "c", RepairLog(tmp_path / "r.jsonl"))
    assert calls == []
    assert RepairLog(tmp_path / "r.jsonl").read() == []


def test_repair_log_is_append_only_idempotent_and_survives_a_torn_line(tmp_path):
    path = tmp_path / "repairs.jsonl"
    log = RepairLog(path)
    assert log.append({"task_id": "t", "round": 1, "broken_sha": "a", "fixed_sha": "b", "diagnostic": {"kind": "x"}})
    assert not log.append({"task_id": "t", "round": 1, "broken_sha": "a", "fixed_sha": "b", "diagnostic": {"kind": "x"}})
    with open(path, "a") as fh:
        fh.write('{"torn": ')                       # a writer killed mid-line
    log2 = RepairLog(path)                          # a resumed run
    assert not log2.append({"task_id": "t", "round": 1, "broken_sha": "a", "fixed_sha": "b", "diagnostic": {"kind": "x"}})
    assert log2.append({"task_id": "t", "round": 2, "broken_sha": "b", "fixed_sha": "c", "diagnostic": {"kind": "y"}})
    assert [r["round"] for r in log2.read()] == [1, 2]
    assert all(json.loads(line) for line in path.read_text().splitlines() if not line.startswith('{"torn'))
