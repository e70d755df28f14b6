"""DBBench gold statements: which statement solves each task, the gold check, and the seeded row order.

The data was written for MySQL, and many SELECT tasks' ``sql`` field is a sketch that does not run or
does not give the label even in MySQL. For SELECT tasks the gold query is the task's ``sql`` after
``translate_mysql`` (backslash escapes -> SQL quoting), or the SQLite query recorded in
``data/dbbench/fixes.jsonl``; it agrees when its result, committed as the oracle commits it
(``rows_to_answer``), scores 1 against the label. For INSERT/UPDATE the gold statement (the label, or
its fix) is run on a fresh table and the table's MySQL-style hash must equal the recorded
``answer_md5``. ``gold_check(split)`` reports this per task; ``python -m jitlab.envs.dbbench`` prints it.

Seeds (``row_order``): seed 0 builds the table in the shipped row order. Any other seed inserts the
rows in a permutation drawn from (task id, seed), so queries without ORDER BY list rows in another
order and the first rows an agent sees change; the question, the data and the label stay the same.
The permutation is kept only when the gold statement still gives the label under it (for
INSERT/UPDATE: the same final table); a task whose gold answer depends on the row order (a tie
broken by insertion order) keeps the shipped order at every seed.
"""
from __future__ import annotations

import random
import re
from collections import Counter
from functools import lru_cache

from jitlab.envs.base import check_choice
from jitlab.envs.dbbench.data import MODIFY, SPLITS, entry_of, family_of, fixes, load_entries
from jitlab.envs.dbbench.scoring import answers_match, mysql_table_md5, table_hash
from jitlab.envs.dbbench.sql import build_db, execute, translate_mysql

__all__ = ["gold_check", "gold_statement", "gold_table_hash", "report", "row_order", "rows_to_answer"]


def rows_to_answer(rows: list[tuple]) -> list:
    """How the oracle commits a query result: every value of every row; an empty result is 'none'."""
    values = [v for row in rows for v in row]
    return ["none"] if not values else ["none" if v is None else str(v) for v in values]


def gold_statement(entry: dict) -> str | None:
    """The statement that solves the task on SQLite: the recorded fix, else the shipped one translated."""
    fix = fixes().get(entry["_id"], {})
    if "sql" in fix:
        return fix["sql"]
    if family_of(entry) in MODIFY:
        return translate_mysql(entry["label"][0])
    query = (entry.get("sql") or {}).get("query")
    return translate_mysql(query) if query else None


def gold_table_hash(entry: dict, order: list[int] | None = None) -> str | None:
    """``table_hash`` of the table (rows inserted in ``order``) after the gold statement: INSERT/UPDATE's target."""
    conn = build_db(entry, order)
    try:
        execute(conn, gold_statement(entry), 10, 10.0)
        return table_hash(conn, entry)
    finally:
        conn.close()


def row_order(entry: dict, seed: int) -> list[int] | None:
    """The order the rows are inserted in for ``seed``: None (as shipped) for seed 0, for tables of fewer than
    two rows, and for tasks whose gold answer changes under the seed's permutation; else the permutation."""
    return _row_order(entry["_id"], int(seed))


@lru_cache(maxsize=4096)
def _row_order(entry_id: str, seed: int) -> list[int] | None:
    entry = entry_of(entry_id)
    n = len(entry["table"]["table_info"]["rows"])
    if seed == 0 or n < 2:
        return None
    order = list(range(n))
    random.Random(f"{entry_id}:{seed}").shuffle(order)  # str seeds hash with sha512: the same in every process
    if family_of(entry) in MODIFY:
        return order if gold_table_hash(entry, order) == gold_table_hash(entry) else None
    conn = build_db(entry, order)
    try:
        result = execute(conn, gold_statement(entry) or "", 1000, 10.0)
    finally:
        conn.close()
    return order if not result.error and answers_match(rows_to_answer(result.rows), entry["label"]) else None


def gold_check(split: str) -> list[dict]:
    """Run every task's gold statement through the scorer. One dict per task: id, family, status
    (``raw`` when the shipped statement agrees as is, ``fixed`` when it agrees after translate_mysql or
    a recorded fix, ``excluded`` or ``disagrees``), agrees, detail."""
    check_choice("split", split, SPLITS)
    out = []
    for entry in load_entries(split):
        fix = fixes().get(entry["_id"], {})
        record = {"id": entry["_id"], "family": family_of(entry)}
        if fix.get("exclude"):
            out.append({**record, "status": "excluded", "agrees": False, "detail": fix["reason"]})
            continue
        raw = entry["label"][0] if family_of(entry) in MODIFY else (entry.get("sql") or {}).get("query")
        raw_ok = _agrees(entry, raw)[0] if raw else False
        ok, detail = _agrees(entry, gold_statement(entry))
        status = "raw" if raw_ok else ("fixed" if ok else "disagrees")
        out.append({**record, "status": status, "agrees": ok, "detail": detail})
    return out


def _agrees(entry: dict, statement: str | None) -> tuple[bool, str]:
    if not statement:
        return False, "no gold statement"
    conn = build_db(entry)
    try:
        result = execute(conn, statement, 1000, 10.0)
        if result.error:
            return False, f"gold statement fails: {result.error}"
        if family_of(entry) in MODIFY:
            got = mysql_table_md5(conn, entry)
            want = re.findall(r"[0-9a-f]{32}", entry.get("answer_md5") or "")
            return (bool(want) and got == want[0]), f"md5 {got} vs answer_md5 {want[0] if want else None}"
        answer = rows_to_answer(result.rows)
        return answers_match(answer, entry["label"]), f"result {answer[:5]} vs label {entry['label'][:5]}"
    finally:
        conn.close()


def report(seeds: tuple[int, ...] = (1, 2, 3)) -> None:
    """Print the gold check per split and family, the disagreeing and excluded tasks, and how many kept tasks
    keep the shipped row order at each of ``seeds`` (their gold answer depends on the order)."""
    for split in SPLITS:
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
        kept = [entry_of(r["id"]) for r in rows if r["status"] != "excluded"]
        single = sum(len(e["table"]["table_info"]["rows"]) < 2 for e in kept)
        for seed in seeds:
            fixed = [e["_id"] for e in kept if len(e["table"]["table_info"]["rows"]) > 1 and row_order(e, seed) is None]
            print(f"  seed {seed}: rows shuffled in {len(kept) - single - len(fixed)} of {len(kept)} kept tasks; "
                  f"{single} have one row; shipped order kept for {len(fixed)} (the gold answer depends on it)"
                  + (": " + ", ".join(fixed) if fixed else ""))
