"""MySQL-like SQL on SQLite for DBBench: the connection, building a task's table, running one statement.

AgentBench runs its tasks on MySQL; here each episode gets a fresh in-memory SQLite database built the
way AgentBench builds its table (every column TEXT, every value inserted as ``str(value)``). Text
comparison is made MySQL-like: columns use a case- and accent-insensitive collation (``MYSQL_CI``, as
MySQL 8's default) and LIKE folds case and accents the same way, with backslash escapes.
``translate_mysql`` turns MySQL's backslash escapes in string literals into SQLite quoting.
``execute`` runs one statement with a time limit (a progress handler) and a row cap; errors come back
in the result, never as exceptions.

Caveats: ATTACH/DETACH are refused (the database lives in memory; SQL must not write files in the
trusted parent) and values are capped at 10 MB (Python >= 3.11). SQLite still compares TEXT as text
(``'100' < '17'``), unlike MySQL's implicit number conversion.
"""
from __future__ import annotations

import re
import sqlite3
import time
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["SqlResult", "build_db", "connect", "execute", "quote", "render_result", "translate_mysql"]


def quote(name: str) -> str:
    """An SQL identifier in double quotes (table and column names hold spaces and symbols)."""
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


def connect() -> sqlite3.Connection:
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


def build_db(entry: dict, order: list[int] | None = None) -> sqlite3.Connection:
    """A fresh in-memory database holding the entry's table, built as AgentBench builds it (all TEXT).
    ``order`` (a permutation of the row indices) inserts the rows in that order: SQLite returns rows in
    insertion order when a query has no ORDER BY, so this changes what unordered queries show first."""
    conn = connect()
    table = entry["table"]
    columns = [c["name"] for c in table["table_info"]["columns"]]
    conn.execute(f"CREATE TABLE {quote(table['table_name'])} "
                 f"({', '.join(quote(c) + ' TEXT COLLATE MYSQL_CI' for c in columns)})")
    rows = [tuple(str(v) for v in row) for row in table["table_info"]["rows"]]
    if order is not None:
        rows = [rows[i] for i in order]
    if rows:
        conn.executemany(f"INSERT INTO {quote(table['table_name'])} VALUES ({', '.join('?' * len(columns))})", rows)
    return conn


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "''", '"': '"', "%": "\\%", "_": "\\_"}


def translate_mysql(sql: str) -> str:
    """MySQL backslash escapes in string literals -> SQLite text (``\\'`` -> ``''``, ``\\n`` -> newline, ...)."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), sql, flags=re.DOTALL)


@dataclass
class SqlResult:
    """One statement's outcome: columns and rows (a query), ``changed`` (other statements) or ``error``."""
    columns: list[str] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)
    truncated: bool = False
    error: str = ""
    changed: int = -1
    timed_out: bool = False


def execute(conn: sqlite3.Connection, sql: str, row_limit: int, time_limit_s: float) -> SqlResult:
    """Run one statement with a time limit (progress handler) and fetch at most row_limit + 1 rows."""
    deadline = time.monotonic() + time_limit_s
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    result = SqlResult()
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


def render_result(result: SqlResult, row_limit: int, max_chars: int) -> str:
    """The observation text for a result: rows as tuples, a note when cut, errors as ``Error: ...``."""
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
