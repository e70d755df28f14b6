"""sql action: keyword-prefilled SQL checked by SQLite's parser before it is sent; answers committed from results."""
from __future__ import annotations

import ast
import re
import sqlite3
from dataclasses import dataclass, field

from jitlab.harnesskit import render, render_prompt
from jitlab.protocol import Context, Ctx, Decision

# ---- library code this harness uses, written out from jitlab/modules by jitlab.resolve (`jitlab harnesses export`) ----

# library: jitlab.modules.sql._NAME
_NAME = r"(?:`([^`]+)`|\"([^\"]+)\"|\[([^\]]+)\]|'([^']+)'|(\w+))"


# library: jitlab.modules.sql._TABLE
_TABLE = re.compile(r"table\s+" + _NAME + r"\s+(?:has|with)\s+columns?\s*:?\s*(.+?)(?:\s*\(\d+ rows?\)|\.\s|\.$|\n)",
                    re.IGNORECASE)


# library: jitlab.modules.sql._names
def _names(text: str) -> list[str]:
    return [next(g for g in m.groups() if g is not None) for m in re.finditer(_NAME, text)]


# library: jitlab.modules.sql.schema_of
def schema_of(text: str) -> tuple[str, list[str]]:
    """(table name, column names) from a task text that says ``Table <name> has columns: <a>, <b>``; ("", [])
    when it says nothing of the kind."""
    m = _TABLE.search(str(text))
    if not m:
        return "", []
    table = next(g for g in m.groups()[:5] if g is not None)
    return table, [n for n in (_names(part.strip()) for part in m.group(6).split(",")) for n in n[:1]]


# library: jitlab.modules.sql._quote
def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# library: jitlab.modules.likelihood.Choice
@dataclass
class Choice:
    """One choice among candidates: the command, how it was chosen and the (normalised + prior) scores.

    ``method``: score | chat (the backbone chose) | tie (the top scores were equal, the order chose) | order (the
    chat reply named no candidate) | only (one candidate). ``model_pick`` is the backbone's own unique first choice
    before the prior ("" when its top scores were tied)."""
    command: str
    method: str                              # score | chat | tie | order | only
    scores: list[float] = field(default_factory=list)
    model_pick: str = ""

    def decider(self) -> tuple[str, str | None]:
        """(decided_by, mechanism): the backbone's choice only where its own unique pick stood; a tie or a prior
        that overturned (or broke a tie of) the backbone's scores is the harness's decision."""
        if self.method == "chat" or (self.method == "score" and self.model_pick == self.command):
            return "model_choice", None
        if self.method == "score":
            return "mechanism", "likelihood:prior"
        return "mechanism", f"likelihood:{self.method}"

    def record(self, candidates: list[str], top: int = 3) -> dict:
        ranked = sorted(zip(self.scores, candidates), reverse=True)[:top]
        return {"method": self.method, "options": len(candidates), "top": [[c, round(s, 3)] for s, c in ranked],
                "prior_changed": self.method == "score" and self.model_pick != self.command}


# library: jitlab.modules.likelihood.normalised
def normalised(scores: list[float], candidates: list[str], mode: str = "words") -> list[float]:
    """Sum log-likelihoods made comparable across lengths: per word plus one (the end token), per 4 characters,
    or as they are."""
    if mode == "none":
        return list(scores)
    if mode == "chars":
        return [s / max(1.0, len(c) / 4) for s, c in zip(scores, candidates)]
    return [s / (len(c.split()) + 1) for s, c in zip(scores, candidates)]


# library: jitlab.modules.likelihood.TIE
TIE = 1e-6  # scores closer than this are a tie: the candidate order decides, not the backbone


# library: jitlab.modules.likelihood._unique_best
def _unique_best(scores: list[float]) -> int | None:
    """The index of the one highest score, None when two or more are within ``TIE`` of it."""
    best = max(scores)
    top = [i for i, s in enumerate(scores) if s >= best - TIE]
    return top[0] if len(top) == 1 else None


# library: jitlab.modules.likelihood._numbered
def _numbered(ctx: Ctx, messages: list[dict], candidates: list[str]) -> Choice:
    listing = render_prompt(ctx.prompts, "choose_number", candidates=candidates)
    last = dict(messages[-1])
    last["content"] = f"{last['content']}\n{listing}"
    reply = ctx.llm.chat(messages[:-1] + [last], max_new_tokens=4, temperature=0.0).text
    match = re.search(r"\d+", reply)
    if match and 1 <= int(match.group()) <= len(candidates):
        return Choice(candidates[int(match.group()) - 1], "chat")
    return Choice(candidates[0], "order")


# library: jitlab.modules.likelihood.choose
def choose(ctx: Ctx, messages: list[dict], candidates: list[str], prior: dict | None = None,
           normalise: str = "words", prefix: str = "") -> Choice:
    """The candidate the backbone finds likeliest as its reply to ``messages`` (plus ``prior[candidate]``).

    One batched ``score`` call; ``prefix`` (e.g. ``"Action:"``) is prefilled as the start of the reply and each
    candidate continues it after a space. Without ``score``: a numbered list, the backbone replies with a number."""
    if not candidates:
        raise ValueError("choose() needs at least one candidate")
    if len(candidates) == 1:
        return Choice(candidates[0], "only", [0.0])
    prior = prior or {}
    asked = messages + ([{"role": "assistant", "content": prefix}] if prefix else [])
    try:
        raw = ctx.llm.score(asked, [f" {c}" if prefix else c for c in candidates])
    except NotImplementedError:
        return _numbered(ctx, messages, candidates)
    plain = normalised(raw, candidates, normalise)
    scores = [s + float(prior.get(c, 0.0)) for s, c in zip(plain, candidates)]
    best, own = _unique_best(scores), _unique_best(plain)
    model_pick = candidates[own] if own is not None else ""
    if best is None:
        return Choice(candidates[scores.index(max(scores))], "tie", scores, model_pick)
    return Choice(candidates[best], "score", scores, model_pick)


# library: jitlab.modules.sql.check_sql
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


# library: jitlab.modules.sql.repair
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


# library: jitlab.modules.sql._rows
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


# library: jitlab.modules.sql.answer_from
def answer_from(result: str):
    """A commit answer from a query result: one value as a string, several as a list of strings; None when the
    result is an error, has no rows, or is not a query result."""
    if not str(result).startswith("Columns:"):
        return None
    values = [("none" if v is None else str(v)) for row in _rows(result) for v in row]
    if not values or set(values) == {"none"}:   # no rows, or only NULLs: keep looking (the margin commits none)
        return None
    return values[0] if len(values) == 1 else values


# library: jitlab.modules.sql._AGGREGATE_WORDS
_AGGREGATE_WORDS = {"COUNT(*)": r"how many|number of|count", "SUM": r"total|sum|combined|altogether",
                    "AVG": r"average|mean", "MIN": r"lowest|least|minimum|smallest|fewest|earliest|min\b",
                    "MAX": r"highest|most|maximum|largest|greatest|biggest|latest|max\b"}


# library: jitlab.modules.sql.select_prior
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


# library: jitlab.modules.sql.statement
def statement(prefix: str, continuation: str) -> str:
    """The statement the prefilled start and the model's continuation make: cut at the first ``;`` (or a
    blank line / a code fence), whitespace collapsed, ending with ``;``."""
    text = re.split(r";|\n\s*\n|```", f"{prefix} {continuation}", maxsplit=1)[0]
    return " ".join(text.split()) + ";"


# library: jitlab.modules.sql._CHANGED
_CHANGED = re.compile(r"^OK\.\s*(\d+) row", re.IGNORECASE)


# library: jitlab.modules.sql._STOPWORDS
_STOPWORDS = frozenset("a an the of in on at to for with and or is are was were be what which who whom whose how many "
                       "much when where is it its as by from that this than there their his her he she they them "
                       "did does do has have had total number name names count average lowest highest most least "
                       "give list tell show find but if not also only full".split())


# library: jitlab.modules.sql.where_clauses
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


# library: jitlab.modules.sql.KEYWORDS
KEYWORDS = ("SELECT", "UPDATE", "INSERT", "DELETE")


# library: jitlab.modules.sql.keywords
def keywords(task_text: str) -> list[str]:
    """The first keywords a statement may start with for this task: the data-changing ones the task text names
    (``... with an INSERT statement``), else SELECT when it asks a question, else all of ``KEYWORDS``."""
    named = [k for k in KEYWORDS[1:] if re.search(rf"\b{k}\b", str(task_text))]
    if named:
        return named
    return ["SELECT"] if re.search(r"\b(question|answer|how many|what|which|who)\b", str(task_text), re.I) \
        else list(KEYWORDS)


# library: jitlab.modules.sql.SqlAction
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


# ---- the harness's own code ----

class Action(SqlAction):
    pass
