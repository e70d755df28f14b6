"""Value grounding for SQL (jitlab/modules/sqlground.py) on recorded DBBench probes, and SqlAction using it."""
import sqlite3

from small_model_data import OBS, DoubleLLM
from test_sql import PROMPTS, _context, _spec

from jitlab.modules.sql import SqlAction, numeric_columns, schema_of, select_lists, select_prior
from jitlab.modules.sqlground import (
    answer_columns,
    assign_values,
    comparisons,
    conditions,
    insert_values,
    phrases,
    probe_sql,
    question_of,
    update_values,
    values_in,
    where_options,
)
from jitlab.protocol import Ctx

JIMMY, FRIENDLY, BRONZE = OBS["dbbench-dev-001"], OBS["dbbench-dev-007"], OBS["dbbench-dev-017"]
INSERT = OBS["dbbench-dev-020"]


def _grounded(entry):
    table, columns = schema_of(entry["description"])
    question = question_of(entry["description"])
    return question, columns, conditions(question, columns, entry["results"]["probe"])


def test_the_probe_is_one_statement_sqlite_runs_and_finds_values_both_ways():
    conn = sqlite3.connect(":memory:")
    conn.execute('CREATE TABLE "t x" ("Opponent" TEXT, "Game" TEXT)')
    conn.executemany('INSERT INTO "t x" VALUES (?, ?)', [("Athlone Town", "1"), ("Cork City", "2"), ("", "3")])
    rows = conn.execute(probe_sql("t x", ["Opponent", "Game"], "What game had athlone town as opponent?")).fetchall()
    assert ("Opponent", "Athlone Town") in rows[:2]                 # a table value inside the question, longest first
    assert ("Opponent", "%athlone%") in rows and ("Opponent", "%athlone town%") in rows   # a phrase inside values
    assert all(v.strip("%") for _, v in rows)                        # empty cells never match
    assert "''" in probe_sql("t", ["a"], "what's it?")               # the question's quote is escaped


def test_conditions_pair_each_value_with_the_column_named_next_to_it():
    question, columns, conds = _grounded(FRIENDLY)   # Score and Result both hold 2–1; the question names Result
    assert [c for c, _ in conds] == ["Goal", "Competition", "Result"]
    assert dict(conds)["Result"] == "\"Result\" = '2–1'" and dict(conds)["Competition"] == "\"Competition\" = 'Friendly'"
    assert dict(conds)["Goal"] == "CAST(REPLACE(\"Goal\", ',', '') AS REAL) < 17"   # the comparison, not Goal = '17'
    assert answer_columns(question, columns, conds) == ["Score"]
    assert where_options(conds)[0] == "WHERE " + " AND ".join(c for _, c in conds) and len(where_options(conds)) == 4


def test_a_phrase_inside_values_becomes_like_and_bare_numbers_need_a_named_column():
    assert _grounded(JIMMY)[2] == [("Drivers", "\"Drivers\" LIKE '%jimmy%'")]
    question, columns, conds = _grounded(BRONZE)     # "less than 0 Silvers": the number before the plural name
    assert conds == [("Silver", "CAST(REPLACE(\"Silver\", ',', '') AS REAL) < 0")]
    assert conditions("Which team scored 0?", ["Team", "Goals"], "Columns: col, val\n('Goals', '0')\n(1 row)") == []
    many = conditions("medals of china and japan?", ["Nation"], "Columns: col, val\n('Nation', 'China')\n"
                      "('Nation', 'Japan')\n(2 rows)")
    assert many == [("Nation", "\"Nation\" IN ('China', 'Japan')")]
    assert comparisons("game numbers under 20", ["Game"])[0][1] == "CAST(REPLACE(\"Game\", ',', '') AS REAL) < 20"
    assert "jimmy" in phrases(question_of(JIMMY["description"]), schema_of(JIMMY["description"])[1])


def test_the_select_prior_favours_what_is_asked_over_what_a_condition_uses():
    question, columns, conds = _grounded(FRIENDLY)
    prior = select_prior(FRIENDLY["description"], columns, conds=conds)
    assert prior['"Score"'] == 2.0 and '"Result"' not in prior   # named (+1) but a condition's column (-1)
    assert select_prior(FRIENDLY["description"], columns)['"Result"'] == 1.0   # without grounding: named, +1


def test_an_episode_probes_prefills_the_grounded_where_and_commits_none_when_it_finds_nothing():
    llm = DoubleLLM(lambda c: 0.0 if c.strip() == 'MAX(CAST(REPLACE("Bronze", \',\', \'\') AS REAL))' else -5.0,
                    reply="")
    action, ctx = SqlAction(peek=False), Ctx(llm=llm, task=_spec(BRONZE), prompts=PROMPTS)
    action.reset(ctx)
    probe = action.act(_context(0, BRONZE["first"], BRONZE), ctx)
    assert probe.data["mechanism"] == "sql:probe" and probe.args["sql"].startswith("WITH q(s)")
    query = action.act(_context(1, BRONZE["results"]["probe"], BRONZE), ctx)
    assert query.args["sql"] == ('SELECT MAX(CAST(REPLACE("Bronze", \',\', \'\') AS REAL)) FROM "Medal Tally" '
                                 'WHERE CAST(REPLACE("Silver", \',\', \'\') AS REAL) < 0;')
    assert query.data["grounded"] is True and query.data["select_method"] == "score" and llm.chat_calls == []
    assert (query.data["decided_by"], query.data["mechanism"]) == ("mechanism", "sql:grounded")
    commit = action.act(_context(2, "Columns: MAX(x)\n(None,)\n(1 row)", BRONZE), ctx)
    assert (commit.tool, commit.args["answer"], commit.data["mechanism"]) == \
        ("commit_answer", "none", "sql:commit:empty")


def test_without_grounding_nothing_is_probed():
    llm = DoubleLLM(lambda c: 0.0, reply="")
    action, ctx = SqlAction(peek=False, ground=False), Ctx(llm=llm, task=_spec(BRONZE), prompts=PROMPTS)
    action.reset(ctx)
    assert action.act(_context(0, BRONZE["first"], BRONZE), ctx).data.get("mechanism") != "sql:probe"


def test_an_insert_row_is_read_from_the_instruction_or_left_to_the_model():
    table, columns = schema_of(INSERT["description"])
    assert insert_values(question_of(INSERT["description"]), columns, table) == \
        ["Madison High School", "San Diego", "1980", "nearby junior high school"]   # 'X' for 'col', one left over
    spelled = "Insert into 'T' the values for Round, Pick and Player, which are '33', '336' and 'John Smith'."
    assert insert_values(spelled, ["Round", "Pick", "Player"], "T") == ["33", "336", "John Smith"]
    assert insert_values("position 10, club 'FK Trakai', points 29", ["Position", "Club", "Points"]) == \
        ["10", "FK Trakai", "29"]
    prose = "On 8 March 2007, in the Round of 16 Second leg, the match result for Porto was 1–0."
    assert insert_values(prose, ["Date", "Round", "Opponents", "Result"]) is None   # bare numbers in prose: no row


def test_update_values_skip_what_the_table_already_holds():
    question = "In the year 2002, set the Affiliation as 'Red Sox' and Manager as 'Bill Belichick'."
    columns = ["Year", "Affiliation", "Manager"]
    assert assign_values(question, columns) == {"Year": "2002", "Affiliation": "Red Sox", "Manager": "Bill Belichick"}
    assert assign_values(question, columns, skip={"2002"}) == {"Affiliation": "Red Sox", "Manager": "Bill Belichick"}
    assert values_in("scores 13-11 and 41,000 fans at Men's Doubles", []) == [("13-11", (7, 12)), ("41,000", (17, 23))]


def _action(entry, **kw):
    llm = DoubleLLM(lambda c: 0.0 if c in ("INSERT", "UPDATE") else -5.0, reply=kw.pop("reply", ""))
    action, ctx = SqlAction(peek=False, **kw), Ctx(llm=llm, task=_spec(entry), prompts=PROMPTS)
    action.reset(ctx)
    return action, ctx


def test_an_episode_sends_the_stated_insert_and_commits_done():
    action, ctx = _action(INSERT)
    sent = action.act(_context(0, "", INSERT), ctx)
    assert sent.data["mechanism"] == "sql:stated:insert" and "'Madison High School', 'San Diego'" in sent.args["sql"]
    assert sent.args["sql"].startswith('INSERT INTO "School Location Table" ("School", "Location"')
    done = action.act(_context(1, "OK. 1 row(s) affected.", INSERT), ctx)
    assert (done.tool, done.args["answer"]) == ("commit_answer", "done")
    action, ctx = _action(INSERT, ground=False, reply=" 'x', 'y', 'z', 'w')")
    assert action.act(_context(0, "", INSERT), ctx).data["decided_by"] == "model_reply"


def test_a_model_written_update_gets_the_grounded_where():
    action, ctx = _action(INSERT)
    action.conds = [("School", "\"School\" = 'Burroughs'"), ("Location", "\"Location\" LIKE '%ridge%'")]
    wrote = "UPDATE \"School Location Table\" SET \"Date moved\" = '1990' WHERE Location = 'nowhere';"
    assert action._grounded_update(wrote) == \
        "UPDATE \"School Location Table\" SET \"Date moved\" = '1990' WHERE \"School\" = 'Burroughs';"
    action.conds = [("Date moved", "\"Date moved\" = '1980'")]    # the only condition is on the column it sets
    assert action._grounded_update(wrote) == wrote


def test_update_values_take_what_follows_to_for_the_column_named_before_it():
    award = "Update the winner of the award to 'Naomi Osaka' for the sport of Tennis and the year 2015."
    assert update_values(award, ["Year", "Winner", "Sport"], found={"Naomi Osaka", "Tennis", "2015"}) == \
        {"Winner": "Naomi Osaka"}
    assert update_values("Update the host city of the 2026 Central European Jamboree to Bratislava.",
                         ["Year", "Host City"], found={"2026"}) == {"Host City": "Bratislava"}


def test_an_update_the_instruction_states_is_sent_with_the_grounded_where():
    action, ctx = _action(INSERT)
    action.question = "Change the location to 'Oakland' where the school is 'Burroughs'."
    action.conds = [("School", "\"School\" = 'Burroughs'"), ("Location", "\"Location\" = 'Oakland'")]
    action.sets = update_values(action.question, action.columns, action.table, {"Burroughs", "Oakland"})
    assert action._stated("UPDATE") == \
        "UPDATE \"School Location Table\" SET \"Location\" = 'Oakland' WHERE \"School\" = 'Burroughs';"
    action.conds = []                                       # no grounded WHERE: the model writes the statement
    assert action._stated("UPDATE") == ""


def test_a_column_name_with_a_full_stop_stays_whole():
    text = 'Table "Specimen Collection" has columns: "Name", "No. Specimens", "Abbr." (19 rows). The name of this'
    assert schema_of(text) == ("Specimen Collection", ["Name", "No. Specimens", "Abbr."])


def test_select_lists_offer_what_is_asked_and_numeric_aggregates_only():
    columns, conds = ["Name", "Floors", "City"], [("Name", "\"Name\" = 'Capitol Square'")]
    floors = "how many floors does the capitol square have?"
    assert select_lists(floors, columns, conds, numeric={"Floors"}) == ['"Floors"']   # its value, not a count
    assert "COUNT(*)" in select_lists(floors, columns, conds)                          # numbers unknown: both
    films = "How many award-winning films have the opening film of Rio?"
    prior = select_prior("Question / instruction: " + films, ["Award-Winning Film", "Opening Film"],
                         conds=[("Opening Film", "x")], numeric=set())
    assert prior["COUNT(*)"] == 3.0 > prior['"Award-Winning Film"']                   # counting a text column
    assert select_lists("What is the highest Score of Iran?", ["Nation", "Score", "Note"], [("Nation", "x")],
                        numeric={"Score"}) == ['"Score"', 'MAX(CAST(REPLACE("Score", \',\', \'\') AS REAL))']
    assert answer_columns("Name the least touchdowns", ["Name", "Touchdowns"], []) == ["Touchdowns"]
    assert numeric_columns("Columns: a, b\n('1,200', 'x')\n('—', 'y')\n(2 rows)", ["a", "b"]) == {"a"}
