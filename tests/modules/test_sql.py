"""Checked SQL and the commit policy (jitlab/modules/sql.py) on recorded DBBench tasks and results."""
import yaml
from small_model_data import OBS, DoubleLLM

from jitlab.envs.base import TaskSpec
from jitlab.harness import seed_bank_dir
from jitlab.modules.sql import (
    KEYWORDS,
    SqlAction,
    answer_from,
    check_sql,
    keywords,
    repair,
    schema_of,
    select_prior,
    statement,
    where_clauses,
)
from jitlab.protocol import Capability, Context, Ctx, Directive, Observation, View

TASK = OBS["dbbench-dev-001"]
INSERT = OBS["dbbench-dev-020"]
PROMPTS = yaml.safe_load((seed_bank_dir() / "small_model" / "sql" / "prompt.yaml").read_text())
TOOLS = [Capability("execute_sql", "Run one SQL statement.", {"type": "object", "properties": {"sql": {"type": "string"}}}),
         Capability("commit_answer", "Commit.", {"type": "object", "properties": {"answer": {"type": "string"}}})]


def _spec(entry):
    return TaskSpec(id="t", suite="dbbench", family="other", split="dev", description=entry["description"],
                    tools=TOOLS, max_steps=entry["max_steps"])


def test_the_schema_comes_from_the_task_text():
    table, columns = schema_of(TASK["description"])
    assert table == "race_results" and columns == ["Class", "No", "Team", "Drivers", "Chassis", "Engine", "Laps"]
    table, columns = schema_of(INSERT["description"])
    assert " " in table and columns


def test_the_first_keyword_follows_what_the_task_text_asks_for():
    assert keywords(TASK["description"]) == ["SELECT"] and keywords(INSERT["description"]) == ["INSERT"]
    assert keywords("Tidy the table.") == list(KEYWORDS)


def test_the_questions_words_are_a_prior_over_select_lists():
    columns = schema_of(OBS["dbbench-dev-001"]["description"])[1]
    prior = select_prior("Question / instruction: How many drivers had more than 6 laps?", columns)
    assert prior["COUNT(*)"] == 1.0 and prior['"Drivers"'] == 1.0 and prior['"Laps"'] == 1.0
    total = select_prior("Question / instruction: What is the total of laps?", columns)
    assert total['SUM(CAST(REPLACE("Laps", \',\', \'\') AS REAL))'] == 2.0
    assert total['SUM(CAST(REPLACE("Team", \',\', \'\') AS REAL))'] == 1.0
    assert "COUNT(*)" not in total


def test_sqlites_parser_checks_a_statement_against_the_schema_before_it_is_sent():
    table, columns = schema_of(TASK["description"])
    assert check_sql('SELECT "Drivers" FROM race_results WHERE Laps = \'6\';', table, columns) == ""
    assert "no such column" in check_sql("SELECT Nickname FROM race_results;", table, columns)
    assert "syntax error" in check_sql("SELEC nonsense;", table, columns)
    assert check_sql("The answer is Jimmy.", table, columns)
    assert "incomplete" in check_sql("SELECT 'open FROM race_results", table, columns)


def test_the_reply_is_cut_at_the_semicolon_and_repairs_are_templates():
    assert statement("SELECT", ' "Drivers" FROM race_results;\nThis query finds') == 'SELECT "Drivers" FROM race_results;'
    table, columns = schema_of(INSERT["description"])
    spaced = next(c for c in columns if " " in c)
    broken = f"SELECT {spaced} FROM \"{table}\";"
    assert check_sql(broken, table, columns) and repair(broken, table, columns) == f'SELECT "{spaced}" FROM "{table}";'
    assert repair("SELECT Laps WHERE Laps = '6';", "race_results", ["Laps"]) == \
        'SELECT Laps FROM "race_results" WHERE Laps = \'6\';'
    assert repair("The answer is 6.", "race_results", ["Laps"]) == ""


def test_answers_come_from_recorded_results():
    results = TASK["results"]
    assert answer_from(next(v for k, v in results.items() if "LIKE" in k)) == 'Checco D\'Angelo\\n "Jimmy"'
    assert isinstance(answer_from(next(v for k, v in results.items() if "LIMIT 3" in k)), list)
    assert answer_from(next(v for k, v in results.items() if "COUNT" in k)) == "0"
    assert answer_from(results["SELEC nonsense;"]) is None and answer_from(INSERT["results"]["insert"]) is None
    assert answer_from("Columns: MAX(x)\n(None,)\n(1 row)") is None


def _context(step, text, entry=TASK):
    return Context(task=_spec(entry), view=View(text), directive=Directive(), capabilities=TOOLS,
                   observation=Observation(text), step=step)


def test_an_episode_peeks_writes_checked_sql_and_commits_from_its_result():
    replies = iter(["", ""])
    llm = DoubleLLM(lambda c: 0.0 if c.strip() in ('"Drivers"', "WHERE \"Drivers\" LIKE '%jimmy%'") else -5.0,
                    reply=lambda messages: next(replies))
    action, ctx = SqlAction(ground=False), Ctx(llm=llm, task=_spec(TASK), prompts=PROMPTS)
    action.reset(ctx)
    peek = action.act(_context(0, TASK["first"]), ctx)
    assert peek.tool == "execute_sql" and "LIMIT 3" in peek.args["sql"] and peek.data["decided_by"] == "mechanism"
    query = action.act(_context(1, TASK["results"]['SELECT * FROM "race_results" LIMIT 3;']), ctx)
    where = "WHERE \"Drivers\" LIKE '%jimmy%'"
    assert query.args["sql"] == f'SELECT "Drivers" FROM "race_results" {where};'
    assert query.data == {"decided_by": "model_reply", "parsed": True, "attempts": 1, "select": '"Drivers"',
                          "select_method": "score", "where": where, "grounded": False}
    assert llm.score_calls[-2][0][-1] == {"role": "assistant", "content": "SELECT"}    # the select list by likelihood
    assert llm.score_calls[-1][0][-1] == {"role": "assistant", "content": 'SELECT "Drivers" FROM "race_results"'}
    messages, params = llm.chat_calls[0]
    assert messages[-1] == {"role": "assistant", "content": f'SELECT "Drivers" FROM "race_results" {where}'}
    assert params["stop"] == [";"]
    result = next(v for k, v in TASK["results"].items() if "LIKE" in k)
    commit = action.act(_context(2, result), ctx)
    assert commit.tool == "commit_answer" and commit.args["answer"] == answer_from(result)
    assert commit.data["mechanism"] == "sql:commit:answer"


def test_a_rejected_statement_is_resampled_then_falls_back_and_the_margin_commits():
    llm = DoubleLLM(lambda c: 0.0 if c == "SELECT" else -5.0, reply=" nickname please")
    action, ctx = SqlAction(peek=False, retries=1, ground=False), Ctx(llm=llm, task=_spec(TASK), prompts=PROMPTS)
    action.reset(ctx)
    sent = action.act(_context(1, TASK["first"]), ctx)
    assert len(llm.chat_calls) == 2 and llm.chat_calls[1][1]["temperature"] == 0.7
    assert "rejected" in llm.chat_calls[1][0][-2]["content"]
    assert sent.data["mechanism"] == "sql:fallback" and sent.data["parsed"] is False
    again = action.act(_context(2, "Columns: Laps\n('6',)\n(1 row)"), ctx)
    assert again.args["sql"].endswith(" nickname please;") and again.data["decided_by"] == "model_reply"
    last = action.act(_context(TASK["max_steps"] - 1, "Error: no such column"), ctx)
    assert last.tool == "commit_answer" and last.args["answer"] == "none"


def test_a_data_change_that_affected_rows_commits_done():
    llm = DoubleLLM(lambda c: 0.0 if c == "INSERT" else -5.0, reply=' INTO "x" VALUES (1)')
    action, ctx = SqlAction(peek=False), Ctx(llm=llm, task=_spec(INSERT), prompts=PROMPTS)
    action.reset(ctx)
    action.pending = "model"
    done = action.act(_context(2, INSERT["results"]["insert"], INSERT), ctx)
    assert (done.tool, done.args["answer"]) == ("commit_answer", "done")


def test_where_clauses_are_the_questions_phrases_against_each_column():
    table, columns = schema_of(TASK["description"])
    clauses = where_clauses(TASK["description"], columns)
    assert "WHERE \"Drivers\" LIKE '%jimmy%'" in clauses and all(not check_sql(
        f'SELECT COUNT(*) FROM "{table}" {c};', table, columns) for c in clauses)
    assert not any("%what%" in c or "%the%" in c for c in clauses)
    assert where_clauses("Question / instruction: Who is it?", columns) == []


def test_a_select_list_that_found_nothing_twice_is_dropped():
    liked = {'MAX(CAST(REPLACE("Class", \',\', \'\') AS REAL))': 0.0, '"Drivers"': -0.5}
    llm = DoubleLLM(lambda c: liked.get(c.strip(), -9.0), reply="")
    action, ctx = SqlAction(peek=False, ground=False), Ctx(llm=llm, task=_spec(TASK), prompts=PROMPTS)
    action.reset(ctx)
    picks = []
    for step in range(1, 4):
        picks.append(action.act(_context(step, "Columns: MAX(x)\n(None,)\n(1 row)"), ctx).data["select"])
    assert picks == [next(iter(liked))] * 2 + ['"Drivers"']
