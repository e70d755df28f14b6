"""The small_model/ harness family: resolved like the seeds, and run on their suites with scripted TEST DOUBLES."""
import ast
import sys

import pytest

from jitlab.envs import get_suite
from jitlab.harness import load_harness, seed_bank_dir, seed_names, small_model_names
from jitlab.llm.scripted import get_scripted
from jitlab.runtime import Budget, HarnessAgent, LLMHandle, run_episode

NAMES = {"small_model/likelihood": "textworld", "small_model/explorer": "textworld", "small_model/explorer_margin": "textworld",
         "small_model/navigator": "babyai", "small_model/sql": "dbbench", "small_model/realised_react": "textworld",
         "small_model/explorer_quantity": "twx"}
ALLOWED = set(sys.stdlib_module_names) | {"jitlab.protocol", "jitlab.harnesskit"}


def test_the_family_is_listed_apart_from_the_seeds():
    assert small_model_names() == sorted(NAMES)
    assert not set(NAMES) & set(seed_names())


@pytest.mark.parametrize("name", sorted(NAMES))
def test_the_resolved_harness_imports_only_the_stdlib_protocol_and_harnesskit(name):
    harness = load_harness(name)
    assert harness.folder == seed_bank_dir() / name
    for file in [f for f in ("memory.py", "planning.py", "tool_policy.py", "action.py", "hooks.py") if f in harness.files]:
        imported = {n.module for n in ast.walk(ast.parse(harness.files[file])) if isinstance(n, ast.ImportFrom)}
        assert {m if m.startswith("jitlab") else m.split(".")[0] for m in imported} <= ALLOWED, file
    desc = harness.description
    assert desc["lineage"] == ["small_model"] and desc["suites"] == [NAMES[name]] and desc["not_for"]


def _episodes(name, n, backbone="pick-first"):
    suite = get_suite(NAMES[name])
    harness, out = load_harness(name), []
    for spec in suite.tasks("dev")[:n]:
        llm = LLMHandle(get_scripted(backbone), Budget())
        env = suite.make_env(spec)
        decisions = []
        agent = HarnessAgent(harness, llm)
        decide = agent.decide
        agent.decide = lambda step, decide=decide, seen=decisions: seen.append(decide(step)) or seen[-1]
        try:
            out.append((run_episode(env, agent, llm, Budget()), decisions))
        finally:
            env.close()
    return out


@pytest.mark.parametrize("name,n", [("small_model/explorer", 2), ("small_model/navigator", 1), ("small_model/sql", 2),
                                    ("small_model/realised_react", 1)])
def test_each_harness_runs_and_records_who_decided_every_step(name, n):
    for result, decisions in _episodes(name, n):
        assert result.status == "ok", result.error
        assert decisions and all(d.data["decided_by"] in ("model_reply", "model_choice", "mechanism") for d in decisions)
        assert all(d.data.get("mechanism") for d in decisions if d.data["decided_by"] == "mechanism")


def test_the_sql_harness_sends_sql_and_commits_an_answer():
    for _, decisions in _episodes("small_model/sql", 2):
        assert decisions[-1].tool == "commit_answer"
        assert all(d.args["sql"].rstrip().endswith(";") for d in decisions if d.tool == "execute_sql")


def test_no_mechanism_names_a_suite_in_its_code():
    """A mechanism reads what the agent is given, never a suite-name switch: no string literal of the module library
    (its docstrings aside, which may say which suites a mechanism suits) holds a suite's name."""
    import re
    from pathlib import Path

    import jitlab.modules
    from jitlab.envs.base import SUITES
    suite = re.compile(r"\b(?:" + "|".join(map(re.escape, SUITES)) + r")\b", re.IGNORECASE)
    found = []
    for file in sorted(Path(jitlab.modules.__file__).parent.glob("*.py")):
        tree = ast.parse(file.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        found += [f"{file.name}:{n.lineno}: {n.value[:60]!r}" for n in ast.walk(tree) if isinstance(n, ast.Constant)
                  and isinstance(n.value, str) and id(n) not in docs and suite.search(n.value)]
    assert not found, found
