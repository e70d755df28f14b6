"""Markdown tables from DataFrames without extra dependencies (pandas' to_markdown needs tabulate), and the cells
every table uses for a number with its 95% interval (jitlab.stats): ``rate_cell`` (a success rate with its Wilson
interval) and ``mean_cell`` (a mean with its bootstrap interval).

    rate_cell(2, 10)                    # '0.20 (2/10; 0.06–0.51)'
    mean_cell(16013.2, 9040, 23260)     # "16,013 (9,040 to 23,260)"
"""
from __future__ import annotations

import math

from jitlab.stats import LEVEL, wilson

__all__ = ["RATE_HEADER", "markdown_table", "mean_cell", "rate_cell"]

RATE_HEADER = "success (k/n; Wilson 95%)"


def rate_cell(k: int, n: int, level: float = LEVEL) -> str:
    """``rate (k/n; lo–hi)``: a success rate with its Wilson interval."""
    lo, hi = wilson(int(k), int(n), level)
    return f"{k / n if n else 0.0:.2f} ({int(k)}/{int(n)}; {lo:.2f}–{hi:.2f})"


def mean_cell(mean: float, lo: float, hi: float, fmt: str | None = None) -> str:
    """``mean (lo–hi)``; ``fmt`` defaults to thousands separators for |mean| >= 100, else 2 decimals."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    fmt = fmt or (",.0f" if abs(mean) >= 100 else ".2f")

    def num(x):   # a value that rounds to zero is written as zero, never "-0"
        text = format(x, fmt)
        return format(0.0, fmt) if float(text.replace(",", "")) == 0 else text
    return f"{num(mean)} ({num(lo)} to {num(hi)})"


def markdown_table(df, floatfmt: str = ".3g", empty: str | None = None) -> str:
    """A GitHub-style table: floats formatted with ``floatfmt``; ``empty`` (if given) replaces None/''."""
    def cell(value) -> str:
        if empty is not None and (value is None or (isinstance(value, str) and value == "")):
            text = empty
        else:
            text = format(value, floatfmt) if isinstance(value, float) else str(value)
        return text.replace("|", "\\|").replace("\n", " ")
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)
