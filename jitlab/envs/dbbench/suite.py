"""DBBench suite (AgentBench): answer questions about a table, or modify it, with SQL on SQLite.

    from jitlab.envs import get_suite
    suite = get_suite("dbbench"); spec = suite.tasks("dev")[0]; env = suite.make_env(spec)
    env.reset(); env.step("execute_sql", {"sql": "SELECT COUNT(*) FROM t"}); env.step("commit_answer", {"answer": "3"})
    python -m jitlab.envs.dbbench            # gold check: agreement per split and family, exclusions

Data: ``jitlab/envs/data/dbbench/`` (AgentBench's dev.jsonl = dev split, 60 tasks; test.jsonl =
test split, 200 tasks; Apache-2.0). Families are the task ``type`` (other, counting, comparison,
ranking, aggregation-SUM/MIN/MAX/AVG, INSERT, UPDATE).

Each episode builds its one table in a fresh in-memory SQLite database the way AgentBench builds
it in MySQL: every column is TEXT and every value is inserted as ``str(value)``. Text comparison
is made MySQL-like: columns use a case- and accent-insensitive collation (``MYSQL_CI``, as MySQL 8's
default) and LIKE folds case and accents the same way. ATTACH (files) is refused. Tools:
``execute_sql(sql)`` runs one statement (rows shown are capped at ``row_limit``; a statement is cut
off after ``time_limit_s`` by a progress handler; errors come back as observations) and
``commit_answer(answer)`` ends the episode.

Scoring. SELECT-type tasks: the committed answer is normalised and compared with the label as
AgentBench's ``DBResultProcessor.compare_results`` does (NULL/none/empty -> "0", "%" and thousands
separators stripped, numbers equal within 1e-2, several values compared as sets or, when all numeric,
matched one-to-one). INSERT/UPDATE tasks: a hash of the final table (rows sorted, values as stored)
is compared with the hash of a fresh copy on which the gold statement was run; the answer text is
ignored.

Gold check (``gold_check(split)``). The data was written for MySQL, and many SELECT tasks' ``sql``
field is a sketch that does not run or does not give the label even in MySQL. For SELECT tasks the
gold query is the task's ``sql`` after ``translate_mysql`` (backslash escapes -> SQL quoting), or
the SQLite query recorded in ``data/dbbench/fixes.jsonl``; it agrees when its result, committed as
the oracle commits it, scores 1 against the label. For INSERT/UPDATE the gold statement (the label,
or its fix) is run on a fresh table and the table's MySQL-style hash (AgentBench's
``md5(group_concat(substring(md5(concat_ws(',', cols)), 1, 5)))``) must equal the recorded
``answer_md5``. Tasks that cannot be made to agree are excluded (``excluded()`` lists them with
their reason; the same reasons are in fixes.jsonl).

Caveats: SQLite compares TEXT columns as text (``'100' < '17'``), unlike MySQL's implicit number
conversion; the task description says so and suggests CAST. ``reset(seed)`` ignores the seed.
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
import sqlite3
import time
import unicodedata
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path

from jitlab.envs.base import Score, TaskSpec, check_choice, interleave
from jitlab.protocol import Capability, Decision, Observation

__all__ = [
    "COMMIT_ANSWER",
    "DATA_DIR",
    "EXECUTE_SQL",
    "DBBenchConfig",
    "DBBenchEnv",
    "DBBenchOracle",
    "DBBenchSuite",
    "answers_match",
    "excluded",
    "gold_check",
    "load_entries",
    "mysql_table_md5",
    "normalize_answer",
    "table_hash",
    "translate_mysql",
]

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "dbbench"
_MODIFY = ("INSERT", "UPDATE", "DELETE")

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


# --------------------------------------------------------------------------- data

@cache
def load_entries(split: str) -> tuple[dict, ...]:
    """The raw AgentBench entries of a split, each with ``_id`` (``dev-000``...) added."""
    path = DATA_DIR / f"{split}.jsonl"
    entries = []
    for i, line in enumerate(path.read_text().splitlines()):
        if line.strip():
            entry = json.loads(line)
            entry["_id"] = f"{split}-{i:03d}"
            entries.append(entry)
    return tuple(entries)


@cache
def _fixes() -> dict[str, dict]:
    """id -> {"sql": replacement gold statement} or {"exclude": True}, each with a "reason"."""
    path = DATA_DIR / "fixes.jsonl"
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            out[record["id"]] = record
    return out


def excluded() -> dict[str, str]:
    """Task ids left out of the suite, with the reason recorded in fixes.jsonl."""
    return {k: v["reason"] for k, v in _fixes().items() if v.get("exclude")}


def _family(entry: dict) -> str:
    return entry["type"][0]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _fold(text: str) -> str:
    """MySQL utf8mb4_0900_ai_ci-like key: accents dropped, case folded."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch)).casefold()


def _collate(a: str, b: str) -> int:
    a, b = _fold(a), _fold(b)
    return (a > b) - (a < b)


@lru_cache(maxsize=512)
def _like_regex(pattern: str, escape: str | None) -> re.Pattern:
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _like(pattern, value, escape="\\"):
    # MySQL's LIKE escapes with a backslash unless told otherwise
    if pattern is None or value is None:
        return None
    return int(bool(_like_regex(_fold(str(pattern)), escape).fullmatch(_fold(str(value)))))


def _authorize(action: int, *_args) -> int:
    # the database lives in memory: ATTACH / VACUUM INTO would let SQL write files in the trusted parent
    return sqlite3.SQLITE_DENY if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH) else sqlite3.SQLITE_OK


def _connect() -> sqlite3.Connection:
    """An in-memory SQLite connection with MySQL-like text matching: the MYSQL_CI collation (case- and
    accent-insensitive, as MySQL 8's default) and a LIKE that folds case and accents the same way
    (backslash escapes, as in MySQL). ATTACH and files are refused; values are capped at 10 MB."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.set_authorizer(_authorize)
    if hasattr(conn, "setlimit"):  # Python >= 3.11: cap string/blob size so one statement cannot eat the RAM
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 10_000_000)
    conn.create_collation("MYSQL_CI", _collate)
    conn.create_function("like", 2, _like, deterministic=True)
    conn.create_function("like", 3, _like, deterministic=True)
    return conn


def _build_db(entry: dict) -> sqlite3.Connection:
    """A fresh in-memory database holding the entry's table, built as AgentBench builds it (all TEXT)."""
    conn = _connect()
    table = entry["table"]
    columns = [c["name"] for c in table["table_info"]["columns"]]
    conn.execute(f"CREATE TABLE {_quote(table['table_name'])} "
                 f"({', '.join(_quote(c) + ' TEXT COLLATE MYSQL_CI' for c in columns)})")
    rows = [tuple(str(v) for v in row) for row in table["table_info"]["rows"]]
    if rows:
        conn.executemany(f"INSERT INTO {_quote(table['table_name'])} VALUES ({', '.join('?' * len(columns))})", rows)
    return conn


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "''", '"': '"', "%": "\\%", "_": "\\_"}


def translate_mysql(sql: str) -> str:
    """MySQL backslash escapes in string literals -> SQLite text (``\\'`` -> ``''``, ``\\n`` -> newline, ...)."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), sql, flags=re.DOTALL)


def _table_rows(conn: sqlite3.Connection, entry: dict) -> list[tuple] | None:
    table = entry["table"]
    cols = ", ".join(_quote(c["name"]) for c in table["table_info"]["columns"])
    try:
        return conn.execute(f"SELECT {cols} FROM {_quote(table['table_name'])}").fetchall()
    except sqlite3.Error:
        return None


def table_hash(conn: sqlite3.Connection, entry: dict) -> str | None:
    """sha256 of the task table's rows (task columns, values as text, NULL kept, rows sorted); None if gone."""
    rows = _table_rows(conn, entry)
    if rows is None:
        return None
    canon = sorted(json.dumps([None if v is None else str(v) for v in row], ensure_ascii=False) for row in rows)
    return hashlib.sha256("\n".join(canon).encode()).hexdigest()


def mysql_table_md5(conn: sqlite3.Connection, entry: dict, max_len: int = 1024) -> str | None:
    """AgentBench's MySQL table hash computed in Python, to compare with the data's ``answer_md5``:
    md5(group_concat(substring(md5(concat_ws(',', cols)), 1, 5) order by rowhash)) with MySQL's
    default group_concat_max_len (1024 bytes)."""
    rows = _table_rows(conn, entry)
    if not rows:
        return None
    hashes = sorted(hashlib.md5(",".join(str(v) for v in row if v is not None).encode()).hexdigest()[:5]
                    for row in rows)
    return hashlib.md5(",".join(hashes)[:max_len].encode()).hexdigest()


# --------------------------------------------------------------------------- answers

_SPECIAL = {"none", "null", "undefined", "nan", "inf", "infinity", "-inf", "-infinity", ""}


def _norm_value(value) -> str:
    if value is None:
        return "0"
    text = str(value).strip()
    if text.endswith("%"):
        text = text[:-1].strip()
    if "," in text and not (text.startswith("[") and text.endswith("]")):
        text = text.replace(",", "")
    return "0" if text.lower() in _SPECIAL else text


def _item(item) -> str:
    if isinstance(item, tuple) and len(item) == 1:
        item = item[0]
    return _norm_value(str(item).strip().strip("'\""))


def normalize_answer(answer) -> list[str]:
    """AgentBench's answer cleaning: a value, a list, or a string holding a Python list -> list of strings."""
    if answer is None:
        return ["0"]
    if isinstance(answer, (list, tuple)):
        return [_item(x) for x in answer]
    text = str(answer).strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            parsed = None
        if isinstance(parsed, (list, tuple)):
            return [_item(x) for x in parsed]
        return [_item(x) for x in re.findall(r"'[^']*'|\"[^\"]*\"|[^,]+", text[1:-1]) if x.strip()]
    return [_item(text)]


def _is_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _close(a: str, b: str) -> bool:
    return abs(float(a) - float(b)) <= 1e-2


def answers_match(answer, label) -> bool:
    """True when ``answer`` matches ``label`` under AgentBench's comparison rules."""
    got, want = normalize_answer(answer), normalize_answer(label)
    if len(got) == 1 and len(want) == 1:
        if _is_float(got[0]) and _is_float(want[0]):
            return _close(got[0], want[0])
        return got[0] == want[0]
    if got and want and all(map(_is_float, got)) and all(map(_is_float, want)):
        if len(got) != len(want):
            return False
        free = list(want)
        for g in got:
            hit = next((i for i, w in enumerate(free) if _close(g, w)), None)
            if hit is None:
                return False
            free.pop(hit)
        return True
    return set(got) == set(want)


# --------------------------------------------------------------------------- executing SQL

@dataclass
class _Result:
    columns: list[str] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)
    truncated: bool = False
    error: str = ""
    changed: int = -1
    timed_out: bool = False


def _execute(conn: sqlite3.Connection, sql: str, row_limit: int, time_limit_s: float) -> _Result:
    """Run one statement with a time limit (progress handler) and fetch at most row_limit + 1 rows."""
    deadline = time.monotonic() + time_limit_s
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    result = _Result()
    try:
        cursor = conn.execute(sql)
        if cursor.description is not None:
            result.columns = [d[0] for d in cursor.description]
            rows = cursor.fetchmany(row_limit + 1)
            result.truncated = len(rows) > row_limit
            result.rows = rows[:row_limit]
        else:
            result.changed = cursor.rowcount
        cursor.close()
    except sqlite3.OperationalError as exc:
        if time.monotonic() > deadline or "interrupted" in str(exc):
            result.timed_out = True
            result.error = (f"statement cut off after {time_limit_s:g} s (time limit); it ran too long or never "
                            f"ends (an unbounded recursive query?). Add a LIMIT or a stop condition.")
        else:
            result.error = f"{type(exc).__name__}: {exc}"
    except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError, MemoryError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        conn.set_progress_handler(None, 0)
    return result


def _render(result: _Result, row_limit: int, max_chars: int) -> str:
    if result.error:
        return f"Error: {result.error}"
    if not result.columns:
        return f"OK. {max(result.changed, 0)} row(s) affected."
    lines = ["Columns: " + ", ".join(result.columns)]
    lines += [repr(tuple(row)) for row in result.rows]
    if result.truncated:
        lines.append(f"Result truncated: showing the first {row_limit} rows; the query returned more. "
                     f"Use WHERE, LIMIT, COUNT or aggregates to narrow it.")
    else:
        lines.append(f"({len(result.rows)} row{'s' * (len(result.rows) != 1)})")
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n... output cut at {max_chars} characters."
    return text


def _rows_to_answer(rows: list[tuple]) -> list:
    """How the oracle commits a query result: every value of every row; an empty result is 'none'."""
    values = [v for row in rows for v in row]
    return ["none"] if not values else ["none" if v is None else str(v) for v in values]


# --------------------------------------------------------------------------- gold statements

def _gold_statement(entry: dict) -> str | None:
    fix = _fixes().get(entry["_id"], {})
    if "sql" in fix:
        return fix["sql"]
    if _family(entry) in _MODIFY:
        return translate_mysql(entry["label"][0])
    query = (entry.get("sql") or {}).get("query")
    return translate_mysql(query) if query else None


def _gold_table_hash(entry: dict) -> str | None:
    conn = _build_db(entry)
    try:
        _execute(conn, _gold_statement(entry), 10, 10.0)
        return table_hash(conn, entry)
    finally:
        conn.close()


def gold_check(split: str) -> list[dict]:
    """Run every task's gold statement through the scorer. One dict per task: id, family, status
    (``raw`` when the shipped statement agrees as is, ``fixed`` when it agrees after translate_mysql or
    a recorded fix, ``excluded`` or ``disagrees``), agrees, detail."""
    check_choice("split", split, ["dev", "test"])
    out = []
    for entry in load_entries(split):
        fix = _fixes().get(entry["_id"], {})
        record = {"id": entry["_id"], "family": _family(entry)}
        if fix.get("exclude"):
            out.append({**record, "status": "excluded", "agrees": False, "detail": fix["reason"]})
            continue
        raw = entry["label"][0] if _family(entry) in _MODIFY else (entry.get("sql") or {}).get("query")
        raw_ok = _agrees(entry, raw)[0] if raw else False
        ok, detail = _agrees(entry, _gold_statement(entry))
        status = "raw" if raw_ok else ("fixed" if ok else "disagrees")
        out.append({**record, "status": status, "agrees": ok, "detail": detail})
    return out


def _agrees(entry: dict, statement: str | None) -> tuple[bool, str]:
    if not statement:
        return False, "no gold statement"
    conn = _build_db(entry)
    try:
        result = _execute(conn, statement, 1000, 10.0)
        if result.error:
            return False, f"gold statement fails: {result.error}"
        if _family(entry) in _MODIFY:
            got = mysql_table_md5(conn, entry)
            want = re.findall(r"[0-9a-f]{32}", entry.get("answer_md5") or "")
            return (bool(want) and got == want[0]), f"md5 {got} vs answer_md5 {want[0] if want else None}"
        answer = _rows_to_answer(result.rows)
        return answers_match(answer, entry["label"]), f"result {answer[:5]} vs label {entry['label'][:5]}"
    finally:
        conn.close()


# --------------------------------------------------------------------------- suite

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
    families = ["other", "counting", "comparison", "ranking", "aggregation-SUM", "aggregation-MIN",
                "aggregation-MAX", "aggregation-AVG", "INSERT", "UPDATE"]
    splits = ["dev", "test"]

    def __init__(self, config: DBBenchConfig | None = None):
        self.config = config or DBBenchConfig()

    def tasks(self, split: str = "dev", family: str | None = None) -> list[TaskSpec]:
        check_choice("split", split, self.splits)
        check_choice("family", family, self.families)
        skip = excluded()
        specs = []
        for entry in load_entries(split):
            fam = _family(entry)
            if entry["_id"] in skip or (family is not None and fam != family):
                continue
            specs.append(TaskSpec(
                id=f"dbbench-{entry['_id']}", suite=self.name, family=fam, split=split,
                description=self._describe(entry), tools=[EXECUTE_SQL, COMMIT_ANSWER],
                max_steps=self.config.max_steps,
                data={"entry_id": entry["_id"], "gold": _gold_statement(entry)}))
        return interleave(specs)

    def _describe(self, entry: dict) -> str:
        fam, table = _family(entry), entry["table"]
        modify = fam in _MODIFY
        return _DESCRIPTION.format(
            family=fam, goal=_MODIFY_GOAL.format(kind=fam) if modify else _SELECT_GOAL,
            question=entry["description"], table=_quote(table["table_name"]),
            columns=", ".join(_quote(c["name"]) for c in table["table_info"]["columns"]),
            nrows=len(table["table_info"]["rows"]), add=entry.get("add_description", ""),
            row_limit=self.config.row_limit, time_limit=self.config.time_limit_s,
            success=_MODIFY_SUCCESS.format(kind=fam) if modify else _SELECT_SUCCESS,
            max_steps=self.config.max_steps)

    def make_env(self, spec: TaskSpec) -> DBBenchEnv:
        return DBBenchEnv(spec, self.config)

    def oracle(self, env: DBBenchEnv) -> DBBenchOracle:
        return DBBenchOracle(env)


def _entry(spec: TaskSpec) -> dict:
    split, _, _ = spec.data["entry_id"].partition("-")
    return next(e for e in load_entries(split) if e["_id"] == spec.data["entry_id"])


class DBBenchEnv:
    """One DBBench task on a fresh in-memory SQLite database."""

    def __init__(self, spec: TaskSpec, config: DBBenchConfig | None = None):
        self.spec, self.config = spec, config or DBBenchConfig()
        self.entry = _entry(spec)
        self.conn: sqlite3.Connection | None = None
        self.committed = None
        self.finished = False
        self.last_rows: list[tuple] = []

    def reset(self, seed: int = 0) -> Observation:
        self.close()
        self.conn = _build_db(self.entry)
        self.committed, self.finished, self.last_rows = None, False, []
        table = self.entry["table"]
        text = (f"Database ready (SQLite). Table {_quote(table['table_name'])} with columns "
                f"{', '.join(_quote(c['name']) for c in table['table_info']['columns'])}.\n"
                f"Task: {self.entry['description']}")
        return Observation(text)

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
            result = _execute(self.conn, sql, self.config.row_limit, self.config.time_limit_s)
            self.last_rows = result.rows
            return Observation(_render(result, self.config.row_limit, self.config.max_chars),
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
        if _family(self.entry) in _MODIFY:
            got, want = table_hash(self.conn, self.entry), _gold_table_hash(self.entry)
            ok = got is not None and got == want
            return Score(success=ok, reward=float(ok), info={"table_matches": ok})
        ok = answers_match(self.committed, self.entry["label"])
        return Score(success=ok, reward=float(ok), info={"answer": normalize_answer(self.committed)})

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class DBBenchOracle:
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
        if _family(self.env.entry) in _MODIFY:
            return Decision("commit_answer", {"answer": "done"})
        return Decision("commit_answer", {"answer": _rows_to_answer(self.env.last_rows)})

    def observe(self, decision: Decision, obs: Observation, step: int) -> None:
        pass


def _main() -> None:
    from collections import Counter
    for split in ("dev", "test"):
        rows = gold_check(split)
        by = Counter((r["family"], r["status"]) for r in rows)
        statuses = Counter(r["status"] for r in rows)
        print(f"{split}: {len(rows)} tasks; " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
        for fam in sorted({r["family"] for r in rows}):
            print(f"  {fam:16s} " + ", ".join(f"{s} {by[(fam, s)]}" for s in ("raw", "fixed", "disagrees", "excluded")
                                              if by[(fam, s)]))
        for r in rows:
            if r["status"] in ("disagrees", "excluded"):
                print(f"  {r['status']:9s} {r['id']} [{r['family']}] {r['detail']}")


if __name__ == "__main__":
    _main()
