"""Issue 42 part 3, a JIT that adapts per task: every generator path (compose from scratch, sample, copy, mutate,
crossover and repair; plan; code; the loop's fallback) refuses an option that does not fit the task it is for, by the
one fit rule (``library.misfit``: the tools the task gives the agent, never its suite, family or id), and the bank's
evidence is read per kind of task (``jitlab.jit.kind.task_kind``: the tool signature), so a text game's winning design
is no evidence for a SQL task.

The mixed stream is a TEST DOUBLE suite defined here: the toy suite's text-game chains (tool ``act(command)``)
interleaved with tiny SQL tasks (tools ``execute_sql(sql)`` and ``commit_answer(answer)``, an env that answers from a
dict) and grid-like chains whose ``act`` takes a closed set of commands (a BabyAI-style signature). Backbones are
scripted test doubles; the generators are the real ones."""
from __future__ import annotations

import json
import random

from jitlab.envs.base import SUITES, Score, TaskSpec, check_choice
from jitlab.envs.toy import ACT, ToyEnv, ToySuite
from jitlab.jit.bank import Bank, BankConfig, Evaluation
from jitlab.jit.generate import Reference, evidence, references
from jitlab.jit.generate.base import Candidate, resolved
from jitlab.jit.generate.code import CodeGenerator
from jitlab.jit.generate.compose import ComposeConfig, ComposeGenerator
from jitlab.jit.generate.library import (
    FITS,
    NO_HOOKS,
    Choice,
    choices_of,
    first_fitting,
    misfit,
    misfits,
    prompt_variants,
    render_files,
    variant_misfit,
)
from jitlab.jit.generate.plan import PlanError, PlanGenerator, check_plan
from jitlab.jit.inference import JITConfig, run_jit
from jitlab.jit.kind import task_kind
from jitlab.jit.repair import unfit
from jitlab.llm.scripted import ScriptedBackbone
from jitlab.protocol import Capability, Observation
from jitlab.store import load

LIKELIHOOD = "jitlab.modules.likelihood:LikelihoodAction"
SQL_ACTION = "jitlab.modules.sql:SqlAction"
INTERVENTION = "jitlab.modules.hooks:InterventionHooks"
REALISATION = "jitlab.modules.realisation:RealisationHooks"

EXECUTE_SQL = Capability("execute_sql", "Run one SQL statement on the task's table and see its rows.",
                         {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]})
COMMIT = Capability("commit_answer", "Commit the final answer and end the episode.",
                    {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]})
GRID_COMMANDS = ["turn left", "turn right", "go forward", "pick up"]
GRID_ACT = Capability("act", "Do one action in the grid: " + ", ".join(GRID_COMMANDS) + ".",
                      {"type": "object", "properties": {"command": {"type": "string", "enum": GRID_COMMANDS}},
                       "required": ["command"]})
# the SQL tasks' text opens with the toy game's own text, so that retrieval by text alone would hand them the game's
# designs: only the tools tell these tasks apart (what the fit rule and the kinds read)
SQL_TEXT = (ToySuite().tasks("test")[0].description + " Here the game is a table: answer the question with SQL. Table "
            "`people` has columns: `name`, `age`. Question: how old is {who}? Use execute_sql(sql) to query the table, "
            "then commit_answer(answer).")


def _sql_spec(split: str, i: int) -> TaskSpec:
    who, age = [("Ann", "31"), ("Bob", "42"), ("Cy", "7")][i % 3]
    return TaskSpec(id=f"sql-{split}-{i}", suite="toy-mixed", family="query", split=split,
                    description=SQL_TEXT.format(who=who), tools=[EXECUTE_SQL, COMMIT], max_steps=6,
                    data={"answer": age})


class SqlToyEnv:
    """TEST DOUBLE: a SQL task without a database (any statement gets the one row back); commit_answer scores."""

    def __init__(self, spec: TaskSpec):
        self.spec, self.answer = spec, None

    def reset(self, seed: int = 0) -> Observation:
        return Observation("The table is ready.")

    def step(self, tool: str, args: dict) -> Observation:
        if tool == "commit_answer":
            self.answer = str(args.get("answer", ""))
            return Observation("Answer committed.", done=True)
        if tool == "execute_sql":
            return Observation("name | age\nAnn | 31")
        return Observation(f"Unknown tool {tool!r}: use execute_sql(sql) or commit_answer(answer).")

    def score(self) -> Score:
        ok = self.answer == self.spec.data["answer"]
        return Score(success=ok, reward=float(ok))

    def close(self) -> None:
        pass


class MixedToySuite:
    """TEST DOUBLE suite: a stream interleaving the toy chains (``act(command)``), SQL tasks and grid chains (``act``
    with a closed command set), each task with its own tools; the stream's order alternates them."""
    name = "toy-mixed"
    version = "1"
    families = ["chain", "query", "grid"]
    splits = ["dev", "test"]
    reset_varies = False

    def tasks(self, split: str = "dev", family: str | None = None) -> list[TaskSpec]:
        check_choice("split", split, self.splits)
        check_choice("family", family, self.families)
        chains = ToySuite().tasks(split)
        out = []
        for i in range(3):
            chain = chains[i]
            out.append(TaskSpec(id=f"chain-{split}-{i}", suite=self.name, family="chain", split=split,
                                description=chain.description, tools=[ACT], max_steps=chain.max_steps, data=chain.data))
            out.append(_sql_spec(split, i))
            out.append(TaskSpec(id=f"grid-{split}-{i}", suite=self.name, family="grid", split=split,
                                description="Mission: pick up the key. You see the key 2 steps ahead. Actions: turn "
                                            "left, turn right, go forward, pick up.",
                                tools=[GRID_ACT], max_steps=chain.max_steps, data=chain.data))
        return [t for t in out if family in (None, t.family)]

    def make_env(self, spec: TaskSpec):
        return SqlToyEnv(spec) if spec.family == "query" else ToyEnv(spec)


def _public(spec: TaskSpec) -> dict:
    return spec.public()


SQL = _public(_sql_spec("test", 0))
GAME = _public(ToySuite().tasks("test")[0])
GRID = _public(MixedToySuite().tasks("test", "grid")[0])


class Likes(ScriptedBackbone):
    """TEST DOUBLE: the labels containing one of ``words`` score far above the rest (a backbone that wants them)."""

    def __init__(self, *words):
        super().__init__(lambda messages: "Action: look")
        self.words = words

    def score(self, messages, candidates):
        return [10.0 if any(w in c for w in self.words) else 0.0 for c in candidates]


def _game_design(task=GAME) -> dict:
    """A text game's design as the bank holds it: likelihood action, a prior planner, intervention hooks, the choose
    prompt (compose's own pick for the game, with the hooks forced to the intervention ones)."""
    cand = ComposeGenerator(Likes("likelihood", "grounded", "intervention"), ComposeConfig(strategy="score")).generate(
        task, [], index=0)
    choices = choices_of(cand.files)
    assert choices["A"].path == LIKELIHOOD and choices["H"].path == INTERVENTION, choices
    return cand.files


def _plain_design() -> dict:
    """The game design with a ReAct action, no hooks and the react prompt: a design that fits any task (resolved, as
    the bank stores it)."""
    return resolved(render_files(choices_of(_game_design()) | {
        "A": Choice("A", "library", "jitlab.modules.basic:ReActAction"), "H": Choice("H", "library", NO_HOOKS),
        "prompt": Choice("prompt", "variant", text=prompt_variants()["react"])}, name="plain", lineage={}))


def _ref(files: dict, sha: str, reward: float | None = 1.0) -> Reference:
    return Reference(sha * 8, f"design-{sha}", "", files, 1.0, reward is not None, reward)


def _fits(files: dict, task: dict) -> bool:
    return misfits(choices_of(files), task) == {}


# -- the fit rule and the kind ---------------------------------------------------------------------------------
def test_a_kind_is_the_tool_signature_never_the_suite_family_or_id():
    assert task_kind(GAME) == "act(command)"
    assert task_kind(GRID) == "act(command=turn left|turn right|go forward|pick up)"
    assert task_kind(SQL) == "commit_answer(answer) execute_sql(sql)" == task_kind(_sql_spec("dev", 1))
    renamed = {**SQL, "suite": "textworld", "family": "chain", "id": "chain-0", "description": "a text game"}
    assert task_kind(renamed) == task_kind(SQL)                          # what the agent is given, nothing else
    assert task_kind({"tools": []}) == "()"
    # the real suites: each is one kind, and the three differ (a stream of one suite reads its evidence as before)
    from jitlab.envs.base import get_suite
    kinds = {s: {task_kind(t) for t in get_suite(s).tasks("dev")} for s in ("babyai", "dbbench")}
    assert all(len(k) == 1 for k in kinds.values()) and len(set.union(*kinds.values())) == 2
    assert "act(command)" not in set.union(*kinds.values())              # TextWorld's act takes free text


def test_the_fit_rule_reads_only_the_tools_the_task_gives():
    assert misfit(LIKELIHOOD, GAME) is None and misfit(LIKELIHOOD, GRID) is None
    assert "needs the tool act" in misfit(LIKELIHOOD, SQL)
    # the realisation and intervention hooks declare no need: without act they pass every action through (a no-op)
    assert misfit(INTERVENTION, SQL) is None and misfit(REALISATION, SQL) is None
    assert misfit(SQL_ACTION, SQL) is None and "execute_sql, commit_answer" in misfit(SQL_ACTION, GAME)
    assert misfit("jitlab.modules.basic:ReActAction", SQL) is None       # no declared need: fits anything
    renamed = {**SQL, "suite": "textworld", "family": "coin_collector", "id": "tw-0"}
    assert all(misfit(p, renamed) == misfit(p, SQL) for p in FITS)
    # a prompt variant written for a mechanism fits where the mechanism does
    assert variant_misfit("sql", GAME) and variant_misfit("choose", SQL) and variant_misfit("react", SQL) is None
    assert variant_misfit("sql", SQL) is None and variant_misfit("choose", GAME) is None
    game = choices_of(_game_design())
    assert set(misfits(game, SQL)) == {"A", "prompt"} and misfits(game, GAME) == {}


# -- compose: each path refuses what does not fit ----------------------------------------------------------------
def test_compose_from_scratch_never_offers_an_option_the_task_cannot_use():
    """A backbone that wants the likelihood action (and its choose prompt) gets neither on a SQL task, in the greedy
    pick and in every sample; the same backbone gets it on the text game."""
    likes = Likes("likelihood", "choose")
    gen = ComposeGenerator(likes, ComposeConfig(strategy="score"))
    sql = gen.generate(SQL, [], index=0)
    assert choices_of(sql.files)["A"].path == SQL_ACTION and _fits(sql.files, SQL)
    sampled = ComposeGenerator(likes, ComposeConfig(strategy="sample"))
    for i in range(12):
        cand = sampled.generate({**SQL, "id": f"s{i}"}, [], index=i)
        assert _fits(cand.files, SQL) and "refused" not in cand.meta    # never offered, so nothing to refuse
    assert choices_of(gen.generate(GAME, [], index=0).files)["A"].path == LIKELIHOOD


def test_copy_refuses_a_reference_that_does_not_fit_and_refits_it():
    """Issue 42 (mixed stream): the bank's text-game entries were copied onto other tasks unchanged. A top reference
    that solved everything is still not copied onto a SQL task as is: its likelihood action is refused and re-picked
    (the rest of its design kept; the SQL action brings its own prompt); onto another text game it is copied
    unchanged."""
    files = _game_design()
    gen = ComposeGenerator(Likes("likelihood", "intervention"), ComposeConfig(strategy="copy"))
    same = gen.generate(GAME, [_ref(files, "a")], index=0)
    assert same.files == files and same.meta["strategy"] == "copy" and "refused" not in same.meta
    cand = gen.generate(SQL, [_ref(files, "a")], index=0)
    assert cand.files != files and _fits(cand.files, SQL)
    refused = {r["role"]: r for r in cand.meta["refused"]}
    assert set(refused) == {"A"} and refused["A"]["option"] == "LikelihoodAction"
    assert "needs the tool act" in refused["A"]["why"] and refused["A"]["now"] == SQL_ACTION
    mine = choices_of(cand.files)
    assert mine["A"].path == SQL_ACTION and mine["M"].path == choices_of(files)["M"].path    # the rest is kept
    assert cand.files["prompt.yaml"].startswith(prompt_variants()["sql"].rstrip())


def test_mutate_and_crossover_refit_a_parent_that_does_not_fit():
    """Issue 42 (mixed stream): DBBench tasks got mutations of the text game's design that kept its likelihood action
    (0 backbone calls, 15 steps without a statement). A mutation or a crossover of such parents is refitted to the
    task first, whichever role the mutation then moves."""
    game, other = _game_design(), _game_design({**GAME, "description": GAME["description"] + " Go north or east."})
    for strategy in ("mutate", "crossover"):
        gen = ComposeGenerator(Likes("likelihood", "intervention"), ComposeConfig(strategy=strategy, mutate_params=0.0))
        for i in range(16):
            cand = gen.generate({**SQL, "id": f"q{i}"}, [_ref(game, "a", 0.5), _ref(other, "b", 0.5)], index=0)
            assert _fits(cand.files, SQL), (strategy, cand.meta["note"])
            assert "A" in {r["role"] for r in cand.meta["refused"]}
            assert choices_of(cand.files)["A"].path == SQL_ACTION
        # on the kind of task the parents were made for, nothing is refused
        assert "refused" not in gen.generate(GAME, [_ref(game, "a", 0.5), _ref(other, "b", 0.5)], index=0).meta


def test_repair_refits_a_broken_candidate_that_does_not_fit():
    """A repair that re-picks another role (here M, named by the diagnostic) still refuses the likelihood action the
    broken candidate carried onto the SQL task."""
    broken_files = render_files({**choices_of(_game_design()), "prompt": choices_of(_game_design())["prompt"]},
                                name="broken", lineage={})
    gen = ComposeGenerator(Likes("likelihood"), ComposeConfig(strategy="score"))
    broken = Candidate(broken_files, "compose", 0, [], None, None, {"strategy": "score"})
    fixed = gen.repair(broken, {"kind": "runtime_error", "file": "memory.py", "message": "boom"}, SQL)
    assert fixed.meta["repaired_role"] == "M" and _fits(fixed.files, SQL)
    assert "A" in {r["role"] for r in fixed.meta["refused"]}


QUANTITY = "jitlab.modules.quantities:QuantityPlanner"
# the toy game's text with a goal that speaks of quantities (what the agent would be given by a sorting game)
SORTING = {**GAME, "id": "sort-0", "description": GAME["description"] + " Put the objects into the crate in order of "
           "quantity, smallest first."}


def test_an_option_with_needs_fits_only_where_the_task_text_uses_one_of_its_words():
    """The quantity planner (``Fit.needs``): off where the task's text speaks of no quantity or gives no command tool,
    called for where it does; no task of the three designed-for suites calls for it, in any split."""
    from jitlab.envs.base import get_suite
    from jitlab.jit.generate.library import called_for
    assert "says quantity or quantities" in misfit(QUANTITY, GAME) and called_for(GAME) == {}
    assert "needs the tool act" in misfit(QUANTITY, {**SQL, "description": SORTING["description"]})
    assert misfit(QUANTITY, SORTING) is None and called_for(SORTING) == {"P": QUANTITY}
    assert misfit(QUANTITY, {**SORTING, "suite": "x", "family": "y", "id": "z"}) is None     # the text, nothing else
    for suite in ("textworld", "babyai", "dbbench"):
        assert not any(called_for(t.public()) for split in get_suite(suite).splits for t in get_suite(suite).tasks(split))


def test_an_option_a_task_does_not_call_for_is_not_even_listed_in_its_scoring_prompt():
    """So adding the quantity planner leaves compose's scoring prompts (and the backbone's scores) of every task whose
    text speaks of no quantity as they were."""
    seen = []

    class Reads(Likes):
        def score(self, messages, candidates):
            seen.append((messages[-1]["content"], list(candidates)))
            return super().score(messages, candidates)

    gen = ComposeGenerator(Reads("likelihood"), ComposeConfig(strategy="score"))
    for task in (GAME, SORTING):
        seen.clear()
        gen.scores("P", task, gen.llm)
        (prompt, labels), = seen
        assert ("quantity planner" in labels) == ("quantity planner" in prompt.lower()) == (task is SORTING), labels


def test_the_plan_prompt_leaves_out_an_option_the_task_does_not_call_for():
    """The plan prompt of a task whose text speaks of no quantity names the quantity planner nowhere (options or
    couplings), so it reads as before the option was added; a task that speaks of quantities gets it."""
    from jitlab.jit.generate.library import unlisted
    from jitlab.jit.generate.plan import plan_messages
    assert "QuantityPlanner" not in plan_messages(GAME, [])[0]["content"]
    assert "QuantityPlanner (P) is only for tasks whose text says quantity" in plan_messages(SORTING, [])[0]["content"]
    # a SQL task whose question says "amount" (DBBench has three) meets the words but lacks the tool: still left out
    amount = {**SQL, "description": SQL["description"] + " What is the highest amount of points?"}
    assert unlisted(QUANTITY, amount) and "QuantityPlanner" not in plan_messages(amount, [])[0]["content"]


def test_copy_puts_in_the_option_the_task_calls_for_and_nothing_else_changes_elsewhere():
    """A design copied from tasks without quantities gets the quantity planner (and keeps its likelihood action) on a
    task that speaks of them; the same reference is copied unchanged onto the plain game, and a design that holds the
    planner is copied as is onto the next such task."""
    files = _game_design()
    gen = ComposeGenerator(Likes("likelihood", "intervention"), ComposeConfig(strategy="copy"))
    assert gen.generate(GAME, [_ref(files, "a")], index=0).files == files
    cand = gen.generate(SORTING, [_ref(files, "a")], index=0)
    mine = choices_of(cand.files)
    assert mine["P"].path == QUANTITY and mine["A"].path == LIKELIHOOD and mine["M"].path == choices_of(files)["M"].path
    assert [(r["role"], r["now"]) for r in cand.meta["refused"]] == [("P", QUANTITY)]
    again = gen.generate({**SORTING, "id": "sort-1"}, [_ref(cand.files, "b")], index=0)
    assert again.files == cand.files and "refused" not in again.meta
    for strategy in ("score", "mutate", "crossover"):
        other = ComposeGenerator(Likes("likelihood"), ComposeConfig(strategy=strategy, mutate_params=0.0))
        made = other.generate(SORTING, [_ref(files, "a", 0.5), _ref(_plain_design(), "b", 0.5)], index=0)
        assert choices_of(made.files)["P"].path == QUANTITY and _fits(made.files, SORTING), strategy


# -- plan and code ----------------------------------------------------------------------------------------------
LIKELIHOOD_PLAN = {"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "LikelihoodAction",
                   "hooks": "InterventionHooks", "prompt": "choose"}


def test_a_plan_naming_an_option_that_does_not_fit_is_a_parse_error_for_repair():
    assert check_plan(LIKELIHOOD_PLAN, GAME) and check_plan(LIKELIHOOD_PLAN)     # fits the game; no task: no fit check
    try:
        check_plan(LIKELIHOOD_PLAN, SQL)
    except PlanError as exc:
        assert exc.kind == "parse_error" and "does not fit this task" in str(exc)
        assert "A (action.py): LikelihoodAction needs the tool act" in str(exc)
        assert "prompt (prompt.yaml): the 'choose' prompt is written for LikelihoodAction" in str(exc)
    else:
        raise AssertionError("a plan with a likelihood action was accepted for a SQL task")
    reply = json.dumps(LIKELIHOOD_PLAN)
    game, seed = _ref(_game_design(), "a"), _ref(_plain_design(), "b")
    gen = PlanGenerator("plan:scripted", ScriptedBackbone(lambda m: reply))
    cand = gen.generate(SQL, [game, seed], index=0)
    assert cand.meta["parsed_files"] == [] and "does not fit" in cand.meta["parse_error"]
    assert cand.files == seed.files            # the nearest reference that fits, not the text game's design
    assert gen.generate(GAME, [game, seed], index=0).meta["plan"] == LIKELIHOOD_PLAN
    fixed = gen.repair(cand, {"kind": "parse_error", "message": cand.meta["parse_error"]}, SQL)
    assert fixed.meta["parsed_files"] == [] and "does not fit" in fixed.meta["parse_error"]   # still refused


def test_a_plan_gets_the_option_the_task_calls_for_with_its_partners_and_is_unchanged_elsewhere():
    """The plan generator's side of ``library.called_for``: a plan written without the quantity planner gets it (and
    the likelihood action, its partner, in place of ReAct's) on a task that speaks of quantities, recorded as compose
    records it; the same reply on the plain game, and on a SQL task, is the plan the model wrote."""
    from jitlab.jit.generate.plan import with_called_for
    assert with_called_for(LIKELIHOOD_PLAN, GAME) == (LIKELIHOOD_PLAN, [])
    assert with_called_for(LIKELIHOOD_PLAN, SQL) == (LIKELIHOOD_PLAN, [])
    gen = PlanGenerator("plan:scripted", ScriptedBackbone(lambda m: json.dumps(LIKELIHOOD_PLAN)))
    cand = gen.generate(SORTING, [], index=0)
    assert cand.meta["plan"] == {**LIKELIHOOD_PLAN, "P": "QuantityPlanner"} and _fits(cand.files, SORTING)
    assert choices_of(cand.files)["P"].path == QUANTITY
    assert [(r["role"], r["option"], r["now"]) for r in cand.meta["refused"]] == [("P", "NoPlanner", "QuantityPlanner")]
    react = {"M": "FullHistory", "P": "GroundedPlanner", "F": "FullRegistry", "A": "ReActAction", "prompt": "choose",
             "params": {"P": {"patience": 3}, "A": {"max_chars": 100}}}
    plan, changes = with_called_for(react, SORTING)
    assert plan == {"M": "FullHistory", "P": "QuantityPlanner", "F": "FullRegistry", "A": "LikelihoodAction",
                    "prompt": "choose"}                        # the changed roles' parameters dropped
    assert [(c["role"], c["now"]) for c in changes] == [("P", "QuantityPlanner"), ("A", "LikelihoodAction")]
    assert "partner of QuantityPlanner" in changes[1]["why"] and react["P"] == "GroundedPlanner"   # not mutated
    assert with_called_for("not a plan", SORTING) == ("not a plan", [])
    plain = PlanGenerator("plan:scripted", ScriptedBackbone(lambda m: json.dumps(LIKELIHOOD_PLAN)))
    assert "refused" not in plain.generate(GAME, [], index=0).meta


def test_code_takes_missing_files_from_the_nearest_fitting_reference_and_is_refused_when_it_does_not_fit():
    game, plain = _ref(_game_design(), "a"), _ref(_plain_design(), "b")
    assert first_fitting([game, plain], SQL) is plain and first_fitting([game, plain], GAME) is game
    assert first_fitting([game], SQL) is game and first_fitting([], SQL) is None   # none fits: the nearest
    silent = CodeGenerator("code:scripted", ScriptedBackbone(lambda m: "I cannot write code."))
    cand = silent.generate(SQL, [game, plain], index=0)
    assert cand.meta["fallback_from"] == plain.sha and _fits(cand.files, SQL)
    # a reply that writes an action deriving from the likelihood action: refused before validation, for repair
    action = ("<file name=\"action.py\">\nfrom jitlab.modules.likelihood import LikelihoodAction\n\n\n"
              "class Action(LikelihoodAction):\n    pass\n</file>")
    wrote = CodeGenerator("code:scripted", ScriptedBackbone(lambda m: action)).generate(SQL, [plain], index=0)
    refusal = unfit(wrote, SQL)
    assert refusal is not None and refusal.stage == "fit" and not refusal.ok
    assert refusal.diagnostic["kind"] == "interface_mismatch" and refusal.diagnostic["file"] == "action.py"
    assert "LikelihoodAction needs the tool act" in refusal.diagnostic["message"]
    assert unfit(wrote, GAME) is None


# -- the bank per kind ------------------------------------------------------------------------------------------
def _bank_with(tmp_path, evals) -> tuple[Bank, dict]:
    bank = Bank.create(tmp_path / "bank.sqlite", seeds=False, config=BankConfig(retrieval="bm25"))
    shas = {}
    for name, files, spec, reward in evals:
        shas[name] = bank.add(files, generator="compose", name=name)
        bank.update(shas[name], [Evaluation.for_task(spec, success=reward >= 1, reward=reward, run_dir=".")])
    return bank, shas


def test_retrieval_and_option_evidence_read_only_the_task_s_kind(tmp_path):
    """A TextWorld incumbent is no evidence for a SQL task: the text game's design that solved two games is neither
    retrieved nor in the option evidence for a SQL task (nor for a grid task, whose act is another signature), and a
    SQL design's record is read on its own kind only; never-evaluated entries stay eligible."""
    games = MixedToySuite().tasks("test", "chain")
    sqls = MixedToySuite().tasks("test", "query")
    plain = render_files(choices_of(_game_design()) | {"A": Choice("A", "library", SQL_ACTION),
                                                      "H": Choice("H", "library", NO_HOOKS),
                                                      "prompt": Choice("prompt", "variant",
                                                                       text=prompt_variants()["sql"])},
                         name="sql-design", lineage={})
    bank, shas = _bank_with(tmp_path, [("game", _game_design(), games[0], 1.0), ("game", _game_design(), games[1], 1.0),
                                       ("sql", plain, sqls[0], 0.0)])
    fresh = bank.add(render_files(choices_of(plain), name="fresh", lineage={}) | {"memory.py": "# fresh\n"
                     + plain["memory.py"]}, generator="seed", name="fresh")
    kinds = dict(bank.db.execute("SELECT task_id, kind FROM task_kinds"))
    assert kinds == {games[0].id: "act(command)", games[1].id: "act(command)", sqls[0].id: task_kind(sqls[0])}
    for_sql = {r.sha: r for r in references(bank, sqls[1].description, k=5, kind=task_kind(sqls[1]))}
    assert shas["game"] not in for_sql and for_sql[shas["sql"]].evaluated and for_sql[shas["sql"]].mean_reward == 0.0
    assert fresh in for_sql and not for_sql[fresh].evaluated
    assert [r.sha for r in evidence(bank, task_kind(sqls[1]))] == [shas["sql"]]
    assert [r.sha for r in evidence(bank, task_kind(GRID))] == []                    # a closed act is another kind
    for_game = {r.sha: r for r in references(bank, games[2].description, k=5, kind=task_kind(games[2]))}
    assert for_game[shas["game"]].mean_reward == 1.0 and shas["sql"] not in for_game
    # without a kind (and on a bank of one kind) the bank reads as it always did
    assert {r.sha for r in references(bank, sqls[1].description, k=5)} == {shas["game"], shas["sql"], fresh}
    assert {e.sha: e.mean_reward for e in bank.entries(kind=None)}[shas["game"]] == 1.0
    bank.close()
    one, _ = _bank_with(tmp_path / "one", [("game", _game_design(), games[0], 1.0), ("g2", plain, games[1], 0.5)])
    plain_refs = one.retrieve(games[2].description, k=3)
    kind_refs = one.retrieve(games[2].description, k=3, kind="act(command)")
    assert [(e.sha, e.score, e.mean_reward, e.why) for e in plain_refs] == \
        [(e.sha, e.score, e.mean_reward, e.why) for e in kind_refs]
    one.close()


# -- the loop on a mixed stream --------------------------------------------------------------------------------
def _unisolated() -> bool:
    from jitlab.sandbox import probe
    return not probe()[0]


def _mixed_cfg(out, monkeypatch, **kw) -> JITConfig:
    monkeypatch.setitem(SUITES, "toy-mixed", f"{__name__}:MixedToySuite")
    base = dict(suite="toy-mixed", split="test", backbone="scripted:uniform", limit=6, retrieval="bm25", cache=False,
                out=str(out), smoke_steps=1, quiet=True, allow_unisolated=_unisolated(), mode="streaming",
                n_candidates=2, max_repair_rounds=1)
    return JITConfig(**{**base, **kw})


def _ran(out) -> list[tuple[dict, dict, dict]]:
    """(task public dict, record extra, the harness's choices) per task, in stream order."""
    from jitlab.harness import read_files
    eps = load(out)["episodes"]
    eps = eps[eps["final"]].sort_values("id")
    specs = {t.id: t for t in MixedToySuite().tasks("test")}
    return [(specs[row.task_id].public(), (x := json.loads(row.extra)), choices_of(read_files(out / x["harness_dir"])))
            for row in eps.itertuples()]


def test_a_mixed_stream_runs_a_fitting_harness_on_every_task_and_reads_evidence_per_kind(tmp_path, monkeypatch):
    """A streaming compose JIT over chains, SQL tasks and grid chains: every harness that ran fits its task (the SQL
    tasks never run a likelihood action), and no task's references carry a record made only on another kind of
    task."""
    out = run_jit(_mixed_cfg(tmp_path / "mix", monkeypatch))
    ran = _ran(out)
    assert [t["family"] for t, _, _ in ran] == ["chain", "query", "grid"] * 2
    bank = Bank(out / "bank.sqlite")
    kinds = dict(bank.db.execute("SELECT task_id, kind FROM task_kinds"))
    assert set(kinds.values()) == {task_kind(t) for t, _, _ in ran} and len(set(kinds.values())) == 3
    for task, extra, choices in ran:
        assert misfits(choices, task) == {}, (task["id"], extra["harness_name"])
        for sha in extra["references"]:
            seen = {kinds[e["task_id"]] for e in bank.evaluations(sha) if e["task_id"] in kinds}
            assert not seen or task_kind(task) in seen, (task["id"], sha)
    sql_actions = {c["A"].path for t, _, c in ran if t["family"] == "query"}
    assert sql_actions == {SQL_ACTION}
    assert {c["A"].path for t, _, c in ran if t["family"] == "chain"} == {LIKELIHOOD}
    bank.close()


def test_without_kinds_the_copied_game_design_is_refused_on_the_sql_task(tmp_path, monkeypatch):
    """The fit rule holds on its own: with the kind scoping switched off (every evaluation read for every task, as
    before issue 42), the SQL task retrieves the game design that solved the first chain and compose copies or
    mutates it, and its likelihood action is refused (recorded per candidate) before anything runs."""
    import jitlab.jit.loop as loop
    monkeypatch.setattr(loop, "task_kind", lambda task: None)
    out = run_jit(_mixed_cfg(tmp_path / "nokind", monkeypatch, limit=2))
    (game, g_extra, g_choices), (sql, s_extra, s_choices) = _ran(out)
    assert g_choices["A"].path == LIKELIHOOD and g_extra["harness_dir"].split("/")[1] in s_extra["references"]
    cands = s_extra["jit"]["candidates"]
    assert cands[0]["strategy"] in ("copy", "mutate") and cands[0]["modules"]["A"] == SQL_ACTION
    assert "A" in {r["role"] for r in cands[0]["refused"]}
    assert misfits(s_choices, sql) == {} and s_choices["A"].path == SQL_ACTION


def test_a_plan_that_does_not_fit_is_refused_on_the_sql_tasks_only(tmp_path, monkeypatch):
    """The plan generator on the mixed stream, its backbone always writing the likelihood plan: the chains run it; on
    the SQL task it is refused (a parse error naming the misfit, sent to repair, refused again) and the fallback is the
    nearest reference that fits, never the chain's harness."""
    reply = json.dumps(LIKELIHOOD_PLAN).replace(":", ": ")
    out = run_jit(_mixed_cfg(tmp_path / "plan", monkeypatch, limit=2, generator=f"plan:scripted:reply:{reply}",
                             n_candidates=1))
    (game, g_extra, g_choices), (sql, s_extra, s_choices) = _ran(out)
    assert g_choices["A"].path == LIKELIHOOD and not g_extra["fallback"]
    assert s_extra["fallback"] and misfits(s_choices, sql) == {}
    first = s_extra["jit"]["candidates"][0]
    assert not first["valid"] and "does not fit this task" in first["diagnostic"]["message"]
    assert s_extra["jit"]["repair"] and s_extra["harness_dir"] != g_extra["harness_dir"]


def test_leaving_out_a_misfitting_prompt_variant_draws_the_same_sampling_noise():
    """A variant that does not fit is left out after the sampling noise is drawn, so the draws (and the picks after
    them) are the ones they were without the rule."""
    gen = ComposeGenerator(Likes(), ComposeConfig(strategy="sample"))
    rng_a, rng_b = random.Random(3), random.Random(3)
    ranked = gen._ranked("prompt", GAME, Likes(), rng_a)
    assert "sql" not in ranked and len(ranked) == len(prompt_variants()) - 1
    for _ in prompt_variants():
        rng_b.random()
    assert rng_a.random() == rng_b.random()


def test_a_design_that_failed_on_a_kind_is_avoided_on_that_kind_only(tmp_path):
    """The novelty rules' record of failures (``JITEngine._failed_on_family``) reads the task's kind: a design that failed
    on two SQL tasks is avoided on the next SQL task, and not on a text game whose family bears the same name (as
    DBBench's ``other`` might another suite's)."""
    from types import SimpleNamespace

    from jitlab.jit.loop import JITEngine
    sqls = MixedToySuite().tasks("test", "query")
    game = MixedToySuite().tasks("test", "chain")[0]
    namesake = TaskSpec(id="chain-x", suite="other-suite", family="query", split="test", description=game.description,
                        tools=[ACT], max_steps=8, data=game.data)
    bank, shas = _bank_with(tmp_path, [("loser", _plain_design(), sqls[0], 0.0), ("loser", _plain_design(), sqls[1], 0.0)])
    jit = SimpleNamespace(bank=bank, cfg=SimpleNamespace(avoid_after=2))
    assert [e.sha for e in JITEngine._failed_on_family(jit, sqls[2])] == [shas["loser"]]
    assert JITEngine._failed_on_family(jit, namesake) == []
    bank.update(shas["loser"], [Evaluation.for_task(namesake, success=True, reward=1.0, run_dir=".")])
    # a win on a text game does not clear the SQL record, and the SQL record does not blame it on the game
    assert [e.sha for e in JITEngine._failed_on_family(jit, sqls[2])] == [shas["loser"]]
    assert JITEngine._failed_on_family(jit, namesake) == []
    bank.close()
