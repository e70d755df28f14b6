"""The tables of ``jitlab gap`` (jitlab/gap.py) as markdown and CSV files.

    t = jitlab.gap.gap_table(dev, test, jit)
    print(gap_markdown(t))
    write_gap(t, "results/gap")       # gap.md (cards and tables), rows.csv, families.csv, stream.csv, chosen.csv
"""
from __future__ import annotations

import math
from pathlib import Path

from jitlab.card import format_card
from jitlab.stats import LEVEL
from jitlab.store import make_dir
from jitlab.viz.tables import RATE_HEADER, markdown_table, mean_cell, rate_cell

__all__ = ["gap_markdown", "write_gap"]


def _share(x: float) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.2f}"


def _paired(r, prefix: str, level: float) -> str:
    return (f"{r[prefix + 'wins']} / {r[prefix + 'losses']}, p={r[prefix + 'mcnemar_p']:.3g}, Δ "
            + mean_cell(r[prefix + "delta_success"], r[prefix + "delta_success_lo"], r[prefix + "delta_success_hi"],
                        "+.2f"))


def rows_markdown(rows, level: float = LEVEL) -> str:
    import pandas as pd
    out = [{"row": r["row"], "ran": r["ran"], RATE_HEADER: rate_cell(r["success"], r["n_tasks"], level),
            "tokens/task": f"{r['tokens_per_task']:,.0f}",
            f"vs per-family oracle (W / L, McNemar p, Δ success {level:.0%})": _paired(r, "vs_family_", level),
            f"vs best single (W / L, McNemar p, Δ success {level:.0%})": _paired(r, "vs_single_", level),
            "gap closed (row − single) / (instance − single)": _share(r["gap_share"]),
            "equal-weight over suites (± SE)": f"{r['equal_weight_rate']:.2f} ± {r['equal_weight_se']:.2f} "
                                               f"({r['suites']} suites)"} for _, r in rows.iterrows()]
    return markdown_table(pd.DataFrame(out))


def families_markdown(families) -> str:
    """Rows × (suite/family): ``k/n (gap share)``; a suite's own column is ``<suite>/(all)``."""
    cells = families.assign(column=families["suite"].astype(str) + "/" + families["family"],
                            cell=[f"{k}/{n} (gap {_share(g)})" for k, n, g in
                                  zip(families["success"], families["n_tasks"], families["gap_share"])])
    table = cells.pivot(index="row", columns="column", values="cell")
    table = table.loc[list(dict.fromkeys(cells["row"])), list(dict.fromkeys(cells["column"]))]
    return markdown_table(table.reset_index())


def stream_markdown(stream) -> str:
    """Rows × slices of the stream: ``k/n``."""
    if not len(stream):
        return "(no JIT run: no stream positions)"
    cells = stream.assign(cell=[f"{k}/{n}" for k, n in zip(stream["success"], stream["n_tasks"])],
                          column="positions " + stream["positions"])
    table = cells.pivot(index="row", columns="column", values="cell")
    table = table.loc[list(dict.fromkeys(cells["row"])), list(dict.fromkeys(cells["column"]))]
    return markdown_table(table.reset_index())


def chosen_markdown(chosen) -> str:
    import pandas as pd
    return markdown_table(pd.DataFrame([{"choice": r["choice"], "family": r["family"], "harness": r["harness"],
                                         "dev success": f"{r['dev_success']}/{r['dev_tasks']}",
                                         "dev tokens/task": f"{r['dev_tokens_per_task']:,.0f}"}
                                        for _, r in chosen.iterrows()]))


def gap_markdown(t, level: float = LEVEL) -> str:
    """Every table of ``t`` (a jitlab.gap.GapTable) under its heading."""
    return (f"## The rows, on the same {t.rows['n_tasks'].iloc[0]} test tasks\n\n{rows_markdown(t.rows, level)}\n\n"
            f"## Per suite and family: successes (gap closed)\n\n{families_markdown(t.families)}\n\n"
            f"## Along the stream\n\n{stream_markdown(t.stream)}\n\n"
            f"## Chosen on dev\n\n{chosen_markdown(t.chosen)}\n")


def write_gap(t, out: str | Path, level: float = LEVEL) -> list[Path]:
    """Write ``gap.md`` (the runs' cards and every table), ``rows.csv``, ``families.csv``, ``stream.csv`` and
    ``chosen.csv`` into ``out``; returns the paths."""
    out = make_dir(out, "--out")
    cards = "\n\n".join(f"```\n{format_card(r.card, r.label)}\n```" for r in t.runs)
    (out / "gap.md").write_text(f"# One harness vs a harness per task\n\n{gap_markdown(t, level)}\n"
                                f"## Harness cards\n\n{cards}\n")
    written = [out / "gap.md"]
    for name in ("rows", "families", "stream", "chosen"):
        getattr(t, name).to_csv(out / f"{name}.csv", index=False)
        written.append(out / f"{name}.csv")
    return written
