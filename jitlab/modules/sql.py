"""SQL that is SQL: a reply format a 135M model can keep, checked by SQLite's parser, and a commit policy.

Idea: asked for a tool call, a small model writes prose into ``execute_sql`` and never commits an answer
(issue 29: every method scored 0 on DBBench with SmolLM2-135M). ``SqlAction`` (A) never asks for a format:

1. the statement's first keyword is prefilled as the start of the assistant turn, so the model continues a
   statement instead of starting an essay; generation stops at ``;``. The keyword is the one the task text
   names (``with an INSERT statement``), ``SELECT`` for a question, else chosen by likelihood among
   ``SELECT``/``UPDATE``/``INSERT``/``DELETE`` (one ``score`` pass, ``jitlab.modules.likelihood.choose``);
2. the statement is checked before it is sent: ``check_sql`` runs SQLite's own parser (``EXPLAIN``) on an
   empty in-memory copy of the schema the task text gives (table and column names), so syntax errors and
   unknown columns are caught without spending a tool call; on an error the model samples again with the
   error in view (``retries``), then ``repair`` tries templates (quote the column names, add the missing
   ``FROM <table>``), and as a last resort a ``SELECT *`` peek is sent instead (once; later rejected statements
   are sent as written, so the database's own error comes into view);
3. the table's columns stay in view (the task text), and a first ``peek`` (``SELECT * ... LIMIT 3``) shows
   the values' format; a SELECT's select list (a column, ``COUNT(*)`` or an aggregate of a column) is chosen by
   likelihood too (with ``select_prior``: the columns and the aggregate the question's words name) and
   prefilled with ``FROM <table>``, and so is a WHERE clause chosen by likelihood among the question's
   value-like phrases ``LIKE``'d against each column (``where_clauses``; an opening already sent is not offered
   again, a select list that found nothing twice is dropped), so the model only finishes the statement (a
   135M model otherwise copies the peek's ``SELECT *`` and writes ``WHERE x IS NULL``);
4. with ``ground`` (``jitlab.modules.sqlground``), a second step probes the table for the question's values:
   which columns hold the values the question names, so a SELECT's WHERE clause is the grounded conditions
   (all of them first, the statement then complete: the model chooses only the select list, among the
   columns the question asks for and the aggregates its words name, of the columns the peek showed numbers
   in); an INSERT whose instruction states its row, or an UPDATE whose new values it states, is sent as
   stated; a model-written UPDATE gets the grounded WHERE clause;
5. the commit policy answers from a successful query's result: the first non-empty result of a statement
   the model wrote (a question), ``none`` when the statement with every grounded equality and comparison
   finds nothing (``empty_is_none``), or ``done`` after a data-changing statement affected rows
   (INSERT/UPDATE); ``commit_margin`` steps before the budget ends it commits the best result it has (or
   ``none``).

Harness-R1 (arXiv 2608.02276) patches DBBench agents with the same kind of hooks (format checks before
execution, forced answers near the budget); the keyword prefill is constrained decoding's cheapest form.

Per step ``Decision.data`` has ``decided_by``: ``model_reply`` (a statement the model wrote; ``parsed``:
whether SQLite's parser accepted it, ``repaired``: a template fixed it), ``mechanism`` (``mechanism``: peek,
probe, grounded, stated, commit, fallback; a grounded statement's select list is the model's likelihood
choice, recorded as ``select`` and ``select_method``, but its WHERE clause is the probe's, so the step counts
as the mechanism's).

Couplings: the task text names the table and its columns as ``Table `t` has columns: `a`, `b` ...`` (any
quoting of the names works) and the tools are ``execute_sql(sql)`` / ``commit_answer(answer)``; results read
``Columns: ...`` then one Python tuple per row, errors ``Error: ...``. Caveats: the parser check knows
the schema as all-TEXT columns (types are not checked); committing the first non-empty result trusts the
WHERE clause; without grounding a question whose answer is an empty result is committed as ``none`` only at
the margin; an answer that is part of a cell (a name inside ``Drivers``) is committed as the whole cell.
"""
from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field

from jitlab.modules.likelihood import choose
from jitlab.modules.prompting import render
from jitlab.modules.sqlground import (
    STOPWORDS,
    _literal,
    _quote,
    answer_columns,
    conditions,
    insert_values,
    phrases,
    probe_sql,
    question_of,
    result_rows,
    table_values,
    update_values,
    where_options,
)
from jitlab.protocol import Context, Ctx, Decision

__all__ = ["KEYWORDS", "SqlAction", "aggregates", "answer_from", "check_sql", "counted_column", "keywords",
           "numeric_columns", "repair", "schema_of", "select_lists", "select_prior", "statement", "where_clauses"]

KEYWORDS = ("SELECT", "UPDATE", "INSERT", "DELETE")
_NAME = r"(?:`([^`]+)`|\"([^\"]+)\"|\[([^\]]+)\]|'([^']+)'|(\w+))"
_TABLE = re.compile(r"table\s+" + _NAME + r"\s+(?:has|with)\s+columns?\s*:?\s*(.+?)(?:\s*\(\d+ rows?\)|\.\s|\.$|\n)",
                    re.IGNORECASE)
_TABLE_ROWS = re.compile(r"table\s+" + _NAME + r"\s+(?:has|with)\s+columns?\s*:?\s*([^\n]+?)\s*\(\d+ rows?\)", re.IGNORECASE)


def _names(text: str) -> list[str]:
    return [next(g for g in m.groups() if g is not None) for m in re.finditer(_NAME, text)]


def schema_of(text: str) -> tuple[str, list[str]]:
    """(table name, column names) from a task text that says ``Table <name> has columns: <a>, <b>``; ("", [])
    when it says nothing of the kind."""
    m = _TABLE_ROWS.search(str(text)) or _TABLE.search(str(text))   # "(19 rows)" first: "No. Specimens" has ". "
    if not m:
        return "", []
    table = next(g for g in m.groups()[:5] if g is not None)
    return table, [n for n in (_names(part.strip()) for part in m.group(6).split(",")) for n in n[:1]]


def keywords(task_text: str) -> list[str]:
    """The first keywords a statement may start with for this task: the data-changing ones the task text names
    (``... with an INSERT statement``), else SELECT when it asks a question, else all of ``KEYWORDS``."""
    named = [k for k in KEYWORDS[1:] if re.search(rf"\b{k}\b", str(task_text))]
    if named:
        return named
    return ["SELECT"] if re.search(r"\b(question|answer|how many|what|which|who)\b", str(task_text), re.I) \
        else list(KEYWORDS)


_AGGREGATE_WORDS = {"COUNT(*)": r"how many|number of|count", "SUM": r"total|sum|combined|altogether",
                    "AVG": r"average|mean", "MIN": r"lowest|least|minimum|smallest|fewest|earliest|earlier|min\b",
                    "MAX": r"highest|most|maximum|largest|greatest|biggest|latest|max\b"}


def aggregates(question: str, columns: list[str] = (), numeric: set | None = None) -> set[str]:
    """The aggregates the question's words ask for (how many: COUNT(*), total: SUM, average: AVG, lowest: MIN,
    highest: MAX); not COUNT(*) when what it counts is a numeric column (``how many floors``: the value)."""
    text = question.lower()
    wanted = {agg for agg, pattern in _AGGREGATE_WORDS.items() if re.search(rf"\b(?:{pattern})", text)}
    if counted_column(question, columns, numeric):
        wanted.discard("COUNT(*)")
    return wanted


def counted_column(question: str, columns: list[str], numeric: set | None = None) -> str:
    """The numeric column a ``how many <x>`` / ``number of <x>`` names by its first word (``how many weeks`` ->
    ``weeks at No. 1``): its value is the answer, not a count of rows; "" when it counts something else or
    which columns hold numbers is not known (``numeric_columns``)."""
    column = _counted(question, columns)
    return column if column in (numeric or ()) else ""


def _counted(question: str, columns: list[str]) -> str:
    m = re.search(r"\b(?:how many|number of)\s+([a-z]+?)(?:e?s)?\b", question.lower())
    return next((c for c in columns if m and re.match(rf"{re.escape(m.group(1))}(?:e?s)?\b", c.lower())), "")


def numeric_columns(peek_result: str, columns: list[str]) -> set[str]:
    """The columns whose values in a ``SELECT *`` result (in ``columns``' order) are mostly numbers (at least half
    of the rows; commas allowed: ``21,000``; a ``—`` row does not disqualify a column)."""
    rows = [row for row in result_rows(peek_result) if len(row) == len(columns)]
    return {c for i, c in enumerate(columns)
            if rows and 2 * sum(bool(re.fullmatch(r"-?[\d,]*\.?\d+", str(row[i]).strip())) for row in rows) >= len(rows)}


def select_lists(question: str, columns: list[str], conds: list | None = None, numeric: set | None = None) -> list[str]:
    """The select lists offered: every column, ``COUNT(*)`` and each numeric aggregate of each column; with
    grounded conditions only what the question can be asking for: the columns it names that no condition uses
    (else every column no condition uses), ``COUNT(*)`` and the aggregates its words ask for, of those that
    hold numbers (``numeric``, when known)."""
    if not conds:
        return [_quote(c) for c in columns] + ["COUNT(*)"] + [
            _aggregate(agg, c) for agg in ("SUM", "AVG", "MIN", "MAX") for c in columns]
    taken = {c for c, _ in conds}
    counted = counted_column(question, columns, numeric)
    pool = ([counted] if counted and counted not in taken else []) or answer_columns(question, columns, conds) or \
        [c for c in columns if c not in taken] or columns
    wanted = aggregates(question, columns, numeric)
    return [_quote(c) for c in pool] + ["COUNT(*)"] * ("COUNT(*)" in wanted) + [
        _aggregate(agg, c) for agg in ("SUM", "AVG", "MIN", "MAX") if agg in wanted for c in pool
        if numeric is None or c in numeric]


def select_prior(task_text: str, columns: list[str], weight: float = 1.0, conds: list | None = None,
                 numeric: set | None = None) -> dict:
    """{select list: bonus}: the question's own words as a prior over select lists: ``weight`` for a column the
    question names, ``weight`` for the aggregate its words ask for (how many: COUNT(*), total: SUM, average:
    AVG, lowest: MIN, highest: MAX), both for an aggregate of a named column. With the grounded conditions
    ``conds`` (``jitlab.modules.sqlground.conditions``): another ``weight`` for a column the question asks for
    (named, in no condition) and ``-weight`` for a column a condition uses."""
    question = question_of(task_text)
    text = question.lower()
    words, counted = set(re.findall(r"[a-z0-9]+", text)) - STOPWORDS, counted_column(question, columns, numeric)
    named = {c for c in columns if set(re.findall(r"[a-z0-9]+", c.lower())) & words or c == counted}
    wanted = aggregates(question, columns, numeric)
    asked = set(answer_columns(question, columns, conds)) if conds is not None else set()
    taken = {c for c, _ in conds or []}
    bonus = {c: (weight if c in named else 0) + (weight if c in asked else 0) - (weight if c in taken else 0)
             for c in columns}
    prior = {_quote(c): b for c, b in bonus.items() if b}
    if "COUNT(*)" in wanted:   # three times when it counts a column of text (``how many award-winning films``)
        counts_text = numeric is not None and _counted(question, columns) not in numeric | {""}
        prior["COUNT(*)"] = weight * (3 if counts_text else 1)
    for agg in wanted - {"COUNT(*)"}:
        for c in columns:
            prior[_aggregate(agg, c)] = weight + max(0.0, bonus[c])
    return prior


def _aggregate(agg: str, column: str) -> str:
    return f"{agg}(CAST(REPLACE({_quote(column)}, ',', '') AS REAL))"


def where_clauses(task_text: str, columns: list[str], limit: int = 48) -> list[str]:
    """Candidate WHERE clauses: each column ``LIKE`` each value-like phrase of the question
    (``jitlab.modules.sqlground.phrases``), at most ``limit``."""
    return [f"WHERE {_quote(c)} LIKE '%{v}%'" for v in phrases(question_of(task_text), columns)
            for c in columns][:limit]


def check_sql(sql: str, table: str, columns: list[str]) -> str:
    """"" when SQLite parses ``sql`` against an empty table ``table(columns)`` (all TEXT), else the error."""
    sql = str(sql).strip()
    if not sql:
        return "empty statement"
    if not sqlite3.complete_statement(sql if sql.endswith(";") else sql + ";"):
        return "incomplete statement (unbalanced quotes or parentheses)"
    conn = sqlite3.connect(":memory:")
    try:
        if table:
            conn.execute(f"CREATE TABLE {_quote(table)} ({', '.join(_quote(c) + ' TEXT' for c in columns) or 'x'})")
        conn.execute("EXPLAIN " + sql.rstrip(";"))
        return ""
    except sqlite3.Error as exc:
        return str(exc)
    except Exception as exc:  # sqlite3 raises Warning for several statements at once
        return f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()


def statement(prefix: str, continuation: str) -> str:
    """The statement the prefilled start and the model's continuation make: cut at the first ``;`` (or a
    blank line / a code fence), whitespace collapsed, ending with ``;``."""
    text = re.split(r";|\n\s*\n|```", f"{prefix} {continuation}", maxsplit=1)[0]
    return " ".join(text.split()) + ";"


def repair(sql: str, table: str, columns: list[str]) -> str:
    """Template repairs of common small-model errors: column names with spaces or symbols quoted, a bare table
    name quoted, a missing ``FROM <table>`` added to a SELECT; returns the first variant SQLite parses ("" if
    none does)."""
    fixed = sql
    for name in sorted(columns + [table], key=len, reverse=True):
        if name and not re.fullmatch(r"\w+", name):
            fixed = re.sub(r"(?<![\"`\[\w])" + re.escape(name) + r"(?![\"`\]\w])", _quote(name), fixed)
    variants = [fixed]
    if re.match(r"\s*select\b", fixed, re.IGNORECASE) and not re.search(r"\bfrom\b", fixed, re.IGNORECASE):
        head = re.split(r"\b(where|group|order|limit)\b", fixed.rstrip(";"), maxsplit=1, flags=re.IGNORECASE)
        rest = "".join(head[1:]).strip()
        variants.append(" ".join(part for part in (head[0].strip(), f"FROM {_quote(table)}", rest) if part) + ";")
    return next((v for v in variants if not check_sql(v, table, columns)), "")


def answer_from(result: str):
    """A commit answer from a query result: one value as a string, several as a list of strings; None when the
    result is an error, has no rows, or is not a query result."""
    if not str(result).startswith("Columns:"):
        return None
    values = [("none" if v is None else str(v)) for row in result_rows(result) for v in row]
    if not values or set(values) == {"none"}:   # no rows, or only NULLs: keep looking (the margin commits none)
        return None
    return values[0] if len(values) == 1 else values


_CHANGED = re.compile(r"^OK\.\s*(\d+) row", re.IGNORECASE)


@dataclass
class SqlAction:
    """A: keyword-prefilled SQL checked by SQLite before it is sent, and an answer committed from results."""
    max_new_tokens: int = field(default=64, metadata={"help": "tokens the model may write after the keyword",
                                                      "min": 1})
    retries: int = field(default=1, metadata={"help": "new samples (temperature 0.7, the parser's error in view) "
                                                      "after a statement fails the parser check", "min": 0})
    peek: bool = field(default=True, metadata={"help": "first step: SELECT * ... LIMIT 3 to show the values"})
    select_list: bool = field(default=True, metadata={"help": "prefill a SELECT's select list (chosen by "
                                                               "likelihood) and FROM <table>: the model writes WHERE"})
    where: bool = field(default=True, metadata={"help": "prefill a WHERE clause too, chosen by likelihood among "
                                                         "the question's phrases LIKE'd against each column"})
    ground: bool = field(default=True, metadata={"help": "second step: probe which columns hold the question's "
                                                         "values (jitlab.modules.sqlground) and prefill the WHERE "
                                                         "clause from it (the likelihood's LIKE clauses after)"})
    empty_is_none: bool = field(default=True, metadata={"help": "commit 'none' when the statement with every "
                                                                 "grounded condition (nothing added) finds nothing"})
    commit_margin: int = field(default=1, metadata={"help": "commit the best result this many steps before the "
                                                            "budget ends", "min": 0})

    def reset(self, ctx: Ctx) -> None:
        self.table, self.columns = schema_of(ctx.task.description)
        self.question = question_of(ctx.task.description)
        self.best, self.pending, self.peeked, self.fell_back = None, "", False, False
        self.sent: set[str] = set()      # prefilled openings already used (a retry tries the next one)
        self.empty: list[str] = []       # select lists whose statement found nothing (twice: not offered again)
        self.last_select = ""
        self.conds: list | None = None   # grounded conditions, once the probe's result is in
        self.full, self.last_sql = "", ""   # the opening with every grounded condition; the statement sent last
        self.numeric: set | None = None    # the columns the peek showed numbers in
        self.sets: dict[str, str] = {}     # the new values an UPDATE instruction states, once the probe is in
        self.stated_sent = False           # the statement the instruction states was sent (once)

    def _messages(self, context: Context, ctx: Ctx, error: str = "") -> list[dict]:
        values = {"task": ctx.task.public(), "view": context.view.text, "directive": context.directive.text,
                  "hints": context.hints + ([f"The last statement was rejected: {error}"] if error else []),
                  "tools": context.capabilities, "step": context.step}
        return [{"role": "system", "content": render(ctx.prompts["system"], **values)},
                {"role": "user", "content": render(ctx.prompts["step"], **values)}]

    def _observe(self, context: Context) -> str:
        """Take in the last result (of the statement sent last step); returns what the commit policy says."""
        text = context.observation.text if context.step > 0 else ""
        sent, self.pending = self.pending, ""
        if sent == "peek":
            self.numeric = numeric_columns(text, self.columns) if text.startswith("Columns:") else None
        if sent == "probe":
            self.conds = conditions(self.question, self.columns, text)
            self.sets = update_values(self.question, self.columns, self.table, table_values(text))
        if sent == "model":
            answer = answer_from(text)
            if answer is not None:
                self.best = answer
                return "answer"
            if text.startswith("Columns:") and self.last_select:
                self.empty.append(self.last_select)
                if self.empty_is_none and self.full and self.last_sql == self.full + ";":
                    return "empty"       # every grounded condition, nothing added: the answer is none
            changed = _CHANGED.match(text.strip())
            if changed and int(changed.group(1)) > 0:
                return "changed"
        return ""

    def _update_where(self, sets: dict | set, new: set = frozenset()) -> list[str]:
        """The grounded conditions an UPDATE may filter by: equalities and comparisons (a phrase's LIKE could
        match too many rows) on columns it does not set, of values it does not set (``new``)."""
        return [cond for column, cond in self.conds or [] if column not in sets and " LIKE " not in cond
                and not any(cond.endswith(f"= {_literal(v)}") for v in new)]

    def _grounded_update(self, sql: str) -> str:
        """An UPDATE the model wrote with its WHERE clause replaced by the grounded one (on the columns it does
        not set); unchanged when grounding found no condition."""
        head = re.split(r"\s+where\s+", sql.rstrip(";"), maxsplit=1, flags=re.IGNORECASE)[0]
        sets = {c for c in self.columns if re.search(r"[\"`\[]?" + re.escape(c) + r"[\"`\]]?\s*=", head)}
        where = self._update_where(sets, set(self.sets.values())) if self.ground else []
        return f"{head} WHERE {' AND '.join(where)};" if where else sql

    def _stated(self, keyword: str) -> str:
        """The whole statement when the instruction states it (``jitlab.modules.sqlground``): an INSERT's row
        (``insert_values``), an UPDATE's new values (``update_values``: what follows ``to``, or values the table
        does not hold yet) with the grounded WHERE; "" otherwise or when SQLite's parser rejects it."""
        table = _quote(self.table)
        sql = ""
        if keyword == "INSERT" and self.table:
            row = insert_values(self.question, self.columns, self.table)
            if row:
                sql = (f"INSERT INTO {table} ({', '.join(_quote(c) for c in self.columns)}) "
                       f"VALUES ({', '.join(_literal(v) for v in row)});")
        if keyword == "UPDATE" and self.table:
            where = self._update_where(self.sets, set(self.sets.values()))
            if self.sets and where:
                sql = (f"UPDATE {table} SET {', '.join(f'{_quote(c)} = {_literal(v)}' for c, v in self.sets.items())} "
                       f"WHERE {' AND '.join(where)};")
        return sql if sql and not check_sql(sql, self.table, self.columns) else ""

    def _opening(self, keyword: str, messages: list[dict], ctx: Ctx) -> tuple[str, dict]:
        """(the prefilled start of the statement, what was chosen for it): for a SELECT the select list, chosen
        by likelihood among the columns, ``COUNT(*)`` and numeric aggregates of each column, then ``FROM
        <table>``; for the others the keyword and the table (``INSERT INTO t VALUES (``, ``UPDATE t SET``,
        ``DELETE FROM t WHERE``). The model writes the rest (the WHERE clause, the values)."""
        if not self.table:
            return keyword, {}
        table = _quote(self.table)
        if keyword != "SELECT" or not self.select_list:
            return {"SELECT": f"SELECT * FROM {table}", "INSERT": f"INSERT INTO {table} VALUES (",
                    "UPDATE": f"UPDATE {table} SET", "DELETE": f"DELETE FROM {table} WHERE"}[keyword], {}
        lists = select_lists(self.question, self.columns, self.conds, self.numeric)
        lists = [c for c in lists if self.empty.count(c) < 2] or lists   # twice nothing: try another select list
        prior = select_prior(ctx.task.description, self.columns, conds=self.conds, numeric=self.numeric)
        choice = choose(ctx, messages, lists, prior, prefix="SELECT")
        head = f"SELECT {choice.command} FROM {table}"
        picked = {"select": choice.command, "select_method": choice.method}
        self.last_select, self.full = choice.command, ""
        options = where_options(self.conds or [])
        grounded = [w for w in options if f"{head} {w}" not in self.sent]
        wheres = grounded or [w for w in where_clauses(ctx.task.description, self.columns)
                              if f"{head} {w}" not in self.sent]
        if grounded:   # the grounded conditions in order: all of them first, then each one alone
            where = grounded[0]
        elif self.where and wheres:
            where = choose(ctx, messages, wheres, prefix=head).command
        if grounded or self.where and wheres:
            head, picked = f"{head} {where}", {**picked, "where": where, "grounded": where in options}
            # the answer is none when every condition (the table's own values and stated comparisons; a phrase's
            # LIKE is a guess) finds nothing
            self.full = head if options and where == options[0] and " LIKE " not in options[0] else ""
        self.sent.add(head)
        return head, picked

    def act(self, context: Context, ctx: Ctx) -> Decision:
        verdict = self._observe(context)
        budget = ctx.task.max_steps or 0
        if verdict or (budget and context.step >= budget - self.commit_margin):
            answer = "done" if verdict == "changed" else "none" if verdict == "empty" else \
                self.best if self.best is not None else "none"
            return Decision("commit_answer", {"answer": answer}, "", {"decided_by": "mechanism",
                                                                      "mechanism": f"sql:commit:{verdict or 'margin'}"})
        if self.peek and not self.peeked and self.table:
            self.peeked, self.pending = True, "peek"
            return Decision("execute_sql", {"sql": f"SELECT * FROM {_quote(self.table)} LIMIT 3;"}, "",
                            {"decided_by": "mechanism", "mechanism": "sql:peek"})
        if self.ground and self.conds is None and self.table and \
                {"SELECT", "UPDATE", "DELETE"} & set(keywords(ctx.task.description)):
            self.conds, self.pending = [], "probe"
            return Decision("execute_sql", {"sql": probe_sql(self.table, self.columns, self.question)}, "",
                            {"decided_by": "mechanism", "mechanism": "sql:probe"})
        messages = self._messages(context, ctx)
        keyword = choose(ctx, messages, keywords(ctx.task.description), normalise="none").command
        stated = self._stated(keyword) if self.ground and not self.stated_sent else ""
        if stated:
            self.stated_sent, self.pending, self.last_sql = True, "model", stated
            return Decision("execute_sql", {"sql": stated}, "", {"decided_by": "mechanism",
                                                                  "mechanism": f"sql:stated:{keyword.lower()}"})
        prefix, picked = self._opening(keyword, messages, ctx)
        if picked.get("grounded"):   # the select list chosen among what is asked, WHERE from the probe: complete
            self.pending, self.last_sql = "model", prefix + ";"
            return Decision("execute_sql", {"sql": prefix + ";"}, "", {"decided_by": "mechanism",
                                                                      "mechanism": "sql:grounded", **picked})
        error, sql = "", ""
        for attempt in range(self.retries + 1):
            asked = self._messages(context, ctx, error) if error else messages
            params = {"temperature": 0.7} if attempt else {}
            reply = ctx.llm.chat(asked + [{"role": "assistant", "content": prefix}],
                                 max_new_tokens=self.max_new_tokens, stop=[";"], **params).text
            sql = self._grounded_update(statement(prefix, reply)) if keyword == "UPDATE" else statement(prefix, reply)
            error = check_sql(sql, self.table, self.columns)
            if not error:
                self.pending, self.last_sql = "model", sql
                return Decision("execute_sql", {"sql": sql}, "", {"decided_by": "model_reply", "parsed": True,
                                                                  "attempts": attempt + 1, **picked})
        fixed = repair(sql, self.table, self.columns)
        if fixed:
            self.pending, self.last_sql = "model", fixed
            return Decision("execute_sql", {"sql": fixed}, "", {"decided_by": "model_reply", "parsed": False,
                                                                "repaired": True, "error": error})
        if self.fell_back:  # a second peek shows nothing new: send the statement, the error lands in view
            return Decision("execute_sql", {"sql": sql}, "", {"decided_by": "model_reply", "parsed": False,
                                                              "error": error})
        self.fell_back = True
        return Decision("execute_sql", {"sql": f"SELECT * FROM {_quote(self.table or 'sqlite_master')} LIMIT 5;"},
                        "", {"decided_by": "mechanism", "mechanism": "sql:fallback", "parsed": False,
                             "error": error, "rejected": sql})
