"""Value grounding for SQL: which column holds the values a question names, read from the table itself.

Idea: a 135M model's likelihoods do not pair a question's phrases with the right columns (issue 29: on
DBBench ``SqlAction`` wrote valid SQL whose WHERE clause matched ``'f'`` against ``"Win %"``). The database
can: one probe statement (``probe_sql``) asks the table for every (column, value) whose value occurs in the
question's text (``instr(lower(question), lower(value))``), longest first, so the pairing is read from a tool
result instead of guessed. ``conditions`` then keeps the matches that stand at word boundaries and do not
overlap a longer match, a column name or a numeric comparison, prefers the column the question names next to
the value when several hold it, and adds the comparisons the question states (``a Goal smaller than 17`` ->
``CAST(REPLACE("Goal", ',', '') AS REAL) < 17``). ``where_options`` turns them into WHERE clauses (all of
them first, then each alone), and ``answer_columns`` names the columns the question asks for (named in it,
not used by a condition). Schema linking by value matching is the standard first step of text-to-SQL systems
(e.g. BRIDGE, Lin et al. 2020, arXiv 2012.12627); this is its database-side, model-free form.

Instructions that change the table state their values: ``insert_values`` reads an INSERT's row from the
instruction (``'San Diego' for 'Location'``, ``club 'FK Trakai'``, ``... which are '33', '336' ...``) and
``update_values`` an UPDATE's new values (``the winner ... to 'Naomi Osaka'``); values the probe found in the
table are the UPDATE's WHERE clause, not its new values.

Couplings: ``jitlab.modules.sql.SqlAction`` sends the probe (``ground``) and prefills the WHERE clause from it;
the task text gives the question after ``Question / instruction:`` and the columns (``schema_of``). Caveats:
short numbers (``0``, ``11``) are kept only next to a column's name (they occur in many columns); a value the
question paraphrases (``MD`` for "Men's Doubles") is not found; the probe lists at most the rows the tool
shows (longest values first, so short numbers fall off first).
"""
from __future__ import annotations

import ast
import re

__all__ = ["STOPWORDS", "answer_columns", "assign_values", "comparisons", "conditions", "insert_values", "phrases",
           "probe_sql", "question_of", "result_rows", "table_values", "update_values", "values_in", "where_options"]

_OPS = {"<": r"smaller|less|fewer|lower|below|under|earlier|before", ">": r"larger|greater|more|higher|bigger|above|"
                                                                        r"over|later|after"}
_BARE = {"<": "under|below|before", ">": "over|above|after"}   # "game numbers under 20": no "than"
_NUMBER = r"(-?\d[\d,]*(?:\.\d+)?)"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def question_of(task_text: str) -> str:
    """The question after ``Question / instruction:`` (the whole text when there is no such line)."""
    m = re.search(r"question / instruction:\s*(.+)", str(task_text), re.IGNORECASE)
    return m.group(1).strip() if m else str(task_text)


def _spans(pattern: str, text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(pattern, text, re.IGNORECASE)]


def _mentions(question: str, columns: list[str]) -> list[tuple[tuple[int, int], str]]:
    """(span, column) of every place the question names a column, in order."""
    return sorted((s, c) for c in columns for s in _spans(_name_pattern(c), question))


def _name_pattern(column: str) -> str:
    return r"(?<![\w])" + r"\s*".join(re.escape(part) for part in column.split()) + r"(?:e?s)?(?![\w])"


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


STOPWORDS = frozenset("a an the of in on at to for with and or is are was were be what which who whom whose how many "
                       "much when where is it its as by from that this than there their his her he she they them "
                       "did does do has have had total number name names count average lowest highest most least "
                       "give list tell show find but if not also only full listed".split())


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


def table_values(probe_result: str) -> set[str]:
    """The table's own values the probe found in the question (not the ``%phrase%`` matches)."""
    return {v for _, v in _pairs(probe_result) if not (v.startswith("%") and v.endswith("%"))}


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


def _pairs(result: str) -> list[tuple[str, str]]:
    return [(str(row[0]), str(row[1])) for row in result_rows(result) if len(row) == 2 and row[1] is not None]


_NOT_VALUES = frozenset("a an the of in on at to for with and or is are was were be by as it its has have had no yes "
                    "not all any none na n/a - -- — – ? . , total".split())


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


def where_options(conds: list[tuple[str, str]], limit: int = 8) -> list[str]:
    """WHERE clauses from the conditions: all of them joined by AND first, then each one alone."""
    clauses = [cond for _, cond in conds]
    if not clauses:
        return []
    options = ["WHERE " + " AND ".join(clauses)] + ["WHERE " + c for c in clauses if len(clauses) > 1]
    return options[:limit]


def _imperative(question: str, span: tuple[int, int]) -> bool:
    """A question's first word used as a verb (``Name the least touchdowns``), not a column's name."""
    return span[0] == 0 and bool(re.match(r"\s+(?:the|a|an|all|each|every)\b", question[span[1]:], re.I))


def answer_columns(question: str, columns: list[str], conds: list[tuple[str, str]]) -> list[str]:
    """The columns the question names that no condition uses (what it asks for), in the order it names them;
    a name inside a longer column's name (``Home team`` in ``home team score``) does not count."""
    spans = {c: [s for s in _spans(_name_pattern(c), question) if not _imperative(question, s)] for c in columns}
    inside = {c for c in columns for s in spans[c] for o in columns if o != c and len(o) > len(c)
              and any(a <= s[0] and s[1] <= b for a, b in spans[o])}
    taken = {c for c, _ in conds}
    named = [(spans[c][0][0], c) for c in columns if spans[c] and c not in taken and c not in inside]
    return [c for _, c in sorted(named)]


_QUOTED = re.compile(r"(?<![\w'])'(.+?)'(?![\w])")
_BARE_NUMBER = re.compile(r"(?<![\w'.,–-])-?\d(?:[\d,.:–-]*\d)?(?![\w'])")   # 41,000  13-11  2:16.33
_FILL = r"(?!and\b|or\b|in\b|at\b|for\b|from\b|the\b|with\b)[a-z]+"   # a word between a name and its value
_LINK = r"['\"`]?(?:\s+" + _FILL + r"){0,%d}?\s*(?:as|is|=|:|of|to|equals?|equal to|with)?\s*"


def values_in(question: str, names: list[str]) -> list[tuple[str, tuple[int, int]]]:
    """(value, span) of the question's literal values in order: its single-quoted strings (not one of ``names``,
    the table's and columns' names) and the numbers outside them."""
    quoted = [(m.group(1), m.span()) for m in _QUOTED.finditer(question)]
    out = [(v, s) for v, s in quoted if v.lower() not in {n.lower() for n in names}]
    out += [(m.group(0), m.span()) for m in _BARE_NUMBER.finditer(question)
            if not any(a <= m.start() < b for _, (a, b) in quoted)]
    return sorted(out, key=lambda vs: vs[1])


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


_TO = re.compile(r"\bto\s+(?:'(.+?)'(?![\w])|(-?\d(?:[\d,.:–-]*\d)?)(?![\w'])|((?:[A-Z][\w.'&-]*)(?:\s+[A-Z][\w.'&-]*)*))")


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
