"""DBBench scoring: AgentBench's answer comparison and the table hashes.

SELECT-type tasks: the committed answer is normalised and compared with the label as AgentBench's
``DBResultProcessor.compare_results`` does (NULL/none/empty -> "0", "%" and thousands separators
stripped, numbers equal within 1e-2, several values compared as sets or, when all numeric, matched
one-to-one). INSERT/UPDATE tasks: ``table_hash`` of the final table (rows sorted, values as stored, so
row order does not matter) is compared with the same hash after the gold statement.
``mysql_table_md5`` is AgentBench's MySQL table hash, used by the gold check against the data's
``answer_md5``.
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
import sqlite3

from jitlab.envs.dbbench.sql import quote

__all__ = ["answers_match", "mysql_table_md5", "normalize_answer", "table_hash"]


def _table_rows(conn: sqlite3.Connection, entry: dict) -> list[tuple] | None:
    table = entry["table"]
    cols = ", ".join(quote(c["name"]) for c in table["table_info"]["columns"])
    try:
        return conn.execute(f"SELECT {cols} FROM {quote(table['table_name'])}").fetchall()
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
