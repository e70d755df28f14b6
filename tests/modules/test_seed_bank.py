"""The 13 seed harnesses: load, describe themselves, and run on every suite with scripted TEST DOUBLES."""
import ast
import sys

import pytest

from jitlab.envs import get_suite
from jitlab.harness import harness_sha, load_harness, read_files, regenerate_seeds, seed_bank_dir, seed_names, seed_sources_dir
from jitlab.llm.scripted import get_scripted
from jitlab.resolve import resolve_files
from jitlab.runtime import Budget, HarnessAgent, LLMHandle, run_episode

SEEDS = ["react", "plan_and_execute", "resum", "flash_searcher", "gam", "memobrain", "aggagent", "oagent",
         "agentfold", "hiagent", "deepagent", "roma", "aorchestra"]


def _run(name, suite_name, backbone="pick-hash", n=2):
    suite = get_suite(suite_name)
    harness = load_harness(name)
    results = []
    for spec in suite.tasks("dev")[:n]:
        llm = LLMHandle(get_scripted(backbone), Budget())
        env = suite.make_env(spec)
        try:
            results.append(run_episode(env, HarnessAgent(harness, llm), llm, Budget()))
        finally:
            env.close()
    return results


def test_all_thirteen_seeds_are_in_the_bank():
    assert set(SEEDS) <= set(seed_names())


@pytest.mark.parametrize("name", SEEDS)
def test_seed_description_names_paper_and_modules(name):
    h = load_harness(name)
    desc = h.description
    assert desc["name"] == name and desc["lineage"] == ["seed"] and desc["good_for"]
    assert set(desc["modules"]) == {"M", "P", "F", "A"} and all(desc["modules"].values())
    if name != "react":            # react's description predates the mapping form
        assert desc["paper"]["title"] and desc["paper"]["authors"] and 2020 < int(desc["paper"]["year"]) < 2030


@pytest.mark.parametrize("name", SEEDS)
def test_seed_sources_are_thin_and_the_bank_holds_their_resolved_code(name):
    source = read_files(seed_sources_dir() / name)
    for file in ("memory.py", "planning.py", "tool_policy.py", "action.py"):
        assert "from jitlab.modules." in source[file] and len(source[file].splitlines()) <= 15, file
    h = load_harness(name)
    assert h.folder == seed_bank_dir() / name
    for file in ("memory.py", "planning.py", "tool_policy.py", "action.py"):
        assert "jitlab.modules" not in _imported_modules(h.files[file]), file
        assert _imported_modules(h.files[file]) <= ALLOWED_IMPORTS, file
    assert {"system", "step"} <= set(h.prompts)


def _imported_modules(text: str) -> set[str]:
    """Every module a file imports (at any depth: imports inside functions count)."""
    out = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m if m.startswith("jitlab") else m.split(".")[0] for m in out}


ALLOWED_IMPORTS = set(sys.stdlib_module_names) | {"jitlab.protocol", "jitlab.harnesskit"}


def test_checked_in_seeds_are_up_to_date():
    stale = regenerate_seeds(check=True)
    assert not stale, (f"seed_bank/ is out of date for {', '.join(stale)}: the library or jitlab/seeds changed; "
                       "run `jitlab harnesses regenerate` and commit seed_bank/")


def test_resolution_is_deterministic_and_idempotent():
    for name in SEEDS:
        source = read_files(seed_sources_dir() / name)
        first, second = resolve_files(source), resolve_files(dict(source))
        assert first == second and resolve_files(first) == first, name
        assert harness_sha(source) == harness_sha(first), name


def test_resolved_prompt_yaml_carries_the_library_templates_it_uses():
    prompts = load_harness("resum").prompts
    assert "summary" in prompts and "Evidence:" in prompts["summary"]
    assert "summary" not in load_harness("react").prompts      # no code of react renders it


def _record(folder, suite_name, n=2):
    """Episodes (step records, result) and every backbone request (chat and score) of ``n`` dev tasks."""
    suite = get_suite(suite_name)
    harness = load_harness(folder)
    episodes, requests = [], []
    for spec in suite.tasks("dev")[:n]:
        backbone = get_scripted("pick-hash")
        chat, score = backbone.chat, backbone.score
        backbone.chat = lambda messages, chat=chat, **params: requests.append(("chat", messages, params)) or chat(messages,
                                                                                                              **params)
        backbone.score = lambda messages, cands, score=score: requests.append(("score", messages, cands)) or score(messages,
                                                                                                                  cands)
        llm = LLMHandle(backbone, Budget())
        steps = []
        env = suite.make_env(spec)
        try:
            result = run_episode(env, HarnessAgent(harness, llm), llm, Budget(), on_step=steps.append)
        finally:
            env.close()
        episodes.append(([{k: v for k, v in s.items() if "wall" not in k and "latency" not in k} for s in steps],
                         {k: v for k, v in result.as_dict().items() if k not in ("wall_s", "time")}))   # timings
    return episodes, requests


@pytest.mark.parametrize("suite", ["textworld", "babyai", "dbbench"])
def test_resolved_seeds_behave_like_their_library_composition(suite):
    """pick-hash (not pick-first: it ignores memory and planning output) on 2 dev tasks: the resolved seed
    and the library-composed seed make the same decisions from the same prompts."""
    for name in SEEDS:
        composed = _record(seed_sources_dir() / name, suite)
        resolved = _record(seed_bank_dir() / name, suite)
        assert resolved[1] and resolved == composed, name
@pytest.mark.parametrize("name", SEEDS)
def test_seed_runs_toy_tasks(name):
    for r in _run(name, "toy"):
        assert r.status == "ok", r.error
        assert r.steps >= 1


@pytest.mark.parametrize("name", SEEDS)
def test_seed_survives_a_garbage_backbone(name):
    for r in _run(name, "toy", backbone="reply:<<?? 1. \n Action: \n>> ::"):
        assert r.status == "ok", r.error


@pytest.mark.parametrize("suite", ["babyai", "dbbench"])
@pytest.mark.parametrize("name", SEEDS)
def test_seed_runs_every_suite(name, suite):
    # "budget" is allowed: K-sample seeds (oagent, aggagent) can spend the default 60k tokens on a
    # 40-step BabyAI episode when the double's samples disagree; it is not a harness failure
    for r in _run(name, suite):
        assert r.status in ("ok", "budget"), r.error


@pytest.mark.slow
@pytest.mark.parametrize("name", SEEDS)
def test_seed_runs_textworld(name):
    # slow: the first use of a TextWorld task generates its game (~5 s each with tw-make)
    for r in _run(name, "textworld"):
        assert r.status == "ok", r.error


def test_composition_matches_the_descriptions():
    """Each seed's classes come from the library family its description names (a cheap Table 2 check)."""
    expected = {
        "plan_and_execute": ("FullHistory", "RoadmapPlanner", "FullRegistry", "ReActAction"),
        "resum": ("PeriodicSummaryMemory", "NoPlanner", "FullRegistry", "ReActAction"),
        "flash_searcher": ("FullHistory", "DAGPlanner", "CompletionGate", "DAGParallelAction"),
        "gam": ("MemoPageMemory", "NoPlanner", "FullRegistry", "ReActAction"),
        "memobrain": ("ReasoningGraphMemory", "NoPlanner", "FullRegistry", "ReActAction"),
        "aggagent": ("RolloutHistories", "NoPlanner", "FullRegistry", "MultiRolloutAggregation"),
        "oagent": ("PeriodicSummaryMemory", "RoadmapPlanner", "FullRegistry", "EnsembleVote"),
        "agentfold": ("MultiScaleFoldingMemory", "NoPlanner", "FullRegistry", "ReActFoldAction"),
        "hiagent": ("SubgoalWorkingMemory", "SubgoalPlanner", "FullRegistry", "ReActAction"),
        "deepagent": ("ThreeTierMemory", "NoPlanner", "ToolSearch", "MarkerAction"),
        "roma": ("IsolatedContextMemory", "RecursiveDAGPlanner", "FullRegistry", "RecursiveExecution"),
        "aorchestra": ("CoordinatorHistory", "NoPlanner", "AgentDelegation", "CoordinatorAction"),
    }
    for name, bases in expected.items():
        classes = load_harness(name).classes
        got = tuple(classes[k].__mro__[1].__name__ for k in ("memory", "planner", "policy", "action"))
        assert got == bases, name


@pytest.mark.slow
@pytest.mark.parametrize("name", SEEDS)
def test_seed_runs_in_the_sandbox(name):
    # slow: one sandboxed child (bubblewrap + seccomp) per episode
    from jitlab.sandbox.runner import SandboxedAgent
    suite = get_suite("toy")
    spec = suite.tasks("dev")[0]
    llm = LLMHandle(get_scripted("pick-hash"), Budget())
    agent = SandboxedAgent(name, llm)
    try:
        result = run_episode(suite.make_env(spec), agent, llm, Budget())
    finally:
        agent.close()
    assert result.status == "ok", result.error
