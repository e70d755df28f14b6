"""The look every jitlab figure shares, in both HoloViews backends (bokeh for HTML, matplotlib for PNG/PDF): the
palette, the line dash per run mode, and the helpers that style an element or a panel. viz/figures.py, the dashboards
and train/report.py draw with these.
"""
from __future__ import annotations

__all__ = ["DASH", "PALETTE", "colors", "hv", "panel_opts", "style"]

# 16 colours, so the 13 seeds (plus JIT) each get their own before the cycle repeats
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22", "#393b79", "#ff9896", "#98df8a", "#c5b0d5", "#ffbb78", "#637939"]
# line dash per run mode: (bokeh, matplotlib)
DASH = {"static": ("dashed", "--"), "streaming": ("solid", "-"), "fixed": ("dotted", ":")}


def hv():
    """HoloViews with both backends registered, without notebook output. (matplotlib picks a headless
    backend by itself when there is no display; a notebook's inline backend is left alone.)"""
    import holoviews as hv
    import holoviews.plotting.bokeh
    import holoviews.plotting.mpl
    return hv


def colors(keys) -> dict:
    """One palette colour per distinct key, in first-seen order."""
    return {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(dict.fromkeys(keys))}


def style(element, color=None, dash=None, alpha=None, width=None, fill=False):
    """Apply the same look in both backends (their option names differ). ``fill``: an area/band."""
    bk, mpl = {}, {}
    if width is not None:
        bk["line_width"] = mpl["linewidth"] = width
    if fill:
        bk.update(fill_color=color, line_alpha=0.0, fill_alpha=alpha if alpha is not None else 0.2)
        mpl.update(color=color, facecolor=color, edgecolor="none", alpha=alpha if alpha is not None else 0.2)
        return element.opts(backend="bokeh", **bk).opts(backend="matplotlib", **mpl)
    if color is not None:
        bk["color"] = mpl["color"] = color
    if dash is not None:
        bk["line_dash"], mpl["linestyle"] = DASH.get(dash, ("solid", "-"))
    if alpha is not None:
        bk["alpha"] = mpl["alpha"] = alpha
    return element.opts(backend="bokeh", **bk).opts(backend="matplotlib", **mpl)


def panel_opts(element, title, xlabel, ylabel, legend=True):
    """A titled, labelled panel of the standard size, the same in both backends."""
    return element.opts(backend="bokeh", title=title, xlabel=xlabel, ylabel=ylabel, width=420, height=320,
                        show_legend=legend, legend_position="bottom_right", tools=["hover"], show_grid=True) \
                  .opts(backend="matplotlib", title=title, xlabel=xlabel, ylabel=ylabel, fig_size=140,
                        aspect=1.3, show_legend=legend, legend_position="bottom_right", show_grid=True)
