"""Plan generator: seeds read back into plans, plans render and check out, a bad plan is a parse_error that repair
fixes, and ``plan:<backbone>`` is a registered generator that jit accepts. Backbones are scripted test doubles."""
import json

import pytest

from jitlab.errors import ConfigError, UnknownName
from jitlab.harness import HARNESS_FILES, read_files, seed_bank_dir, seed_names
from jitlab.jit.generate import get_generator
from jitlab.jit.generate.library import choices_of
from jitlab.jit.generate.plan import (
    PlanError,
    check_plan,
    parse_plan,
    plan_files,
    plan_of,
    plan_text,
)
from jitlab.llm.scripted import ScriptedBackbone, get_scripted

GOOD = {"M": "PeriodicSummaryMemory", "P": "NoPlanner", "F": "FullRegistry", "A": "ReActAction", "prompt": "goal",
        "params": {"M": {"every_k": 4}}}


def test_every_library_seed_is_a_plan_that_renders_back_to_itself():
    plans = {}
    for name in seed_names():
        plan = plan_of(read_files(seed_bank_dir() / name))
        if name == "random":  # its action is a file of its own, not a library module
            assert plan is None
            continue
        assert plan is not None, name
        assert plan_of(plan_files(plan)) == plan, name
        plans[name] = plan
    assert plans["react"] == {"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "ReActAction",
                              "prompt": "seed:react"}
    assert plans["oagent"]["params"]["M"]["every_k"] == 6
    assert len(plan_text(plans["oagent"])) < 300


def test_the_small_model_harnesses_read_back_as_plans_with_their_own_prompts():
    """Issue 30: their episodes are Stage I's teacher evidence, so their designs must read back as plans (their own
    prompts are ``seed:small_model/<name>``), the navigator's too: its action sets a tuple of strings (``demote: ()``),
    which a plan's JSON writes as a list."""
    from jitlab.harness import small_model_names
    plans = {name: plan_of(read_files(seed_bank_dir() / name)) for name in small_model_names()}
    assert plans["small_model/explorer"] == {
        "M": "FullHistory", "P": "GroundedPlanner", "F": "FullRegistry", "A": "LikelihoodAction",
        "prompt": "seed:small_model/explorer", "params": {"A": {"info_last": False}, "M": {"max_chars": 2000}}}
    assert plans["small_model/sql"]["A"] == "SqlAction" and plans["small_model/sql"]["prompt"] == "seed:small_model/sql"
    assert plans["small_model/realised_react"]["prompt"] == "seed:react"    # ReAct's prompt: no name of its own
    assert plans["small_model/navigator"]["params"]["A"] == {"state": "text", "demote": ()}
    for name, plan in plans.items():
        assert plan is not None, name
        assert plan_of(plan_files(plan)) == plan, name
        assert plan_of(plan_files(json.loads(plan_text(plan)))) == plan, name   # through the JSON a generator writes
    bad = json.loads(plan_text(plans["small_model/navigator"]))
    bad["params"]["A"]["demote"] = ["look", 3]
    with pytest.raises(PlanError, match="LikelihoodAction.demote must be a list of strings"):
        check_plan(bad)


def test_a_plan_renders_the_five_files_with_its_parameters():
    files = plan_files(GOOD)
    assert set(HARNESS_FILES) <= set(files)
    choices = choices_of(files)
    assert choices["M"].path.endswith(":PeriodicSummaryMemory") and choices["M"].params == {"every_k": 4}
    for name in ("memory.py", "planning.py", "tool_policy.py", "action.py"):
        compile(files[name], name, "exec")


@pytest.mark.parametrize("change,message", [
    ({"M": "NoSuchMemory"}, "M must be one of"),
    ({"prompt": "shout"}, "prompt must be one of"),
    ({"params": {"M": {"every_k": "four"}}}, "every_k must be int"),
    ({"params": {"M": {"nope": 1}}}, "has no parameter 'nope'"),
    ({"colour": "red"}, "unknown plan key"),
    ({"M": "MultiScaleFoldingMemory", "params": {}}, "only works with ReActFoldAction as A"),
])
def test_check_plan_names_what_is_wrong(change, message):
    with pytest.raises(PlanError, match=message):
        check_plan({**GOOD, **change})


def test_parse_plan_finds_the_object_in_chatter_and_reports_bad_json():
    assert parse_plan('Sure! ```json\n' + json.dumps(GOOD) + '\n``` done') == GOOD
    with pytest.raises(PlanError, match="no JSON object"):
        parse_plan("I would use a ReAct loop.")
    with pytest.raises(PlanError, match="does not parse"):
        parse_plan('{"M": "FullHistory", ')


def test_generator_registered_and_prompt_lists_options_and_reference_plans(toy_task, references, handle):
    seen = []
    llm = handle(ScriptedBackbone(lambda m: seen.append(m) or json.dumps(GOOD), name="planner"))
    gen = get_generator("plan:scripted:planner", llm)
    cand = gen.generate(toy_task.public(), references, llm)
    prompt = seen[0][-1]["content"]
    assert toy_task.description in prompt and "PeriodicSummaryMemory" in prompt and "seed:react" in prompt
    assert any(f'"prompt": "seed:{r.name}"' in prompt for r in references)
    assert cand.meta["plan"] == GOOD and cand.meta["parsed_files"] and cand.generator == "plan:scripted:planner"
    assert choices_of(cand.files)["M"].params == {"every_k": 4}
    with pytest.raises(UnknownName, match="plan:<backbone>"):
        get_generator("plan:")
    with pytest.raises(ConfigError, match="--max-new-tokens must be >= 8"):
        get_generator("plan:scripted:x", max_new_tokens=0)


def test_an_unparseable_plan_is_a_parse_error_that_repair_fixes(tmp_path, handle):
    from jitlab.envs.base import get_suite
    from jitlab.jit.repair import RepairConfig, RepairLog, dev_task_for, validate_and_repair
    from jitlab.runtime import Budget, LLMHandle
    from jitlab.sandbox import probe
    suite = get_suite("toy")
    task = suite.tasks("test")[0]
    replies = iter(["I would use a ReAct loop.", json.dumps(GOOD)])
    actor = get_scripted("pick-first")  # the smoke episode's executor

    def responder(messages):
        if "Plan an agent harness" in messages[0]["content"]:
            return next(replies)
        return actor.chat(messages).text
    backbone = ScriptedBackbone(responder, name="planner")
    gen = get_generator("plan:scripted:planner")
    cand = gen.generate(task.public(), [], handle(backbone))
    assert cand.meta["parsed_files"] == [] and "no JSON object" in cand.meta["parse_error"]
    log = RepairLog(tmp_path / "repairs.jsonl")
    config = RepairConfig(max_rounds=2, smoke_steps=2, allow_unisolated=not probe()[0])
    out = validate_and_repair(cand, gen, task.public(), dev_task_for(suite, task), suite,
                              lambda phase: LLMHandle(backbone, Budget(max_tokens=10 ** 6), None, seed=0, phase=phase),
                              config, tmp_path / "c", log)
    first = log.read()[0]
    assert first["diagnostic"]["kind"] == "parse_error" and "no JSON object" in first["diagnostic"]["message"]
    assert out.ok and out.rounds == 1 and out.candidate.meta["plan"] == GOOD


def test_jit_accepts_a_plan_generator():
    from jitlab.jit.inference import JITConfig
    JITConfig(suite="toy", generator="plan:scripted:look").check()
    with pytest.raises(ConfigError, match="plan:<backbone>"):
        JITConfig(suite="toy", generator="planner").check()


def test_streaming_jit_runs_the_harness_a_plan_generator_planned(tmp_path):
    from jitlab.jit.inference import JITConfig, run_jit
    from jitlab.sandbox import probe
    from jitlab.store import load
    cfg = JITConfig(suite="toy", mode="streaming", generator="plan:scripted:reply:" + json.dumps(GOOD),
                    backbone="scripted:pick-first", limit=2, retrieval="bm25", cache=False, smoke_steps=2,
                    out=str(tmp_path / "jit"), quiet=True, allow_unisolated=not probe()[0])
    out = run_jit(cfg)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["valid_candidates"] == summary["candidates"] == 2
    eps = load(out)["episodes"]
    for extra in eps[eps["final"]]["extra"]:
        extra = json.loads(extra)
        assert extra["harness_generator"] == cfg.generator and extra["repair_rounds"] == 0
        files = read_files(out / extra["harness_dir"])
        assert plan_of(files) == GOOD


def test_the_plan_prompt_states_the_couplings_the_checker_enforces(toy_task):
    from jitlab.jit.generate.library import couplings, requirements
    from jitlab.jit.generate.plan import plan_messages
    prompt = plan_messages(toy_task.public(), [])[0]["content"]
    assert "IsolatedContextMemory (M) + RecursiveDAGPlanner (P) + RecursiveExecution (A): only together" in prompt
    assert "SqlAction (A) needs the tools execute_sql, commit_answer" in prompt
    assert "LikelihoodAction (A) works best with P GroundedPlanner" in prompt
    together = [line for line in couplings() if line.endswith("only together")]
    for path, needs in requirements().items():       # every hard coupling is stated, each group once
        names = [p.rpartition(":")[2] for p in (path, *needs.values())]
        assert sum(all(f"{n} (" in line for n in names) for line in together) == 1, path
    with pytest.raises(PlanError, match="only works with RecursiveExecution as A"):
        check_plan({**GOOD, "M": "IsolatedContextMemory", "P": "RecursiveDAGPlanner", "params": {}})


class _Recording:
    """A test double of a backbone: answers GOOD and keeps the decoding parameters of each call."""
    id = "recording"

    def __init__(self):
        self.params = []

    def chat(self, messages, **params):
        from jitlab.protocol import Completion
        self.params.append(params)
        return Completion(json.dumps(GOOD))


def test_candidates_after_the_first_are_samples_seeded_by_task_and_index(handle):
    tasks = [{"description": "Open the red door.", "tools": []}, {"description": "Count the rows.", "tools": []}]
    backbone = _Recording()
    llm = handle(backbone)
    gen = get_generator("plan:recording", llm, temperature=0.7)
    for task in tasks:
        for i in range(3):
            gen.generate(task, [], llm, index=i)
    first, *rest = backbone.params[:3]
    assert "temperature" not in first and "seed" not in first          # candidate 0: greedy
    assert all(p["temperature"] == 0.7 for p in rest)
    seeds = [p["seed"] for p in backbone.params if "seed" in p]
    assert len(set(seeds)) == 4                                         # per task and index: no two alike
    gen.generate(tasks[0], [], llm, index=1)
    assert backbone.params[-1]["seed"] == backbone.params[1]["seed"]    # reproducible
