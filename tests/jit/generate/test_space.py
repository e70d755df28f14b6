"""The generators' harness space (issue 29 items 1 and 3): the hooks slot H next to M, P, F, A, and the small-model
mechanisms in the catalogue with their fits (tools they need, words of the task's public text they suit, partners).

Tasks here are hand-written public dicts in the suites' formats (no split is read); backbones are test doubles."""
from jitlab.harness import read_files, seed_bank_dir, seed_names
from jitlab.jit.generate.compose import ComposeConfig, ComposeGenerator
from jitlab.jit.generate.library import (
    BASIC,
    FITS,
    NO_HOOKS,
    SPACE,
    Choice,
    catalogue,
    choices_of,
    fit,
    modules_of,
    option,
    render_files,
    role_of_file,
)
from jitlab.llm.scripted import ScriptedBackbone

SQL_TOOLS = [{"name": "execute_sql", "description": "Run one SQL statement.", "args": {}},
             {"name": "commit_answer", "description": "Commit the final answer.", "args": {}}]
ACT = [{"name": "act", "description": "Issue one text command.", "args": {}}]
SQL_TASK = {"id": "t-sql", "suite": "x", "family": "x", "description": "Answer the question with SQL. Table `people` "
            "has columns: `name`, `age`. Question: how old is Ann? Use execute_sql, then commit_answer.",
            "tools": SQL_TOOLS, "max_steps": 10}
GRID_TASK = {"id": "t-grid", "suite": "x", "family": "x", "description": "Mission: pick up the red ball. You see: a "
             "red ball 2 steps ahead and 1 step to the left. Actions: turn left, turn right, go forward, pick up.",
             "tools": ACT, "max_steps": 20}
GAME_TASK = {"id": "t-game", "suite": "x", "family": "x", "description": "A text game. Find the coin in the rooms; "
             "the game lists the admissible commands each turn. Tool: act(command).", "tools": ACT, "max_steps": 20}


class Uniform(ScriptedBackbone):
    """TEST DOUBLE: every candidate scores the same, so only the catalogue's fits and couplings decide."""

    def __init__(self):
        super().__init__(lambda messages: "Action: look")

    def score(self, messages, candidates):
        return [0.0 for _ in candidates]


def test_hooks_slot_has_none_first_then_hook_classes_only():
    hooks = catalogue()["H"]
    assert hooks[0].path == NO_HOOKS == BASIC["H"] and option(NO_HOOKS, "H") is hooks[0]
    assert {o.cls for o in hooks[1:]} == {"RuleHooks", "InterventionHooks", "RealisationHooks"}
    assert set(SPACE) == {"M", "P", "F", "A", "H"} and SPACE["H"][0] == "hooks.py"
    assert role_of_file("hooks.py") == "H" and role_of_file("jitlab/modules/realisation.py") == "H"
    for role in "MPFA":  # a hook class fills no module role, a module fills no hooks slot
        assert not {o.cls for o in catalogue()[role]} & {o.cls for o in hooks}


def test_small_model_mechanisms_are_in_the_catalogue_with_their_roles():
    where = {"LikelihoodAction": "A", "SqlAction": "A", "MapPlanner": "P", "GroundedPlanner": "P",
             "EgocentricPlanner": "P", "RealisationHooks": "H"}
    for cls, role in where.items():
        opt = option(cls)
        assert opt is not None and opt.role == role and opt.description, cls
    assert all(option(path) is not None for path in FITS)   # every declared fit names a catalogue option


def test_seeds_keep_their_shape_and_hooks_round_trip():
    for name in seed_names():
        files = read_files(seed_bank_dir() / name)
        assert ("hooks.py" in files) == (choices_of(files)["H"].path != NO_HOOKS), name
    plain = read_files(seed_bank_dir() / "react")
    choices = choices_of(plain)
    assert choices["H"].path == NO_HOOKS and modules_of(plain)["H"] == NO_HOOKS
    assert "hooks.py" not in render_files(choices, name="x", lineage={})
    choices["H"] = Choice("H", "library", "jitlab.modules.hooks:RuleHooks", {"block_after": 1, "loop_after": 3})
    files = render_files(choices, name="x", lineage={})
    assert "class Hooks(_Base)" in files["hooks.py"] and "H:" in files["description.yaml"]
    back = choices_of(files)["H"]
    assert back.path == "jitlab.modules.hooks:RuleHooks" and back.params == {"block_after": 1, "loop_after": 3}
    assert read_files(seed_bank_dir() / "small_model/realised_react") and \
        modules_of(read_files(seed_bank_dir() / "small_model/realised_react"))["H"].endswith(":RealisationHooks")


def test_fit_reads_tools_and_text_never_suite_family_or_id():
    sql = "jitlab.modules.sql:SqlAction"
    assert fit(sql, GAME_TASK) is None and fit(sql, SQL_TASK) > 0
    assert fit(sql, {**SQL_TASK, "tools": ACT}) is None                  # the tools it needs are missing
    renamed = {**SQL_TASK, "suite": "dbbench", "family": "select", "id": "dbbench-1"}
    assert all(fit(p, renamed) == fit(p, SQL_TASK) for p in FITS)        # no suite/family/id switch
    ego = "jitlab.modules.egocentric:EgocentricPlanner"
    assert fit(ego, GRID_TASK) > fit(ego, SQL_TASK) == 0
    assert fit("jitlab.modules.basic:ReActAction", GRID_TASK) == 0        # no declared fit: no bonus
    likelihood = "jitlab.modules.likelihood:LikelihoodAction"              # chooses among act's candidates
    assert fit(likelihood, GAME_TASK) > 0 and fit(likelihood, SQL_TASK) is None


def test_a_mutation_of_the_sql_design_never_re_picks_an_action_that_needs_act():
    """Issue 29 (DBBench test stream): a mutation re-picked A = LikelihoodAction beside ``execute_sql``; with no
    admissible candidates it sent ``look`` as SQL for 15 steps. An action needing a tool the task lacks is not an
    option for that task, in a re-pick as in the first pick (here with the evident-role rule off, so A is re-picked)."""
    import random
    likes = LikesLikelihood()   # the backbone ranks it first among the actions: only the missing tool can exclude it
    gen = ComposeGenerator(likes, ComposeConfig(strategy="score", mutate_params=0.0, keep_margin=0.0))
    parent = choices_of(gen.generate(SQL_TASK, [], index=0).files)
    assert parent["A"].path == "jitlab.modules.sql:SqlAction"
    picked = {gen._mutate(parent, SQL_TASK, likes, random.Random(i))[0]["A"].path for i in range(60)}
    assert len(picked) > 1 and "jitlab.modules.likelihood:LikelihoodAction" not in picked


def test_a_mutation_leaves_alone_a_role_the_task_fits_clearly_better():
    """Issue 29 (DBBench test stream): after each failure a re-pick of A put chat actions in place of SqlAction, the
    one action the task's SQL words and tools fit (19 tasks, none solved). With ``keep_margin`` a role whose option
    fits the task by that margin more than every other stays as it is, and the other roles still move; a tie of
    fits (the game's map and grounded planners) leaves the role free."""
    import random
    gen = ComposeGenerator(Uniform(), ComposeConfig(strategy="score", mutate_params=0.0))
    parent = choices_of(gen.generate(SQL_TASK, [], index=0).files)
    assert gen._evident(parent, SQL_TASK) == {"A"}
    notes = set()
    for i in range(60):
        child, note = gen._mutate(parent, SQL_TASK, Uniform(), random.Random(i))
        assert child["A"].path == "jitlab.modules.sql:SqlAction", note
        notes.add(note.split(":")[0])
    assert len(notes - {"A"}) >= 2 and "A" not in notes
    game = choices_of(gen.generate(GAME_TASK, [], index=0).files)
    assert gen._evident(game, GAME_TASK) == {"A", "P"}           # grounded planner 6, map planner 2
    tie = {**GAME_TASK, "description": GAME_TASK["description"] + " Go north or east through the exits."}
    assert gen._evident(game, tie) == {"A"}                      # both planners 6: P may move
    off = ComposeGenerator(Uniform(), ComposeConfig(strategy="score", mutate_params=0.0, keep_margin=0.0))
    assert off._evident(parent, SQL_TASK) == set()


class LikesLikelihood(Uniform):
    """TEST DOUBLE: the likelihood action's label scores above every other option's."""

    def score(self, messages, candidates):
        return [5.0 if c == "likelihood action" else 0.0 for c in candidates]


def test_compose_picks_the_mechanisms_that_fit_the_task():
    gen = ComposeGenerator(Uniform(), ComposeConfig(strategy="score"))
    sql = gen.generate(SQL_TASK, [], index=0).meta["choices"]
    assert sql["A"]["path"] == "jitlab.modules.sql:SqlAction"
    grid = gen.generate(GRID_TASK, [], index=0).meta["choices"]
    assert grid["P"]["path"] == "jitlab.modules.egocentric:EgocentricPlanner"
    assert grid["A"]["path"] == "jitlab.modules.likelihood:LikelihoodAction"   # the planner's partner
    game = gen.generate(GAME_TASK, [], index=0)
    assert game.meta["choices"]["A"]["path"] == "jitlab.modules.likelihood:LikelihoodAction"
    assert game.meta["choices"]["H"]["path"] != NO_HOOKS and "hooks.py" in game.files
    assert game.meta["choices"]["A"]["params"] == {"state": "auto", "margin": 1.0} and grid["P"]["params"] == {"bonus": 8.0}
    # the prior planners' partner memory keeps the observation events they parse (a folding memory starves them)
    assert grid["M"]["path"] == "jitlab.modules.basic:FullHistory"
    # a picked hooks option is parameterised by its preset (RuleHooks with every rule off would do nothing)
    for c in (sql, grid, game.meta["choices"]):
        preset = getattr(FITS.get(c["H"]["path"]), "params", {})
        assert c["H"]["params"] == preset
    assert "SqlAction" not in repr(grid) and "SqlAction" not in repr(game.meta["choices"])


class LikesFactGraph(Uniform):
    """TEST DOUBLE: the fact graph memory's label scores far above every other option's."""

    def score(self, messages, candidates):
        return [10.0 if "fact graph" in c else 0.0 for c in candidates]


def test_the_fitted_mechanism_is_picked_before_couplings_of_other_roles_can_exclude_it():
    """Filled in SPACE order, M (the fact graph memory, which needs OrchestratorAction) would exclude the text game's
    LikelihoodAction; the roles with fitted options go first, so the memory's coupling is what gives way."""
    assert ComposeGenerator._role_order(GAME_TASK)[0] in ("P", "A")
    game = ComposeGenerator(LikesFactGraph(), ComposeConfig(strategy="score")).generate(GAME_TASK, [], index=0)
    choices = game.meta["choices"]
    assert choices["A"]["path"] == "jitlab.modules.likelihood:LikelihoodAction"
    assert choices["M"]["path"] != "jitlab.modules.case_studies:FactGraphMemory"


def test_repair_can_point_at_hooks():
    gen = ComposeGenerator(Uniform(), ComposeConfig(strategy="score"))
    cand = gen.generate(GAME_TASK, [], index=0)
    before = cand.meta["choices"]["H"]["path"]
    fixed = gen.repair(cand, {"kind": "runtime_error", "file": "hooks.py", "message": "boom"}, GAME_TASK)
    assert fixed.meta["repaired_role"] == "H" and fixed.meta["choices"]["H"]["path"] != before


def test_plan_format_has_an_optional_hooks_field():
    from jitlab.jit.generate.plan import PlanError, check_plan, plan_files, plan_messages, plan_of, plan_text
    base = {"M": "FullHistory", "P": "NoPlanner", "F": "FullRegistry", "A": "ReActAction", "prompt": "react"}
    assert "hooks.py" not in plan_files(base) and plan_of(plan_files(base)) == base   # seeds' plans stay as they are
    hooked = {**base, "hooks": "RuleHooks", "params": {"H": {"block_after": 2}}}
    files = plan_files(hooked)
    assert "class Hooks(" in files["hooks.py"] and plan_of(files) == hooked
    assert plan_text({**base, "hooks": "none"}) == plan_text(base)
    try:
        check_plan({**base, "hooks": "MagicHooks"})
    except PlanError as exc:
        assert "hooks must be one of none, " in str(exc) and "RealisationHooks" in str(exc)
    else:
        raise AssertionError("an unknown hooks class was accepted")
    assert "hooks (optional): none, " in plan_messages(GAME_TASK, [])[0]["content"]


def test_code_generator_prompt_shows_the_hooks_slot_and_its_options():
    from jitlab.jit.generate.code import CodeGenerator
    system = CodeGenerator("code:scripted:look").messages(GAME_TASK, [])[0]["content"]
    assert "hooks.py (optional, the hooks slot H): class Hooks" in system
    assert "jitlab.modules.realisation.RealisationHooks (H):" in system
    assert "jitlab.modules.sql.SqlAction (A):" in system and " none (H)" not in system


def test_an_option_that_needs_its_prompt_gets_it():
    """LikelihoodAction renders system/step without ``candidates`` (the commands are scored as the reply), which the
    react/goal/terse variants name: compose gives it the ``choose`` variant, SqlAction the ``sql`` one."""
    from jitlab.jit.generate.library import prompt_variants
    gen = ComposeGenerator(Uniform(), ComposeConfig(strategy="score"))
    game = gen.generate(GAME_TASK, [], index=0)
    assert game.files["prompt.yaml"].startswith(prompt_variants()["choose"].rstrip())
    assert "candidates" not in prompt_variants()["choose"]
    sql = gen.generate(SQL_TASK, [], index=0)
    assert sql.files["prompt.yaml"].startswith(prompt_variants()["sql"].rstrip())


def test_bank_statistics_move_the_choice_toward_what_worked():
    """Evaluated references lend their options a bonus by mean reward: the same task composes differently once the
    bank says a mechanism worked (and not at all with bank_weight=0)."""
    from jitlab.jit.generate import Reference
    gen = ComposeGenerator(Uniform(), ComposeConfig(strategy="score"))
    plain = gen.generate(GRID_TASK, [], index=0).meta["choices"]
    worked = gen.generate(GAME_TASK, [], index=0)            # a harness with some other planner, say it scored 1.0
    other = worked.meta["choices"]["P"]["path"]
    assert other != plain["P"]["path"]
    ref = Reference(worked.sha, worked.name, "", worked.files, 1.0, True, 1.0)
    assert gen.bank_bonus([ref])[other] == 2.0
    assert gen.bank_bonus([Reference(worked.sha, worked.name, "", worked.files, 1.0, False, None)]) == {}
    moved = ComposeGenerator(Uniform(), ComposeConfig(strategy="score", bank_weight=10.0))
    assert moved.generate(GRID_TASK, [ref], index=0).meta["choices"]["P"]["path"] == other
    off = ComposeGenerator(Uniform(), ComposeConfig(strategy="score", bank_weight=0.0))
    assert off.generate(GRID_TASK, [ref], index=0).meta["choices"]["P"]["path"] == plain["P"]["path"]


def test_a_mutation_keeps_the_parent_s_partner_pairs():
    """Issue 29 (test split, streaming JIT): after a failure ``mutate`` re-picked A from its top 3 and landed on chat
    actions (ReAct, DAG-parallel) beside a prior planner that only a likelihood action reads, or M on a memory that
    starves it. Now a re-pick keeps every partner pair of the parent: over 40 mutations of the fitted game design, A
    stays LikelihoodAction, M stays FullHistory and P stays a prior planner (the evident-role rule off, so that the
    partner rule alone keeps them)."""
    import random

    from jitlab.jit.generate.compose import _pairs
    gen = ComposeGenerator(Uniform(), ComposeConfig(strategy="score", mutate_params=0.0, keep_margin=0.0))
    parent = choices_of(gen.generate(GAME_TASK, [], index=0).files)
    assert parent["A"].path.endswith(":LikelihoodAction") and _pairs(parent) >= 2
    partners = FITS["jitlab.modules.likelihood:LikelihoodAction"].partners["P"]
    notes = set()
    for i in range(40):
        child, note = gen._mutate(parent, GAME_TASK, Uniform(), random.Random(i))
        notes.add(note.split(":")[0])
        assert child["A"].path == parent["A"].path and child["M"].path == parent["M"].path, note
        assert child["P"].path in partners and _pairs(child) >= _pairs(parent), note
    assert {"P", "F", "H"} <= notes   # the free roles and the planner among its partners still move


def test_a_mutation_skips_options_the_bank_saw_only_fail():
    """An option carried only by evaluated references of mean reward 0 is never a re-pick; one of them that also
    sits in a reference with reward is."""
    import random

    from jitlab.jit.generate import Reference
    from jitlab.jit.generate.compose import _only_failed, _option_rewards
    gen = ComposeGenerator(Uniform(), ComposeConfig(strategy="score", mutate_params=0.0))
    top = gen.generate(GAME_TASK, [], index=0)
    parent = choices_of(top.files)
    seen = {gen._mutate(parent, GAME_TASK, Uniform(), random.Random(i))[0]["H"].path for i in range(40)}
    bad = next(p for p in seen if p != parent["H"].path)
    loser = render_files({**parent, "H": Choice("H", "library", bad)}, name="loser", lineage={})
    refs = [Reference("a" * 10, top.name, "", top.files, 1.0, True, 0.5), Reference("b" * 10, "loser", "", loser, 0.9,
                                                                                    True, 0.0)]
    assert _only_failed(_option_rewards(refs)) == {bad}
    for i in range(40):
        child, note = gen._mutate(parent, GAME_TASK, Uniform(), random.Random(i), refs)
        assert child["H"].path != bad, note
    assert _only_failed(_option_rewards(refs + [Reference("c" * 10, "won", "", loser, 0.8, True, 1.0)])) == set()


def test_with_the_bank_as_evidence_a_mutation_skips_what_failed_on_a_task_unlike_this_one():
    """Issue 29 (BabyAI test stream): MapPlanner failed on task 6 and was re-picked on task 8, whose 3 retrieved
    references did not carry that failure. Given ``evidence`` (every evaluated bank entry), the mutation reads the
    failure there; the references alone still allow the re-pick."""
    from jitlab.jit.generate import Reference
    gen = ComposeGenerator(Uniform(), ComposeConfig(strategy="mutate", mutate_params=0.0))
    top = gen.generate(GAME_TASK, [], index=0)
    parent = choices_of(top.files)
    ref = Reference("a" * 10, top.name, "", top.files, 1.0, True, 0.5)
    seen = {choices_of(gen.generate({**GAME_TASK, "id": f"t{i}"}, [ref], index=0).files)["H"].path for i in range(16)}
    bad = next(p for p in sorted(seen) if p != parent["H"].path)
    loser = Reference("b" * 10, "loser", "", render_files({**parent, "H": Choice("H", "library", bad)}, name="loser",
                                                          lineage={}), 0.0, True, 0.0)
    picked = {choices_of(gen.generate({**GAME_TASK, "id": f"t{i}"}, [ref], index=0, evidence=[ref, loser]).files)
              ["H"].path for i in range(16)}
    assert bad not in picked and picked - {parent["H"].path}
