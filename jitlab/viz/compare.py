"""The tables and figure of a paired comparison (jitlab/compare.py): markdown, CSV and a Δ-with-interval plot.

    table, flips, runs = jitlab.compare.compare_runs([a, b, c])
    print(compare_markdown(table))
    write_comparison(table, flips, runs, "runs/compare-tw")   # compare.md/.csv, flips.csv, cards.md, compare.png/.html

The figure has two panels, one point per pair (B vs A): the mean per-task Δ reward and Δ tokens with their paired
bootstrap 95% intervals as error bars, the McNemar p-value and wins/losses in each pair's label.
"""
from __future__ import annotations

from pathlib import Path

from jitlab.card import format_card
from jitlab.stats import LEVEL
from jitlab.store import make_dir
from jitlab.viz.figures import save
from jitlab.viz.style import hv as holoviews
from jitlab.viz.style import panel_opts
from jitlab.viz.tables import markdown_table, mean_cell

__all__ = ["compare_markdown", "fig_compare", "pair_label", "write_comparison"]


def pair_label(row) -> str:
    return f"{row['b']} vs {row['a']}"


def compare_markdown(table, level: float = LEVEL) -> str:
    """The paired table as markdown: success counts, wins/losses/ties, McNemar p, Δ with ``level`` intervals, flips."""
    import pandas as pd
    rows = [{"A": r["a"], "B": r["b"], "tasks": r["n_tasks"], "success A": f"{r['success_a']}/{r['n_tasks']}",
             "success B": f"{r['success_b']}/{r['n_tasks']}",
             "B wins / losses / ties": f"{r['wins']} / {r['losses']} / {r['ties']}",
             "McNemar exact p": f"{r['mcnemar_p']:.3g}",
             f"Δ reward (B−A, {level:.0%} paired bootstrap)": mean_cell(r["delta_reward"], r["delta_reward_lo"],
                                                               r["delta_reward_hi"], "+.3f"),
             f"Δ tokens/task (B−A, {level:.0%})": mean_cell(r["delta_tokens"], r["delta_tokens_lo"], r["delta_tokens_hi"],
                                                   "+,.0f"),
             "flipped tasks (+ B won, − B lost)": r["flipped"] or "none"} for _, r in table.iterrows()]
    return markdown_table(pd.DataFrame(rows))


def fig_compare(table, title: str | None = None):
    """Δ reward and Δ tokens per task (B − A) per pair, with their 95% paired bootstrap intervals as error bars."""
    hv = holoviews()
    x = list(range(len(table)))
    ticks = [(i, f"{pair_label(r)}\n{r['wins']}W/{r['losses']}L, p={r['mcnemar_p']:.2g}")
             for i, (_, r) in enumerate(table.iterrows())]
    panels = []
    for col, ylabel in (("delta_reward", "Δ reward per task (B − A)"), ("delta_tokens", "Δ tokens per task (B − A)")):
        mean, lo, hi = table[col].to_numpy(), table[f"{col}_lo"].to_numpy(), table[f"{col}_hi"].to_numpy()
        bars = hv.ErrorBars((x, mean, mean - lo, hi - mean), "pair", [ylabel, "neg", "pos"])
        dots = hv.Scatter((x, mean), "pair", ylabel).opts(backend="bokeh", size=9).opts(backend="matplotlib", s=50)
        zero = hv.HLine(0).opts(backend="bokeh", line_dash="dashed", color="#777777") \
            .opts(backend="matplotlib", linestyle="--", color="#777777")
        panel = panel_opts(hv.Overlay([zero, bars, dots]), f"{title + ': ' if title else ''}{ylabel}", "pair",
                            "mean Δ, 95% interval", legend=False)
        panels.append(panel.opts(backend="bokeh", xticks=ticks, width=max(420, 260 * len(x)))
                      .opts(backend="matplotlib", xticks=ticks))
    return (panels[0] + panels[1]).cols(2)


def write_comparison(table, flips, runs, out: str | Path, figure: bool = True, level: float = LEVEL) -> list[Path]:
    """Write ``compare.md`` (cards and the paired table), ``compare.csv``, ``flips.csv`` and, with ``figure``,
    ``compare.png``/``.html`` into ``out``; returns the paths."""
    out = make_dir(out, "--out")
    md = out / "compare.md"
    cards = "\n\n".join(f"```\n{format_card(r.card, r.label)}\n```" for r in runs)
    md.write_text(f"# Paired comparison\n\n## Harness cards\n\n{cards}\n\n## B vs A on the same tasks and seeds\n\n"
                  f"{compare_markdown(table, level)}\n")
    table.to_csv(out / "compare.csv", index=False)
    flips.to_csv(out / "flips.csv", index=False)
    written = [md, out / "compare.csv", out / "flips.csv"]
    if figure:
        written += save(fig_compare(table), out / "compare", formats=("png", "html"))
    return written
