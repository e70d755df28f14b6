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
4. the commit policy answers from a successful query's result: the first non-empty result of a statement
   the model wrote (a question), or ``done`` after a data-changing statement affected rows (INSERT/UPDATE);
   ``commit_margin`` steps before the budget ends it commits the best result it has (or ``none``).

Harness-R1 (arXiv 2608.02276) patches DBBench agents with the same kind of hooks (format checks before
execution, forced answers near the budget); the keyword prefill is constrained decoding's cheapest form.

Per step ``Decision.data`` has ``decided_by``: ``model_reply`` (a statement the model wrote; ``parsed``:
whether SQLite's parser accepted it, ``repaired``: a template fixed it), ``mechanism`` (``mechanism``: peek,
commit, fallback).

Couplings: the task text names the table and its columns as ``Table `t` has columns: `a`, `b` ...`` (any
quoting of the names works) and the tools are ``execute_sql(sql)`` / ``commit_answer(answer)``; results read
``Columns: ...`` then one Python tuple per row, errors ``Error: ...``. Caveats: the parser check knows
the schema as all-TEXT columns (types are not checked); committing the first non-empty result trusts the
model's WHERE clause; a question whose answer is an empty result is committed as ``none`` only at the margin.
"""
from __future__ import annotations

import ast
import re
import sqlite3
from dataclasses import dataclass, field

from jitlab.modules.likelihood import choose
from jitlab.modules.prompting import render
from jitlab.protocol import Context, Ctx, Decision

__all__ = ["KEYWORDS", "SqlAction", "answer_from", "check_sql", "keywords", "repair", "schema_of", "select_prior",
           "statement", "where_clauses"]

KEYWORDS = ("SELECT", "UPDATE", "INSERT", "DELETE")
_NAME = r"(?:`([^`]+)`|\"([^\"]+)\"|\[([^\]]+)\]|'([^']+)'|(\w+))"
_TABLE = re.compile(r"table\s+" + _NAME + r"\s+(?:has|with)\s+columns?\s*:?\s*(.+?)(?:\s*\(\d+ rows?\)|\.\s|\.$|\n)",
                    re.IGNORECASE)


def _names(text: str) -> list[str]:
    return [next(g for g in m.groups() if g is not None) for m in re.finditer(_NAME, text)]


def schema_of(text: str) -> tuple[str, list[str]]:
    """(table name, column names) from a task text that says ``Table <name> has columns: <a>, <b>``; ("", [])
    when it says nothing of the kind."""
    m = _TABLE.search(str(text))
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
                    "AVG": r"average|mean", "MIN": r"lowest|least|minimum|smallest|fewest|earliest|min\b",
                    "MAX": r"highest|most|maximum|largest|greatest|biggest|latest|max\b"}


def select_prior(task_text: str, columns: list[str], weight: float = 1.0) -> dict:
    """{select list: bonus}: the question's own words as a prior over select lists: ``weight`` for a column the
    question names, ``weight`` for the aggregate its words ask for (how many: COUNT(*), total: SUM, average:
    AVG, lowest: MIN, highest: MAX), both for an aggregate of a named column."""
    question = re.search(r"question / instruction:\s*(.+)", str(task_text), re.IGNORECASE)
    text = (question.group(1) if question else str(task_text)).lower()
    words = set(re.findall(r"[a-z0-9]+", text))
    named = {c for c in columns if set(re.findall(r"[a-z0-9]+", c.lower())) & words}
    wanted = {agg for agg, pattern in _AGGREGATE_WORDS.items() if re.search(rf"\b(?:{pattern})", text)}
    prior = {_quote(c): weight for c in named}
    if "COUNT(*)" in wanted:
        prior["COUNT(*)"] = weight
    for agg in wanted - {"COUNT(*)"}:
        for c in columns:
            prior[f"{agg}(CAST({_quote(c)} AS REAL))"] = weight * (2 if c in named else 1)
    return prior


_STOPWORDS = frozenset("a an the of in on at to for with and or is are was were be what which who whom whose how many "
                       "much when where is it its as by from that this than there their his her he she they them "
                       "did does do has have had total number name names count average lowest highest most least "
                       "give list tell show find but if not also only full".split())


def where_clauses(task_text: str, columns: list[str], limit: int = 48) -> list[str]:
    """Candidate WHERE clauses: each column ``LIKE`` each value-like phrase of the question (runs of one to
    three words that are not stopwords or column names: ``athlone town``, ``£8.5m``), at most ``limit``."""
    question = re.search(r"question / instruction:\s*(.+)", str(task_text), re.IGNORECASE)
    text = question.group(1) if question else str(task_text)
    words = re.findall(r"[\w£$€%.,'-]+", text)
    names = {w for c in columns for w in re.findall(r"\w+", c.lower())}
    phrases: list[str] = []
    run: list[str] = []
    for word in words + [""]:
        clean = word.strip(".,'\"?").replace("'", "''")
        if clean and clean.lower() not in _STOPWORDS and clean.lower() not in names:
            run.append(clean)
            continue
        for n in range(min(3, len(run)), 0, -1):
            for i in range(len(run) - n + 1):
                phrase = " ".join(run[i:i + n])
                if phrase not in phrases:
                    phrases.append(phrase)
        run = []
    return [f"WHERE {_quote(c)} LIKE '%{v}%'" for v in phrases for c in columns][:limit]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


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


def _rows(result: str) -> list[tuple]:
    rows = []
    for line in str(result).splitlines():
        line = line.strip()
        if line.startswith("("):
            try:
                value = ast.literal_eval(line)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, tuple):
                rows.append(value)
    return rows


def answer_from(result: str):
    """A commit answer from a query result: one value as a string, several as a list of strings; None when the
    result is an error, has no rows, or is not a query result."""
    if not str(result).startswith("Columns:"):
        return None
    values = [("none" if v is None else str(v)) for row in _rows(result) for v in row]
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
    commit_margin: int = field(default=1, metadata={"help": "commit the best result this many steps before the "
                                                            "budget ends", "min": 0})

    def reset(self, ctx: Ctx) -> None:
        self.table, self.columns = schema_of(ctx.task.description)
        self.best, self.pending, self.peeked, self.fell_back = None, "", False, False
        self.sent: set[str] = set()      # prefilled openings already used (a retry tries the next one)
        self.empty: list[str] = []       # select lists whose statement found nothing (twice: not offered again)
        self.last_select = ""

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
        if sent == "model":
            answer = answer_from(text)
            if answer is not None:
                self.best = answer
                return "answer"
            if text.startswith("Columns:") and self.last_select:
                self.empty.append(self.last_select)
            changed = _CHANGED.match(text.strip())
            if changed and int(changed.group(1)) > 0:
                return "changed"
        return ""

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
        lists = [_quote(c) for c in self.columns] + ["COUNT(*)"] + [
            f"{agg}(CAST({_quote(c)} AS REAL))" for agg in ("SUM", "AVG", "MIN", "MAX") for c in self.columns]
        lists = [c for c in lists if self.empty.count(c) < 2] or lists   # twice nothing: try another select list
        choice = choose(ctx, messages, lists, select_prior(ctx.task.description, self.columns), prefix="SELECT")
        head = f"SELECT {choice.command} FROM {table}"
        picked = {"select": choice.command, "select_method": choice.method}
        self.last_select = choice.command
        wheres = [w for w in where_clauses(ctx.task.description, self.columns) if f"{head} {w}" not in self.sent]
        if self.where and wheres:
            where = choose(ctx, messages, wheres, prefix=head)
            head, picked = f"{head} {where.command}", {**picked, "where": where.command}
        self.sent.add(head)
        return head, picked

    def act(self, context: Context, ctx: Ctx) -> Decision:
        verdict = self._observe(context)
        budget = ctx.task.max_steps or 0
        if verdict or (budget and context.step >= budget - self.commit_margin):
            answer = "done" if verdict == "changed" else self.best if self.best is not None else "none"
            return Decision("commit_answer", {"answer": answer}, "", {"decided_by": "mechanism",
                                                                      "mechanism": f"sql:commit:{verdict or 'margin'}"})
        if self.peek and not self.peeked and self.table:
            self.peeked = True
            return Decision("execute_sql", {"sql": f"SELECT * FROM {_quote(self.table)} LIMIT 3;"}, "",
                            {"decided_by": "mechanism", "mechanism": "sql:peek"})
        messages = self._messages(context, ctx)
        keyword = choose(ctx, messages, keywords(ctx.task.description), normalise="none").command
        prefix, picked = self._opening(keyword, messages, ctx)
        error, sql = "", ""
        for attempt in range(self.retries + 1):
            asked = self._messages(context, ctx, error) if error else messages
            params = {"temperature": 0.7} if attempt else {}
            reply = ctx.llm.chat(asked + [{"role": "assistant", "content": prefix}],
                                 max_new_tokens=self.max_new_tokens, stop=[";"], **params).text
            sql = statement(prefix, reply)
            error = check_sql(sql, self.table, self.columns)
            if not error:
                self.pending = "model"
                return Decision("execute_sql", {"sql": sql}, "", {"decided_by": "model_reply", "parsed": True,
                                                                  "attempts": attempt + 1, **picked})
        fixed = repair(sql, self.table, self.columns)
        if fixed:
            self.pending = "model"
            return Decision("execute_sql", {"sql": fixed}, "", {"decided_by": "model_reply", "parsed": False,
                                                                "repaired": True, "error": error})
        if self.fell_back:  # a second peek shows nothing new: send the statement, the error lands in view
            return Decision("execute_sql", {"sql": sql}, "", {"decided_by": "model_reply", "parsed": False,
                                                              "error": error})
        self.fell_back = True
        return Decision("execute_sql", {"sql": f"SELECT * FROM {_quote(self.table or 'sqlite_master')} LIMIT 5;"},
                        "", {"decided_by": "mechanism", "mechanism": "sql:fallback", "parsed": False,
                             "error": error, "rejected": sql})
