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


# library: jitlab.modules.sql._TABLE_ROWS
_TABLE_ROWS = re.compile(r"table\s+" + _NAME + r"\s+(?:has|with)\s+columns?\s*:?\s*([^\n]+?)\s*\(\d+ rows?\)", re.IGNORECASE)


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
    m = _TABLE_ROWS.search(str(text)) or _TABLE.search(str(text))   # "(19 rows)" first: "No. Specimens" has ". "
    if not m:
        return "", []
    table = next(g for g in m.groups()[:5] if g is not None)
    return table, [n for n in (_names(part.strip()) for part in m.group(6).split(",")) for n in n[:1]]


# library: jitlab.modules.sqlground.question_of
def question_of(task_text: str) -> str:
    """The question after ``Question / instruction:`` (the whole text when there is no such line)."""
    m = re.search(r"question / instruction:\s*(.+)", str(task_text), re.IGNORECASE)
    return m.group(1).strip() if m else str(task_text)


# library: jitlab.modules.sqlground._quote
def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# library: jitlab.modules.sql._counted
def _counted(question: str, columns: list[str]) -> str:
    m = re.search(r"\b(?:how many|number of)\s+([a-z]+?)(?:e?s)?\b", question.lower())
    return next((c for c in columns if m and re.match(rf"{re.escape(m.group(1))}(?:e?s)?\b", c.lower())), "")


# library: jitlab.modules.sql.counted_column
def counted_column(question: str, columns: list[str], numeric: set | None = None) -> str:
    """The numeric column a ``how many <x>`` / ``number of <x>`` names by its first word (``how many weeks`` ->
    ``weeks at No. 1``): its value is the answer, not a count of rows; "" when it counts something else or
    which columns hold numbers is not known (``numeric_columns``)."""
    column = _counted(question, columns)
    return column if column in (numeric or ()) else ""


# library: jitlab.modules.sql._AGGREGATE_WORDS
_AGGREGATE_WORDS = {"COUNT(*)": r"how many|number of|count", "SUM": r"total|sum|combined|altogether",
                    "AVG": r"average|mean", "MIN": r"lowest|least|minimum|smallest|fewest|earliest|earlier|min\b",
                    "MAX": r"highest|most|maximum|largest|greatest|biggest|latest|max\b"}


# library: jitlab.modules.sql.aggregates
def aggregates(question: str, columns: list[str] = (), numeric: set | None = None) -> set[str]:
    """The aggregates the question's words ask for (how many: COUNT(*), total: SUM, average: AVG, lowest: MIN,
    highest: MAX); not COUNT(*) when what it counts is a numeric column (``how many floors``: the value)."""
    text = question.lower()
    wanted = {agg for agg, pattern in _AGGREGATE_WORDS.items() if re.search(rf"\b(?:{pattern})", text)}
    if counted_column(question, columns, numeric):
        wanted.discard("COUNT(*)")
    return wanted


# library: jitlab.modules.sqlground._spans
def _spans(pattern: str, text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(pattern, text, re.IGNORECASE)]


# library: jitlab.modules.sqlground._name_pattern
def _name_pattern(column: str) -> str:
    return r"(?<![\w])" + r"\s*".join(re.escape(part) for part in column.split()) + r"(?:e?s)?(?![\w])"


# library: jitlab.modules.sqlground._imperative
def _imperative(question: str, span: tuple[int, int]) -> bool:
    """A question's first word used as a verb (``Name the least touchdowns``), not a column's name."""
    return span[0] == 0 and bool(re.match(r"\s+(?:the|a|an|all|each|every)\b", question[span[1]:], re.I))


# library: jitlab.modules.sqlground.answer_columns
def answer_columns(question: str, columns: list[str], conds: list[tuple[str, str]]) -> list[str]:
    """The columns the question names that no condition uses (what it asks for), in the order it names them;
    a name inside a longer column's name (``Home team`` in ``home team score``) does not count."""
    spans = {c: [s for s in _spans(_name_pattern(c), question) if not _imperative(question, s)] for c in columns}
    inside = {c for c in columns for s in spans[c] for o in columns if o != c and len(o) > len(c)
              and any(a <= s[0] and s[1] <= b for a, b in spans[o])}
    taken = {c for c, _ in conds}
    named = [(spans[c][0][0], c) for c in columns if spans[c] and c not in taken and c not in inside]
    return [c for _, c in sorted(named)]


# library: jitlab.modules.sql._aggregate
def _aggregate(agg: str, column: str) -> str:
    return f"{agg}(CAST(REPLACE({_quote(column)}, ',', '') AS REAL))"


# library: jitlab.modules.sql.select_lists
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


# library: jitlab.modules.sqlground.STOPWORDS
STOPWORDS = frozenset("a an the of in on at to for with and or is are was were be what which who whom whose how many "
                       "much when where is it its as by from that this than there their his her he she they them "
                       "did does do has have had total number name names count average lowest highest most least "
                       "give list tell show find but if not also only full listed".split())


# library: jitlab.modules.sql.select_prior
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


# library: jitlab.modules.likelihood.Choice
@dataclass
class Choice:
    """One choice among candidates: the command, how it was chosen and the (normalised + prior) scores.

    ``method``: score | chat (the backbone chose) | tie (the top scores were equal, the order chose) | defer (the
    backbone's lead was under the margin: the prior and the order chose) | order (the chat reply named no
    candidate) | only (one candidate). ``model_pick`` is the backbone's own unique first choice before the prior
    ("" when its top scores were tied); ``gap`` its lead over the runner-up (normalised score)."""
    command: str
    method: str                              # score | chat | tie | defer | order | only
    scores: list[float] = field(default_factory=list)
    model_pick: str = ""
    gap: float | None = None

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
                "prior_changed": self.method == "score" and self.model_pick != self.command,
                "gap": None if self.gap is None else round(self.gap, 3)}


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


# library: jitlab.modules.likelihood._lead
def _lead(scores: list[float]) -> float:
    """How far the highest score is above the second highest."""
    first, second = sorted(scores, reverse=True)[:2]
    return first - second


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
           normalise: str = "words", prefix: str = "", margin: float = 0.0) -> Choice:
    """The candidate the backbone finds likeliest as its reply to ``messages`` (plus ``prior[candidate]``).

    One batched ``score`` call; ``prefix`` (e.g. ``"Action:"``) is prefilled as the start of the reply and each
    candidate continues it after a space. With ``margin`` > 0 the backbone abstains when its own normalised lead
    over the runner-up is smaller than that: the prior alone decides, ties by the candidates' order (method
    ``defer``). Without ``score``: a numbered list, the backbone replies with a number."""
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
    own, lead = _unique_best(plain), _lead(plain)
    model_pick = candidates[own] if own is not None else ""
    if margin > 0 and lead < margin:
        scores = [float(prior.get(c, 0.0)) for c in candidates]
        return Choice(candidates[scores.index(max(scores))], "defer", scores, model_pick, lead)
    scores = [s + float(prior.get(c, 0.0)) for s, c in zip(plain, candidates)]
    best = _unique_best(scores)
    if best is None:
        return Choice(candidates[scores.index(max(scores))], "tie", scores, model_pick, lead)
    return Choice(candidates[best], "score", scores, model_pick, lead)


# library: jitlab.modules.sqlground.where_options
def where_options(conds: list[tuple[str, str]], limit: int = 8) -> list[str]:
    """WHERE clauses from the conditions: all of them joined by AND first, then each one alone."""
    clauses = [cond for _, cond in conds]
    if not clauses:
        return []
    options = ["WHERE " + " AND ".join(clauses)] + ["WHERE " + c for c in clauses if len(clauses) > 1]
    return options[:limit]


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


# library: jitlab.modules.sqlground._OPS
_OPS = {"<": r"smaller|less|fewer|lower|below|under|earlier|before", ">": r"larger|greater|more|higher|bigger|above|"
                                                                        r"over|later|after"}


# library: jitlab.modules.sqlground._NUMBER
_NUMBER = r"(-?\d[\d,]*(?:\.\d+)?)"


# library: jitlab.modules.sqlground._BARE
_BARE = {"<": "under|below|before", ">": "over|above|after"}   # "game numbers under 20": no "than"


# library: jitlab.modules.sqlground.comparisons
def comparisons(question: str, columns: list[str]) -> list[tuple[str, str, tuple[int, int]]]:
    """(column, condition, span) for each ``<column> [is] smaller/larger/... than <number>`` (or ``less than
    <number> <column>``) in the question."""
    out = []
    for column in sorted(columns, key=len, reverse=True):
        name = _name_pattern(column)
        for op, words in _OPS.items():
            for pattern in (name + rf"\s+(?:is\s+|was\s+|of\s+)?(?:{words})\s+than\s+{_NUMBER}",
                            rf"(?:{words})\s+than\s+{_NUMBER}\s+" + name,
                            name + rf"(?:\s+\w+)?\s+(?:{_BARE[op]})\s+{_NUMBER}"):
                for m in re.finditer(pattern, question, re.IGNORECASE):
                    number = m.group(1).replace(",", "")
                    if not any(a < m.end() and m.start() < b for _, _, (a, b) in out):
                        out.append((column, f"CAST(REPLACE({_quote(column)}, ',', '') AS REAL) {op} {number}",
                                    m.span()))
    return out


# library: jitlab.modules.sqlground.result_rows
def result_rows(result: str) -> list[tuple]:
    """The rows of an ``execute_sql`` result (``Columns: ...`` then one Python tuple per line)."""
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


# library: jitlab.modules.sqlground._pairs
def _pairs(result: str) -> list[tuple[str, str]]:
    return [(str(row[0]), str(row[1])) for row in result_rows(result) if len(row) == 2 and row[1] is not None]


# library: jitlab.modules.sqlground._NOT_VALUES
_NOT_VALUES = frozenset("a an the of in on at to for with and or is are was were be by as it its has have had no yes "
                    "not all any none na n/a - -- — – ? . , total".split())


# library: jitlab.modules.sqlground._literal
def _literal(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


# library: jitlab.modules.sqlground.conditions
def conditions(question: str, columns: list[str], probe_result: str, near: int = 24) -> list[tuple[str, str]]:
    """(column, condition) pairs: the comparisons the question states, then for each value the probe found,
    longest first, an equality (a value of the table at a word boundary of the question) or a ``LIKE`` (a
    phrase of the question inside the column's values), skipping matches inside a longer one, a comparison
    or a column's name; a value in several columns goes to the column named nearest to it (within ``near``
    characters), else to the first the probe listed. A value of one or two characters (``0``, ``11``, ``D``)
    needs a column named within ``near`` characters. Several values of one column become ``IN (...)``."""
    found = comparisons(question, columns)
    used = [span for _, _, span in found]
    names = [span for c in columns for span in _spans(_name_pattern(c), question)]
    out = [(c, cond) for c, cond, _ in found]
    equal: dict[str, list[str]] = {}
    by_value: dict[str, list[str]] = {}
    for column, value in _pairs(probe_result):
        by_value.setdefault(value.strip(), []).append(column)

    def key(value: str) -> tuple[int, bool]:
        return len(value.strip("%")), not value.startswith("%")
    for value in sorted(by_value, key=key, reverse=True):
        like = value.startswith("%") and value.endswith("%") and len(value) > 2
        bare = value[1:-1].replace("''", "'") if like else value
        if bare.lower() in _NOT_VALUES:
            continue
        edge = r"[\w.,–-]" if re.match(r"\d", bare) else r"\w", r"[\w–-]" if re.search(r"\d$", bare) else r"\w"
        spans = [s for s in _spans(rf"(?<!{edge[0]})" + re.escape(bare) + rf"(?!{edge[1]})", question)
                 if not any(a < s[1] and s[0] < b for a, b in used + names)]
        if not spans:
            continue
        span = spans[0]

        def distance(column: str, span: tuple[int, int] = span) -> int:
            gaps = [max(a - span[1], span[0] - b) for a, b in _spans(_name_pattern(column), question)]
            return min(gaps, default=10**6)
        column = min(by_value[value], key=distance)
        if len(bare) <= 2 and distance(column) > near:
            continue
        used.append(span)
        if like:
            out.append((column, f"{_quote(column)} LIKE {_literal(value)}"))
        else:
            equal.setdefault(column, []).append(value)
    for column, values in equal.items():   # several values of one column: any of them (IN)
        out.append((column, f"{_quote(column)} = {_literal(values[0])}" if len(values) == 1 else
                    f"{_quote(column)} IN ({', '.join(_literal(v) for v in values)})"))
    return out


# library: jitlab.modules.sqlground._FILL
_FILL = r"(?!and\b|or\b|in\b|at\b|for\b|from\b|the\b|with\b)[a-z]+"   # a word between a name and its value


# library: jitlab.modules.sqlground._LINK
_LINK = r"['\"`]?(?:\s+" + _FILL + r"){0,%d}?\s*(?:as|is|=|:|of|to|equals?|equal to|with)?\s*"


# library: jitlab.modules.sqlground._QUOTED
_QUOTED = re.compile(r"(?<![\w'])'(.+?)'(?![\w])")


# library: jitlab.modules.sqlground._BARE_NUMBER
_BARE_NUMBER = re.compile(r"(?<![\w'.,–-])-?\d(?:[\d,.:–-]*\d)?(?![\w'])")   # 41,000  13-11  2:16.33


# library: jitlab.modules.sqlground.values_in
def values_in(question: str, names: list[str]) -> list[tuple[str, tuple[int, int]]]:
    """(value, span) of the question's literal values in order: its single-quoted strings (not one of ``names``,
    the table's and columns' names) and the numbers outside them."""
    quoted = [(m.group(1), m.span()) for m in _QUOTED.finditer(question)]
    out = [(v, s) for v, s in quoted if v.lower() not in {n.lower() for n in names}]
    out += [(m.group(0), m.span()) for m in _BARE_NUMBER.finditer(question)
            if not any(a <= m.start() < b for _, (a, b) in quoted)]
    return sorted(out, key=lambda vs: vs[1])


# library: jitlab.modules.sqlground._mentions
def _mentions(question: str, columns: list[str]) -> list[tuple[tuple[int, int], str]]:
    """(span, column) of every place the question names a column, in order."""
    return sorted((s, c) for c in columns for s in _spans(_name_pattern(c), question))


# library: jitlab.modules.sqlground.assign_values
def assign_values(question: str, columns: list[str], table: str = "", skip: set = frozenset(),
                  words: int = 2) -> dict[str, str]:
    """{column: value} the question states for its named columns: the value right after a column's name
    (``club 'FK Trakai'``, ``Episode # as 'S4'``, ``total score '290'``: up to ``words`` words between) or
    right before ``for <name>`` (``'San Diego' for 'Location'``); values in ``skip`` are left out."""
    values = [(v, s) for v, s in values_in(question, columns + [table]) if v not in skip]
    out: dict[str, str] = {}
    taken: set[tuple[int, int]] = set()
    mentions = [(s, c) for s, c in _mentions(question, columns) if not any(a <= s[0] < b for _, (a, b) in values)]
    link = re.compile(_LINK % words, re.IGNORECASE)
    for (a, b), column in mentions:
        if column in out:
            continue
        right = next((vs for vs in values if vs[1][0] >= b and link.fullmatch(question, b, vs[1][0])
                      and vs[1] not in taken), None)
        left = next((vs for vs in values if re.fullmatch(r"\s+for\s+['\"`]?", question[vs[1][1]:a], re.I)
                     and vs[1] not in taken), None)
        pick = right or left
        if pick:
            out[column] = pick[0]
            taken.add(pick[1])
    return out


# library: jitlab.modules.sqlground._TO
_TO = re.compile(r"\bto\s+(?:'(.+?)'(?![\w])|(-?\d(?:[\d,.:–-]*\d)?)(?![\w'])|((?:[A-Z][\w.'&-]*)(?:\s+[A-Z][\w.'&-]*)*))")


# library: jitlab.modules.sqlground.update_values
def update_values(question: str, columns: list[str], table: str = "", found: set = frozenset()) -> dict[str, str]:
    """{column: new value} an UPDATE instruction states: ``assign_values`` (values the table does not hold
    yet), then each ``to <value>`` (quoted, a number, or Capitalised Words) for the column named last before
    it (``the winner of the award to 'Naomi Osaka'``, ``the host city ... to Bratislava``)."""
    sets = assign_values(question, columns, table, skip=found)
    mentions = _mentions(question, columns)
    for m in _TO.finditer(question):
        value = next(g for g in m.groups() if g is not None).rstrip(".,;:")
        before = [c for (a, b), c in mentions if b <= m.start()]
        if before and before[-1] not in sets and value not in sets.values():
            sets[before[-1]] = value
    return sets


# library: jitlab.modules.sql.answer_from
def answer_from(result: str):
    """A commit answer from a query result: one value as a string, several as a list of strings; None when the
    result is an error, has no rows, or is not a query result."""
    if not str(result).startswith("Columns:"):
        return None
    values = [("none" if v is None else str(v)) for row in result_rows(result) for v in row]
    if not values or set(values) == {"none"}:   # no rows, or only NULLs: keep looking (the margin commits none)
        return None
    return values[0] if len(values) == 1 else values


# library: jitlab.modules.sqlground.insert_values
def insert_values(question: str, columns: list[str], table: str = "") -> list[str] | None:
    """The row an INSERT instruction states, in ``columns``' order: ``assign_values``, then the values left over
    in order when as many are left as columns (``... which are '33', '336', 'John Smith' ... respectively``) and
    one column is left or all of them are quoted (bare numbers in prose are not a row); None when some column
    stays without a value (prose the mechanism does not parse)."""
    assigned = assign_values(question, columns, table)
    used = set(assigned.values())
    rest = [(v, s) for v, s in values_in(question, columns + [table]) if v not in used]
    missing = [c for c in columns if c not in assigned]
    quoted = all(question[s[0]] == "'" for _, s in rest)
    if missing and (len(rest) != len(missing) or len(missing) > 1 and not quoted):
        return None
    rest = [v for v, _ in rest]
    assigned.update(zip(missing, rest))
    return [assigned[c] for c in columns]


# library: jitlab.modules.sql.numeric_columns
def numeric_columns(peek_result: str, columns: list[str]) -> set[str]:
    """The columns whose values in a ``SELECT *`` result (in ``columns``' order) are mostly numbers (at least half
    of the rows; commas allowed: ``21,000``; a ``—`` row does not disqualify a column)."""
    rows = [row for row in result_rows(peek_result) if len(row) == len(columns)]
    return {c for i, c in enumerate(columns)
            if rows and 2 * sum(bool(re.fullmatch(r"-?[\d,]*\.?\d+", str(row[i]).strip())) for row in rows) >= len(rows)}


# library: jitlab.modules.sqlground.table_values
def table_values(probe_result: str) -> set[str]:
    """The table's own values the probe found in the question (not the ``%phrase%`` matches)."""
    return {v for _, v in _pairs(probe_result) if not (v.startswith("%") and v.endswith("%"))}


# library: jitlab.modules.sql._CHANGED
_CHANGED = re.compile(r"^OK\.\s*(\d+) row", re.IGNORECASE)


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


# library: jitlab.modules.sql.statement
def statement(prefix: str, continuation: str) -> str:
    """The statement the prefilled start and the model's continuation make: cut at the first ``;`` (or a
    blank line / a code fence), whitespace collapsed, ending with ``;``."""
    text = re.split(r";|\n\s*\n|```", f"{prefix} {continuation}", maxsplit=1)[0]
    return " ".join(text.split()) + ";"


# library: jitlab.modules.sqlground.phrases
def phrases(question: str, columns: list[str]) -> list[str]:
    """The question's value-like phrases: runs of one to three words that are not stopwords or words of a
    column's name (``athlone town``, ``£8.5m``), longest first within each run, quotes doubled for SQL."""
    names = {w for c in columns for w in re.findall(r"\w+", c.lower())}
    out: list[str] = []
    run: list[str] = []
    for word in re.findall(r"[\w£$€%.,'-]+", question) + [""]:
        clean = word.strip(".,'\"?").replace("'", "''")
        if clean and clean.lower() not in STOPWORDS and clean.lower() not in names:
            run.append(clean)
            continue
        for n in range(min(3, len(run)), 0, -1):
            for i in range(len(run) - n + 1):
                phrase = " ".join(run[i:i + n])
                if phrase not in out:
                    out.append(phrase)
        run = []
    return out


# library: jitlab.modules.sql.where_clauses
def where_clauses(task_text: str, columns: list[str], limit: int = 48) -> list[str]:
    """Candidate WHERE clauses: each column ``LIKE`` each value-like phrase of the question
    (``jitlab.modules.sqlground.phrases``), at most ``limit``."""
    return [f"WHERE {_quote(c)} LIKE '%{v}%'" for v in phrases(question_of(task_text), columns)
            for c in columns][:limit]


# library: jitlab.modules.sqlground.probe_sql
def probe_sql(table: str, columns: list[str], question: str, limit: int = 50) -> str:
    """One statement listing (column, value) for every distinct value of every column that occurs in the
    question (case-insensitive), and (column, ``%phrase%``) for every phrase of the question (``phrases``) a
    column's values contain; longest first."""
    t = _quote(table)
    values = ", ".join(f"('{p}')" for p in phrases(question, columns)) or "('')"
    selects = [f"SELECT {_literal(c)} AS col, {_quote(c)} AS val FROM {t}, q WHERE trim({_quote(c)}) <> '' AND "
               f"instr(q.s, lower(trim({_quote(c)}))) UNION ALL SELECT {_literal(c)}, '%' || v || '%' FROM {t}, p "
               f"WHERE v <> '' AND {_quote(c)} LIKE '%' || v || '%'" for c in columns]
    return (f"WITH q(s) AS (SELECT {_literal(question.lower())}), p(v) AS (VALUES {values}) SELECT DISTINCT * FROM "
            f"({' UNION ALL '.join(selects)}) ORDER BY length(val) DESC LIMIT {limit};")


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


# ---- the harness's own code ----

class Action(SqlAction):
    pass
