"""The cross-backbone transfer matrix (jitlab.engineer.transfer) as a figure and a table, from a DataFrame.

    from jitlab.viz.transfer import transfer_matrix, fig_transfer_matrix, save_transfer_matrix
    frame = pd.read_csv("runs/transfer-tw/matrix.csv")     # one row per cell
    save_transfer_matrix(frame, "figures/transfer_tw")     # .png + .pdf

Input: one row per (learned_on, applied_to) cell with ``delta``, ``base_success``, ``patched_success``, ``n``
and per-task ``base_tokens_per_task``/``patched_tokens_per_task``/``base_cost_per_task``/``patched_cost_per_task``.
Rows of the figure are learned-on backbones, columns applied-to backbones; each cell shows Δ success (colour,
diverging around 0) and, below it, base -> patched success, n, and tokens and cost per task of the patched run.
Caveat: plain matplotlib (no HoloViews: a small annotated heatmap); a cell without finished pairs is blank.
"""
from __future__ import annotations

from pathlib import Path

from jitlab.viz.tables import markdown_table

__all__ = ["fig_transfer_matrix", "save_transfer_matrix", "transfer_matrix", "transfer_table"]


def transfer_matrix(frame, value: str = "delta"):
    """The cells as a learned_on × applied_to table of ``value`` (rows and columns in first-seen order)."""
    rows = list(dict.fromkeys(frame["learned_on"]))
    cols = list(dict.fromkeys(frame["applied_to"]))
    return frame.pivot(index="learned_on", columns="applied_to", values=value).reindex(index=rows, columns=cols)


def transfer_table(frame) -> str:
    """A Markdown table, one line per cell (Δ, base -> patched success with Wilson 95% intervals, wins/losses and
    the exact McNemar p where recorded, n, tokens and cost per task)."""
    cols = ["learned_on", "applied_to", "delta", "base_success", "patched_success", "base_success_wilson",
            "patched_success_wilson", "wins", "losses", "mcnemar_p", "n", "base_tokens_per_task",
            "patched_tokens_per_task", "base_cost_per_task", "patched_cost_per_task"]
    frame = frame.copy()
    for col in ("base_success_wilson", "patched_success_wilson"):
        if col in frame.columns:   # [lo, hi] -> "lo–hi"
            frame[col] = [f"{v[0]:.2f}–{v[1]:.2f}" if isinstance(v, (list, tuple)) else v for v in frame[col]]
    table = frame[[c for c in cols if c in frame.columns]]
    return markdown_table(table.astype(object).where(table.notna(), None), empty="n/a")


def _short(name: str, width: int = 28) -> str:
    return name if len(name) <= width else "…" + name[-(width - 1):]


def fig_transfer_matrix(frame, title: str = "Δ success of the learned overlay (patched − base)"):
    """A matplotlib Figure: the Δ matrix with each cell annotated (see the module docstring)."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    import numpy as np
    delta = transfer_matrix(frame)
    rows, cols = list(delta.index), list(delta.columns)
    by = {(r.learned_on, r.applied_to): r for r in frame.itertuples()}
    values = delta.to_numpy(dtype=float)
    fig, ax = plt.subplots(figsize=(2.6 * len(cols) + 2.2, 1.5 * len(rows) + 1.6))
    span = max(0.05, float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0)
    image = ax.imshow(np.ma.masked_invalid(values), cmap="RdBu", vmin=-span, vmax=span, aspect="auto")
    for i, a in enumerate(rows):
        for j, b in enumerate(cols):
            cell = by.get((a, b))
            if cell is None or cell.delta is None or cell.delta != cell.delta:  # NaN: no finished pairs
                continue
            text = (f"Δ {cell.delta:+.2f}\n{cell.base_success:.2f} → {cell.patched_success:.2f} (n={cell.n})\n"
                    f"{cell.patched_tokens_per_task:,.0f} tok, ${cell.patched_cost_per_task:.2g}/task")
            dark = abs(cell.delta) > 0.6 * span  # white text on the saturated ends of the colour map
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
    ax.set_xticks(range(len(cols)), [_short(c) for c in cols], rotation=15, ha="right")
    ax.set_yticks(range(len(rows)), [_short(r) for r in rows])
    ax.set_xlabel("applied to")
    ax.set_ylabel("learned on")
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, label="Δ success")
    fig.tight_layout()
    return fig


def save_transfer_matrix(frame, stem: str | Path, formats=("png", "pdf")) -> list[Path]:
    """Write the figure as ``stem.<fmt>``; returns the paths."""
    import matplotlib.pyplot as plt
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    fig = fig_transfer_matrix(frame)
    paths = []
    for fmt in formats:
        paths.append(stem.with_name(f"{stem.name}.{fmt}"))
        fig.savefig(paths[-1], dpi=150)
    plt.close(fig)
    return paths
