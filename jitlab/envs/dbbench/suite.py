"""DBBench suite (AgentBench): answer questions about a table, or modify it, with SQL on SQLite.

    from jitlab.envs import get_suite
    suite = get_suite("dbbench"); spec = suite.tasks("dev")[0]; env = suite.make_env(spec)
    env.reset(); env.step("execute_sql", {"sql": "SELECT COUNT(*) FROM t"}); env.step("commit_answer", {"answer": "3"})
    python -m jitlab.envs.dbbench            # gold check: agreement per split and family, exclusions

Data: ``jitlab/envs/data/dbbench/`` (AgentBench's dev.jsonl = dev split, 60 tasks; test.jsonl =
test split, 200 tasks; train.jsonl = train split, the standard set's other 100 rows, 85 kept; Apache-2.0). Families are the task ``type`` (other, counting, comparison,
ranking, aggregation-SUM/MIN/MAX/AVG, INSERT, UPDATE). The package's other modules: ``data`` (entries,
fixes), ``sql`` (MySQL-like SQLite), ``scoring`` (answer and table comparison), ``gold`` (gold
statements, gold check, seeded row order).

Each episode builds its one table in a fresh in-memory SQLite database the way AgentBench builds
it in MySQL (:mod:`jitlab.envs.dbbench.sql`). Tools: ``execute_sql(sql)`` runs one statement (rows
shown are capped at ``row_limit``; a statement is cut off after ``time_limit_s``; errors come back as
observations) and ``commit_answer(answer)`` ends the episode. Scoring: :mod:`jitlab.envs.dbbench.scoring`
(the answer for SELECT-type tasks, the final table for INSERT/UPDATE).

``reset(seed)``: seed 0 is the task as shipped; another seed inserts the table's rows in a permutation
drawn from (task id, seed) (:func:`jitlab.envs.dbbench.gold.row_order`), the same at every reset with
that seed. Question, data and label are unchanged; tasks whose gold answer depends on the row order
keep the shipped order. The first observation's ``info`` says which (``row_order``).

Caveats: SQLite compares TEXT columns as text (``'100' < '17'``), unlike MySQL's implicit number
conversion; the task description says so and suggests CAST.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from jitlab.envs.base import Score, TaskSpec, check_choice, interleave
from jitlab.envs.dbbench.data import MODIFY, SPLITS, entry_of, excluded, family_of, load_entries
from jitlab.envs.dbbench.gold import gold_statement, gold_table_hash, row_order, rows_to_answer
from jitlab.envs.dbbench.scoring import answers_match, normalize_answer, table_hash
from jitlab.envs.dbbench.sql import build_db, execute, quote, render_result
from jitlab.protocol import Agent, Capability, Decision, Observation

__all__ = ["COMMIT_ANSWER", "EXECUTE_SQL", "DBBenchConfig", "DBBenchEnv", "DBBenchOracle", "DBBenchSuite"]

EXECUTE_SQL = Capability(
    "execute_sql", "Run one SQL statement (SQLite) on the task's database and see its result or error.",
    {"type": "object", "properties": {"sql": {"type": "string", "description": "one SQL statement"}},
     "required": ["sql"]})
COMMIT_ANSWER = Capability(
    "commit_answer", "Commit the final answer and end the episode. For questions: the answer value(s), a "
                     "string or a list of strings. For INSERT/UPDATE tasks the answer is ignored (the table is "
                     "checked); commit anything, e.g. 'done'.",
    {"type": "object", "properties": {"answer": {"anyOf": [{"type": "string"},
                                                           {"type": "array", "items": {"type": "string"}}]}},
     "required": ["answer"]})


@dataclass
class DBBenchConfig:
    """Limits of the SQL tool and the episode."""
    row_limit: int = field(default=50, metadata={"help": "rows shown per query; more rows are cut with a note"})
    time_limit_s: float = field(default=2.0, metadata={"help": "a statement running longer is interrupted"})
    max_chars: int = field(default=6000, metadata={"help": "observation text is cut to this many characters"})
    max_steps: int = field(default=15, metadata={"help": "tool calls allowed per episode"})


_DESCRIPTION = """DBBench ({family}) database task from AgentBench, on SQLite (not MySQL).
{goal}
Question / instruction: {question}
Table {table} has columns: {columns} ({nrows} rows). {add}
Every column is stored as TEXT, exactly as loaded (numbers too): SQLite compares text as text, so use CAST(col AS REAL) for numeric comparisons, sorting or arithmetic; quote table and column names that contain spaces or symbols with double quotes or backticks.
Tools: execute_sql(sql) runs ONE SQL statement and returns its rows (at most {row_limit} rows are shown; a statement running longer than {time_limit:g} s is cut off; errors are returned as text). commit_answer(answer) ends the episode; answer is a string or a list of strings.
Success: {success}
Budget: {max_steps} tool calls."""

_SELECT_GOAL = "Answer the question by querying the table."
_SELECT_SUCCESS = ("the committed answer equals the expected value(s): numbers compare within 0.01, several values "
                   "compare as a set (order ignored), an empty result/NULL is 'none'. Commit only the values, not "
                   "column names or sentences.")
_MODIFY_GOAL = "Change the table as instructed with an {kind} statement."
_MODIFY_SUCCESS = ("after you commit, the whole table (rows and values) must equal the table the intended {kind} "
                    "statement produces; the answer text is ignored. Do not change anything else.")


class DBBenchSuite:
    name = "dbbench"
    version = "1"  # the suite version (envs.base.suite_version): bump when tasks, actions or scoring change
    families = ["other", "counting", "comparison", "ranking", "aggregation-SUM", "aggregation-MIN",
                "aggregation-MAX", "aggregation-AVG", "INSERT", "UPDATE"]
    splits = list(SPLITS)
    reset_varies = True  # another reset seed: the rows inserted in another order (gold.row_order; jitlab/repeats.py)

    def __init__(self, config: DBBenchConfig | None = None):
        self.config = config or DBBenchConfig()

    def tasks(self, split: str = "dev", family: str | None = None) -> list[TaskSpec]:
        check_choice("split", split, self.splits)
        check_choice("family", family, self.families)
        skip = excluded()
        specs = []
        for entry in load_entries(split):
            fam = family_of(entry)
            if entry["_id"] in skip or (family is not None and fam != family):
                continue
            specs.append(TaskSpec(
                id=f"dbbench-{entry['_id']}", suite=self.name, family=fam, split=split,
                description=self._describe(entry), tools=[EXECUTE_SQL, COMMIT_ANSWER],
                max_steps=self.config.max_steps,
                data={"entry_id": entry["_id"], "gold": gold_statement(entry)}))
        return interleave(specs)

    def _describe(self, entry: dict) -> str:
        fam, table = family_of(entry), entry["table"]
        modify = fam in MODIFY
        return _DESCRIPTION.format(
            family=fam, goal=_MODIFY_GOAL.format(kind=fam) if modify else _SELECT_GOAL,
            question=entry["description"], table=quote(table["table_name"]),
            columns=", ".join(quote(c["name"]) for c in table["table_info"]["columns"]),
            nrows=len(table["table_info"]["rows"]), add=entry.get("add_description", ""),
            row_limit=self.config.row_limit, time_limit=self.config.time_limit_s,
            success=_MODIFY_SUCCESS.format(kind=fam) if modify else _SELECT_SUCCESS,
            max_steps=self.config.max_steps)

    def make_env(self, spec: TaskSpec) -> DBBenchEnv:
        return DBBenchEnv(spec, self.config)

    def oracle(self, env: DBBenchEnv) -> DBBenchOracle:
        return DBBenchOracle(env)


class DBBenchEnv:
    """One DBBench task on a fresh in-memory SQLite database."""

    def __init__(self, spec: TaskSpec, config: DBBenchConfig | None = None):
        self.spec, self.config = spec, config or DBBenchConfig()
        self.entry = entry_of(spec.data["entry_id"])
        self.conn: sqlite3.Connection | None = None
        self.committed = None
        self.finished = False
        self.last_rows: list[tuple] = []
        self.order: list[int] | None = None    # the seed's row order; None = as shipped

    def reset(self, seed: int = 0) -> Observation:
        """A fresh table: the shipped row order at seed 0, the seed's permutation otherwise (``gold.row_order``)."""
        self.close()
        self.order = row_order(self.entry, seed)
        self.conn = build_db(self.entry, self.order)
        self.committed, self.finished, self.last_rows = None, False, []
        table = self.entry["table"]
        text = (f"Database ready (SQLite). Table {quote(table['table_name'])} with columns "
                f"{', '.join(quote(c['name']) for c in table['table_info']['columns'])}.\n"
                f"Task: {self.entry['description']}")
        return Observation(text, info={"seed": seed, "row_order": "as shipped" if self.order is None else "shuffled"})

    def step(self, tool: str, args: dict) -> Observation:
        if self.finished:
            return Observation("The episode is over: an answer was committed.", done=True)
        if self.conn is None:
            return Observation("Error: the database is not set up; call reset() first.")
        args = args if isinstance(args, dict) else {}
        if tool == "execute_sql":
            sql = args.get("sql")
            if not isinstance(sql, str) or not sql.strip():
                return Observation("Error: execute_sql needs a non-empty string argument 'sql'.")
            result = execute(self.conn, sql, self.config.row_limit, self.config.time_limit_s)
            self.last_rows = result.rows
            return Observation(render_result(result, self.config.row_limit, self.config.max_chars),
                               info={"timed_out": result.timed_out, "truncated": result.truncated,
                                     "error": bool(result.error)})
        if tool == "commit_answer":
            if "answer" not in args:
                return Observation("Error: commit_answer needs an argument 'answer' (a string or a list of strings).")
            self.committed, self.finished = args["answer"], True
            score = self.score()
            return Observation("Answer committed. The episode is over.", done=True, reward=score.reward)
        return Observation(f"Error: unknown tool {tool!r}; the tools are execute_sql(sql) and commit_answer(answer).")

    def score(self) -> Score:
        if not self.finished or self.conn is None:
            return Score(success=False, reward=0.0, info={"reason": "no answer committed"})
        if family_of(self.entry) in MODIFY:
            got, want = table_hash(self.conn, self.entry), gold_table_hash(self.entry, self.order)
            ok = got is not None and got == want
            return Score(success=ok, reward=float(ok), info={"table_matches": ok})
        ok = answers_match(self.committed, self.entry["label"])
        return Score(success=ok, reward=float(ok), info={"answer": normalize_answer(self.committed)})

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class DBBenchOracle(Agent):
    """Runs the gold statement, then commits: the query's values for questions, 'done' for changes.
    Reads the task's private data; a sanity check of env and scorer, never a baseline."""

    def __init__(self, env: DBBenchEnv):
        self.env = env
        self.ran = False

    def begin(self, task, obs: Observation) -> None:
        self.ran = False

    def decide(self, step: int) -> Decision:
        if not self.ran:
            self.ran = True
            return Decision("execute_sql", {"sql": self.env.spec.data["gold"]}, thought="gold statement")
        if family_of(self.env.entry) in MODIFY:
            return Decision("commit_answer", {"answer": "done"})
        return Decision("commit_answer", {"answer": rows_to_answer(self.env.last_rows)})

    def observe(self, decision: Decision, obs: Observation, step: int) -> None:
        pass
