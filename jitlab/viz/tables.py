"""Markdown tables from DataFrames without extra dependencies (pandas' to_markdown needs tabulate)."""
from __future__ import annotations

__all__ = ["markdown_table"]


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
