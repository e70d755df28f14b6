"""The six case-study harnesses (JIT-Agent Figs. 7, 8, A.1-A.4) and their library mechanisms, driven through the
real runtime loop with ScriptedBackbone TEST DOUBLES: each design's defining mechanism, the folders themselves
(not seeds, regenerated and resolved like them, runnable by name) and a sandbox validation of each."""
import re

import pytest

from jitlab.envs import get_suite
from jitlab.harness import (
    case_study_names,
    load_harness,
    read_files,
    regenerate_seeds,
    resolve,
    seed_bank_dir,
    seed_names,
    seed_sources_dir,
)
from jitlab.llm.scripted import get_scripted, listed_options
from jitlab.modules.case_studies import (
    ArtifactMemory,
    BoundedDAGExecutor,
    BoundedDAGPlanner,
    DelegationInterceptPolicy,
    EvidenceChecklistMemory,
    EvidenceGatedPolicy,
    EvidenceMatrixMemory,
    FactGraphMemory,
    HierarchicalFoldMemory,
    MatrixCoveragePlanner,
    OrchestratorAction,
    PhaseAwareMemory,
    PhaseRegisterAction,
    PhaseToolPolicy,
    SpecChecklistPlanner,
    SubtaskTreePlanner,
    extract_facts,
)
from jitlab.protocol import Event
from jitlab.runtime import Budget, HarnessAgent, LLMHandle, run_episode

NAMES = ["gearbox", "origami", "palimpsest", "pegboard", "trapdoor", "turnstile"]


def last_user(messages):
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def goal_solver(messages):
    """Toy-suite double (as in conftest.py): the first goal command not yet done, else the first option."""
    text = "\n".join(m["content"] for m in messages)
    goal = re.findall(r"Goal: (.+?)\.", text)
    todo = [c for c in (goal[-1].split(" then ") if goal else []) if f"You {c}." not in text]
    options = listed_options(last_user(messages))
    choice = todo[0] if todo else (options[0] if options else "look")
    return f"Thought: next is {choice}.\nAction: {choice}"


def _caps(run):
    return [s["trace"]["capabilities"] for s in run.steps]


# ---------------------------------------------------------------------------------------------- the folders

def test_case_studies_are_their_own_folders_not_seeds():
    assert case_study_names() == [f"case_studies/{n}" for n in NAMES]
    assert not set(NAMES) & set(seed_names()) and "case_studies" not in seed_names()
    top = sorted(p.name for p in seed_sources_dir().iterdir() if (p / "description.yaml").is_file())
    assert seed_names() == top and "react" in top      # B0, baselines and Table 2 are unchanged
    assert resolve("case_studies/turnstile") == seed_bank_dir() / "case_studies" / "turnstile"
    assert resolve(seed_bank_dir() / "case_studies" / "gearbox") == (seed_bank_dir() / "case_studies" / "gearbox").resolve()


@pytest.mark.parametrize("name", NAMES)
def test_case_study_folder_is_thin_resolved_and_described(name):
    source = read_files(seed_sources_dir() / "case_studies" / name)
    for file in ("memory.py", "planning.py", "tool_policy.py", "action.py"):
        assert "from jitlab.modules." in source[file] and len(source[file].splitlines()) <= 15, file
    h = load_harness(f"case_studies/{name}")
    assert h.folder == seed_bank_dir() / "case_studies" / name and h.name == name
    for file in ("memory.py", "planning.py", "tool_policy.py", "action.py"):
        assert not re.search(r"^\s*(from|import) jitlab\.modules", h.files[file], re.M), file
    desc = h.description
    assert desc["lineage"] == ["case_study"] and re.fullmatch(r"Figure (7|8|A\.[1-4])", desc["paper"]["figure"])
    assert desc["purpose"] and desc["good_for"] and desc["not_for"] and set(desc["suites"]) <= {"textworld", "babyai", "dbbench"}
    assert set(desc["modules"]) == {"M", "P", "F", "A"}


def test_regenerate_covers_the_case_studies(tmp_path):
    assert not regenerate_seeds(check=True)            # checked-in case studies are up to date (seeds too)
    written = regenerate_seeds(out_dir=tmp_path)
    assert {f"case_studies/{n}" for n in NAMES} <= set(written)
    assert read_files(tmp_path / "case_studies" / "pegboard") == read_files(seed_bank_dir() / "case_studies" / "pegboard")
    stale_copy = tmp_path / "case_studies" / "pegboard" / "memory.py"
    stale_copy.write_text(stale_copy.read_text() + "\n# edited\n")
    assert regenerate_seeds(check=True, out_dir=tmp_path) == ["case_studies/pegboard"]


def test_catalogue_offers_the_case_study_modules():
    from jitlab.jit.generate.library import catalogue, requirements
    cat = catalogue()
    offered = {o.cls for options in cat.values() for o in options}
    assert {"PhaseRegisterAction", "EvidenceGatedPolicy", "EvidenceChecklistMemory", "BoundedDAGPlanner",
            "BoundedDAGExecutor", "OrchestratorAction", "FactGraphMemory", "EvidenceMatrixMemory",
            "HierarchicalFoldMemory"} <= offered
    reqs = requirements()  # couplings learned from the case studies too
    assert reqs["jitlab.modules.case_studies:PhaseToolPolicy"]["A"] == "jitlab.modules.case_studies:PhaseRegisterAction"


@pytest.mark.parametrize("suite_name", ["toy", "dbbench"])
@pytest.mark.parametrize("name", NAMES)
def test_case_study_runs_episodes(name, suite_name):
    suite, h = get_suite(suite_name), load_harness(f"case_studies/{name}")
    for spec in suite.tasks("dev")[:2]:
        llm = LLMHandle(get_scripted("pick-hash"), Budget())
        env = suite.make_env(spec)
        try:
            result = run_episode(env, HarnessAgent(h, llm), llm, Budget())
        finally:
            env.close()
        assert result.status == "ok" and result.steps > 0, (name, result.error)


@pytest.mark.parametrize("name", NAMES)
def test_case_study_validates_in_the_sandbox(name, tmp_path):
    from jitlab.jit.repair import RepairConfig, dev_task_for, validate_files
    from jitlab.sandbox import probe
    suite = get_suite("toy")
    dev = dev_task_for(suite, suite.tasks("test")[0])
    config = RepairConfig(max_rounds=0, smoke_steps=3, allow_unisolated=not probe()[0])
    llm = LLMHandle(get_scripted("pick-first"), Budget(max_tokens=10 ** 6), None, seed=0, phase="select")
    v = validate_files(read_files(seed_bank_dir() / "case_studies" / name), dev, suite, llm, config, tmp_path)
    assert v.ok and v.stage == "passed", v.diagnostic


# ---------------------------------------------------------------------------------------------- Palimpsest

def _dag_script(messages):
    text = last_user(messages)
    if "sub-tasks, one per line" in text:          # the dag / dag_revise templates
        return ("1. open door\n2. go east (after 1)\n3. take coin (after 2)\n4. go north (after 3)\n"
                "5. unlock chest (after 4)\n6. take key")
    return goal_solver(messages)


def test_dag_respects_its_width_and_depth_bounds(run):
    planner = BoundedDAGPlanner(max_width=2, max_depth=2, patience=1)
    action = BoundedDAGExecutor(max_parallel=2, max_depth=2)
    r = run(memory=ArtifactMemory(), planner=planner, action=action, responder=_dag_script)
    nodes = planner.dag.nodes
    assert len(nodes) == 6 and max(planner.depth(n) for n in nodes) == 2       # the 5-long chain was cut to depth 2
    assert nodes[3]["deps"] == [] and nodes[2]["deps"] == [1]                  # a too-deep node hangs from shallower ones
    rounds = r.agent.ctx.state["dag_rounds"]
    assert rounds and all(len(rnd) <= 2 for rnd in rounds) and any(len(rnd) == 2 for rnd in rounds)
    directives = [s["trace"]["directive"] for s in r.steps]
    ready_lines = [d.split("\n")[0] for d in directives if d.startswith("Ready")]
    assert ready_lines and all(line.count("[") <= 2 for line in ready_lines)          # at most max_width offered
    assert all(d.count("Ready sub-tasks:") <= 1 for d in directives)
    assert r.modules["memory"].artifacts                                       # results kept as reusable artifacts


# ---------------------------------------------------------------------------------------------- Trapdoor

def _delegating(messages):
    text = "\n".join(m["content"] for m in messages)
    if "What sub-task do you delegate" in text or "orchestrator" in messages[0]["content"]:
        if "delegate" in messages[0]["content"].split("To delegate")[0]:
            return "Delegate: look around | tools: act | context: the room"
        return "Thought: act myself.\nAction: look"
    return "Thought: looking.\nAction: look"   # the sub-agent never writes Finish: the bound must stop it


def test_delegated_call_runs_a_bounded_sub_agent_and_fills_the_fact_graph(run):
    action = OrchestratorAction(subagent_steps=2, max_delegations=2)
    prompts = load_harness("case_studies/trapdoor").prompts
    r = run(memory=FactGraphMemory(), policy=DelegationInterceptPolicy(), action=action, responder=_delegating,
            prompts=prompts)
    delegations = r.agent.ctx.state["delegations"]
    assert len(delegations) == 2 and all(d["steps"] <= 2 for d in delegations)
    assert [s["args"]["command"] for s in r.steps[:4]] == ["look"] * 4
    caps = _caps(r)
    assert "delegate" in caps[0] and caps[1] == ["act"]            # while a sub-agent runs, only its tools
    assert all("delegate" not in c for c in caps[4:])              # the delegation budget is spent
    edges = r.modules["memory"].edges
    assert any(src.startswith("sub1") for *_, src in edges)        # facts from the sub-agent's trajectory
    assert any(s == "you" and rel == "see" for s, rel, *_ in extract_facts("You see a door. The key is red.", "x"))


def test_a_sub_agent_that_reports_early_does_not_exceed_the_delegation_budget(run):
    def script(messages):
        system = messages[0]["content"]
        if "orchestrator" in system:
            if "delegate" in system.split("To delegate")[0]:
                return "Delegate: look around | tools: act"
            return "Thought: act myself.\nAction: look"
        if "Observation" in last_user(messages) or "look" in last_user(messages).split("Steps left")[0]:
            return "Finish: the room has a door"
        return "Thought: looking.\nAction: look"
    action = OrchestratorAction(subagent_steps=3, max_delegations=2)
    r = run(memory=FactGraphMemory(), policy=DelegationInterceptPolicy(), action=action, responder=script,
            prompts=load_harness("case_studies/trapdoor").prompts)
    delegations = r.agent.ctx.state["delegations"]
    assert len(delegations) == 2 and all(1 <= d["steps"] < 3 for d in delegations)
    assert ("room", "has", "a door", "sub1") in r.modules["memory"].edges   # the report's fact, with its source


# ---------------------------------------------------------------------------------------------- Origami

def test_fold_replaces_only_the_active_context(make_ctx):
    ctx = make_ctx(responder=lambda m: "The door was opened and the hall reached.")
    mem = HierarchicalFoldMemory()
    mem.reset(ctx)
    mem.update(Event("observation", "You are in a room.", 0), ctx)
    ctx.state["subtask"] = {"id": 1, "text": "open the door"}
    mem.view(ctx)
    for step, text in ((1, "You open door."), (2, "You go east.")):
        mem.update(Event("action", "act", step), ctx)
        mem.update(Event("observation", text, step), ctx)
    ctx.state["subtask"] = {"id": 2, "text": "take the coin"}
    view = mem.view(ctx)                                            # fold step for subtask 1
    traj1 = list(mem.trajectories[1])
    assert mem.artifacts == {1: "The door was opened and the hall reached."} and mem.active == []
    assert len(traj1) == 5 and "You go east." not in view.text.split("Now:")[0].split("Active context:")[1]
    mem.update(Event("action", "act", 3), ctx)
    mem.update(Event("observation", "You take coin.", 3), ctx)
    ctx.state["subtask"] = {"id": 0, "text": "aggregate"}
    view = mem.view(ctx)                                            # fold subtask 2 before aggregation
    assert mem.trajectories[1] == traj1 and mem.artifacts[1] == "The door was opened and the hall reached."
    assert set(mem.artifacts) == {1, 2} and mem.active == [] and mem.folds == 2
    assert "subtask 1:" in view.text and "subtask 2:" in view.text


def test_origami_planner_and_fold_memory_run_together(run):
    def script(messages):
        if "sub-goals, one per line" in last_user(messages):
            return "1. do the first command\n2. do the second command"
        return goal_solver(messages)
    r = run(memory=HierarchicalFoldMemory(), planner=SubtaskTreePlanner(subtask_steps=2), responder=script)
    assert r.modules["memory"].folds >= 1 and r.agent.ctx.state["subtask"]["id"] in (0, 2)


# ---------------------------------------------------------------------------------------------- Turnstile

def _sql_script(messages):
    text = last_user(messages)
    if "Checklist:" in text and "Do not answer yet" in text:
        return "Specification: one number.\nChecklist:\n1. the table's columns\n2. the rows that match"
    tools = messages[0]["content"]
    if "- commit_answer" in tools:
        return "Thought: done.\nAction: commit_answer(42)"
    return "Thought: look.\nAction: execute_sql(SELECT 1)"


def test_final_answer_tool_is_hidden_until_the_checklist_is_complete(run):
    r = run(memory=EvidenceChecklistMemory(), planner=SpecChecklistPlanner(), policy=EvidenceGatedPolicy(),
            responder=_sql_script, suite=get_suite("dbbench"))
    caps = _caps(r)
    assert caps[0] == ["execute_sql"] and caps[1] == ["execute_sql"]          # two buckets to fill first
    assert caps[2] == ["execute_sql", "commit_answer"] and r.steps[2]["tool"] == "commit_answer"
    checklist = r.agent.ctx.state["checklist"]
    assert [c["source"] for c in checklist] == ["s1", "s2"] and r.agent.ctx.state["checklist_complete"]


def test_gate_stays_shut_without_evidence_until_the_last_steps(run):
    r = run(policy=EvidenceGatedPolicy(open_before_end=2), responder=lambda m: "Action: execute_sql(SELECT x FROM nowhere)",
            suite=get_suite("dbbench"))
    caps = _caps(r)
    limit = r.spec.max_steps
    assert all(c == ["execute_sql"] for c in caps[: limit - 3])
    assert "commit_answer" in caps[-1]


# ---------------------------------------------------------------------------------------------- Gearbox

def _phased(messages):
    text = last_user(messages)
    if "- commit_answer" in messages[0]["content"]:
        return "Thought: answer.\nAction: commit_answer(1)"
    if "Phase: verify" in text:
        return "Phase: answer\nThought: checked.\nAction: execute_sql(SELECT 2)"
    return "Thought: explore.\nAction: execute_sql(SELECT 1)"


def test_phase_register_switches_tools_and_memory_schema(run):
    action = PhaseRegisterAction(steps_per_phase=2)
    r = run(memory=PhaseAwareMemory(), policy=PhaseToolPolicy(), action=action, responder=_phased,
            suite=get_suite("dbbench"))
    log = r.agent.ctx.state["phase_log"]
    assert [p for _, p in log] == ["explore", "verify", "answer"]
    caps = _caps(r)
    answer_step = log[-1][0]
    assert all(c == ["execute_sql"] for c in caps[:answer_step])           # no final answer before the answer phase
    assert "commit_answer" in caps[-1] and r.steps[-1]["tool"] == "commit_answer"
    step_prompts = [last_user(p) for p in r.prompts]
    assert "Findings:" not in step_prompts[0] and "Observation:" in step_prompts[0]       # explore: transcript
    assert any("Findings:" in p and "Recent:" in p for p in step_prompts)                  # verify: findings+recent
    assert "Findings:" in step_prompts[-1] and "Recent:" not in step_prompts[-1]           # answer: findings only


# ---------------------------------------------------------------------------------------------- Pegboard

def test_evidence_matrix_records_a_source_id_per_cell(make_ctx):
    ctx = make_ctx()
    ctx.state.update(clues=["red colour", "heavy weight"], matrix_candidates=["apple", "brick"])
    mem = EvidenceMatrixMemory()
    mem.reset(ctx)
    for step, text in ((1, "The apple is red in colour."), (2, "The brick has a heavy weight."),
                       (3, "Nothing happens."), (4, "The brick is red colour too.")):
        mem.update(Event("action", "look", step), ctx)
        mem.update(Event("observation", text, step), ctx)
    cells = mem.cells
    assert set(cells) == {("apple", "red colour"), ("brick", "heavy weight"), ("brick", "red colour")}
    for (cand, _clue), cell in cells.items():
        assert cell["source"] in mem.sources and cell["value"] in mem.sources[cell["source"]]
        assert cand in mem.sources[cell["source"]].lower()
    assert cells[("brick", "red colour")]["source"] == "s4"
    assert ctx.state["coverage"] == pytest.approx(3 / 4) and "[s2]" in mem.view(ctx).text


def test_matrix_coverage_drives_the_switch_to_verification(run):
    def script(messages):
        text = last_user(messages)
        if "Clues:" in text and "Candidates:" in text:
            return "Clues:\n1. east\n2. chest\nCandidates:\n1. answer"
        return goal_solver(messages)
    planner = MatrixCoveragePlanner(verify_at=1.0)
    r = run(memory=EvidenceMatrixMemory(), planner=planner, policy=EvidenceGatedPolicy(state_key="verify"),
            responder=script, task=1)                   # toy task 1: go east, unlock chest, open door
    state = r.agent.ctx.state
    directives = [s["trace"]["directive"] for s in r.steps]
    assert directives[:2] == ["Find evidence for: east; chest", "Find evidence for: chest"]
    assert directives[2].startswith("Evidence matrix is covered") and state["verify"] and state["coverage"] == 1.0
    assert {k: v["source"] for k, v in state["matrix"].items()} == {"answer | east": "s1", "answer | chest": "s2"}


# ---------------------------------------------------------------------------------------------- open to JIT

def test_compose_samples_case_study_modules_into_loadable_coupled_harnesses(tmp_path):
    from jitlab.jit.generate.compose import ComposeConfig, ComposeGenerator
    from jitlab.jit.generate.library import ROLES, choices_of, requirements
    from jitlab.resolve import resolve_files
    suite = get_suite("toy")
    llm = LLMHandle(get_scripted("pick-hash"), Budget(max_tokens=10 ** 7), None, seed=0, phase="generate")
    gen = ComposeGenerator(llm, ComposeConfig(strategy="sample"))
    picked = []
    for i in range(30):
        cand = gen.generate(suite.tasks("test")[0].public(), [], llm, index=i)
        choices = choices_of(cand.files)
        mine = [c.path for r, c in choices.items() if r in ROLES and c.path.startswith("jitlab.modules.case_studies")]
        if not mine:
            continue
        for role, c in choices.items():                 # couplings learned from the case studies hold
            for other, path in (requirements().get(c.path, {}) if role in ROLES else {}).items():
                assert choices[other].path == path, (mine, other)
        folder = tmp_path / f"c{i}"
        folder.mkdir()
        for name, text in resolve_files(cand.files).items():
            (folder / name).write_text(text)
        h = load_harness(folder)
        run = LLMHandle(get_scripted("pick-hash"), Budget())
        env = suite.make_env(suite.tasks("dev")[0])
        assert run_episode(env, HarnessAgent(h, run), run, Budget()).status == "ok", mine
        picked += mine
    assert len(set(picked)) >= 3, picked               # the sampler reaches several of the new modules


def test_a_case_study_mechanism_combines_with_a_seed_module(tmp_path):
    from jitlab.jit.generate.library import Choice, choices_of, option, render_files
    from jitlab.resolve import resolve_files
    choices = choices_of(read_files(seed_bank_dir() / "case_studies" / "turnstile"))
    ensemble = option("EnsembleVote", "A")             # a seed module (sampled voting) under the evidence gate
    choices["A"] = Choice("A", "library", ensemble.path, {"k": 2}, label=ensemble.label)
    files = resolve_files(render_files(choices, name="turnstile-vote", lineage={"test": "combination"}))
    folder = tmp_path / "h"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    h = load_harness(folder)
    steps = []
    suite = get_suite("dbbench")
    llm = LLMHandle(get_scripted("pick-hash"), Budget())
    env = suite.make_env(suite.tasks("dev")[0])
    try:
        result = run_episode(env, HarnessAgent(h, llm), llm, Budget(), on_step=steps.append)
    finally:
        env.close()
    assert result.status == "ok" and h.classes["action"].__mro__[1].__name__ == "EnsembleVote"
    assert steps[0]["trace"]["capabilities"] == ["execute_sql"]     # the gate still holds back commit_answer
