"""Notebook helpers: the figures of jitlab.viz.figures as interactive bokeh plots inline in JupyterLab, Figure 4
linked to its table of pairings, and small ipywidgets controls to pick runs from ``runs/``.

    from jitlab.viz import notebook as V
    V.setup()                                  # once per notebook: BokehJS inline (works offline), hvplot
    V.interactive(F.fig_stream(df))            # hover, legend entries toggle their curves
    V.pareto_explorer(df, title="toy")         # Figure 4 + table: tap / box-select points to select their rows
    picker = V.run_picker("runs", run_dir)     # a dropdown of the runs under runs/; read picker.value
    V.step_lines(curves, "tag", "rewards")     # logged training scalars over steps (train.report.training_scalars)

The static PNG/PDF of ``figures/`` are still written by ``viz.runs.save_figure`` / ``figures.save``; these
helpers only change what a notebook shows.

Caveats: ``setup`` inlines BokehJS and Panel's resources into the notebook (a few MB of output, but no CDN is
needed: the lab may be offline). The selection link goes one way, points → table rows, and needs a live kernel
(an exported notebook shows the plot and the table, unlinked). A picker's choice is read when the cells below it
run: pick, then run them (Shift-Enter, or Run > Run Selected Cell and All Below).
"""
from __future__ import annotations

import os
from pathlib import Path

from jitlab.errors import ConfigError
from jitlab.store import DB_NAME
from jitlab.viz.figures import fig_pareto, pairings, pareto_frontier

__all__ = ["setup", "interactive", "pareto_explorer", "list_runs", "run_picker", "runs_chooser", "step_lines"]

PAIRING_COLUMNS = ["method", "backbone", "n", "score", "cost_per_case", "tokens_per_case", "tool_calls_per_case",
                   "on_frontier"]


def setup(tables: bool = False) -> None:
    """Load HoloViews' bokeh backend into the notebook, resources inline (works offline), and register
    ``df.hvplot``; with ``tables``, Panel's Tabulator too (``pareto_explorer``). Call it before the first plot; again
    is harmless. ``JITLAB_NOTEBOOK_CDN=1`` loads BokehJS and Panel's JS from their CDN instead, so an HTML copy is
    ~100 kB, not ~3.5 MB, but needs a network to draw its plots (``jitlab batch --html`` keeps them inline)."""
    import holoviews as hv
    inline = os.environ.get("JITLAB_NOTEBOOK_CDN") != "1"
    hv.notebook_extension.inline = inline    # hvplot's own extension call (on import) then follows it
    import hvplot.pandas  # noqa: F401  (registers DataFrame.hvplot; loads the bokeh extension in a notebook)
    if tables:
        import panel as pn
        pn.extension("tabulator", inline=inline)


def interactive(fig):
    """``fig`` (a HoloViews figure from jitlab.viz.figures or hvplot) with hover on every point, curve and bar,
    and legends whose entries hide and show their glyphs when clicked. Displays as bokeh in a notebook."""
    import holoviews as hv
    hv.Store.set_current_backend("bokeh")
    hover = [hv.opts.Scatter(tools=["hover"]), hv.opts.Curve(tools=["hover"]), hv.opts.Bars(tools=["hover"])]
    legend = {"click_policy": "hide"}
    return fig.opts(*hover, hv.opts.Overlay(legend_opts=legend), backend="bokeh", clone=True)


def _pairings(df):
    pairs = pairings(df)
    pairs["on_frontier"] = pairs.index.isin(pareto_frontier(pairs).index)
    return pairs.reset_index(drop=True)


def pareto_explorer(df, title: str | None = None):
    """Figure 4 (``figures.fig_pareto``) above the table of its pairings; tapping or box-selecting points selects
    the pairings' rows (hover names method, backbone, tasks, score, cost and tokens). A Panel Column."""
    import holoviews as hv
    import panel as pn

    pairs = _pairings(df)
    fig = interactive(fig_pareto(df, title=title))
    # one selectable layer over all pairings: a ring that shows only on selected points (the coloured markers
    # below stay as they are, one glyph per method · backbone for the legend)
    picks = hv.Scatter(pairs, "cost_per_case", ["score", "method", "backbone", "n", "tokens_per_case"]).opts(
        backend="bokeh", size=18, fill_alpha=0.0, line_alpha=0.0, line_color="crimson", line_width=2.5,
        selection_line_alpha=1.0, nonselection_line_alpha=0.0, selection_fill_alpha=0.0,
        nonselection_fill_alpha=0.0, tools=["tap", "box_select", "hover"], active_tools=["tap"])
    options = fig.opts.get("plot", backend="bokeh").kwargs
    options.update(fig.opts.get("style", backend="bokeh").kwargs)
    plot = hv.Overlay([*fig, picks]).opts(backend="bokeh", **options)
    table = pn.widgets.Tabulator(pairs[PAIRING_COLUMNS], disabled=True, selectable="checkbox", show_index=False,
                                 sizing_mode="stretch_width", height=min(420, 40 + 32 * len(pairs)))
    selection = hv.streams.Selection1D(source=picks)
    selection.add_subscriber(lambda index: setattr(table, "selection", list(index)))
    column = pn.Column(pn.pane.HoloViews(plot, backend="bokeh"), table, name="Figure 4")
    column.selection = selection   # the link, for code and tests: selection.event(index=[...]) selects rows
    return column


def list_runs(root: str | Path = "runs") -> list[str]:
    """The run directories under ``root`` (folders holding a run.sqlite), newest first; [] when there is none."""
    base = Path(root)
    runs = [db.parent for db in base.rglob(DB_NAME)] if base.is_dir() else []
    return [str(p) for p in sorted(runs, key=lambda p: (p / DB_NAME).stat().st_mtime, reverse=True)]


def _options(root, extra) -> list[tuple[str, str]]:
    found = [*(str(p) for p in extra if p), *list_runs(root)]
    paths = list(dict.fromkeys(str(Path(p).resolve()) for p in found))
    base = Path(root).resolve()
    return [(str(Path(p).relative_to(base)) if Path(p).is_relative_to(base) else p, p) for p in paths]


def run_picker(root: str | Path = "runs", value: str | Path | None = None, description: str = "run"):
    """A dropdown of the runs under ``root`` (plus ``value``, the notebook's parameter, selected first).
    Read ``.value``: the run directory's absolute path."""
    import ipywidgets as widgets
    options = _options(root, [value] if value else [])
    if not options:
        raise ConfigError(f"no run directories under {root} (folders with a run.sqlite): make one with `jitlab run`, "
                          "or set run_dir in the parameters cell")
    return widgets.Dropdown(options=options, value=options[0][1], description=description,
                            layout=widgets.Layout(width="90%"), style={"description_width": "initial"})


def runs_chooser(root: str | Path = "runs", selected=(), description: str = "runs"):
    """A multi-select of the runs under ``root`` (and ``selected``, selected at first). ``.value``: a tuple of
    absolute run directories."""
    import ipywidgets as widgets
    selected = [str(Path(p).resolve()) for p in selected]
    options = _options(root, selected)
    return widgets.SelectMultiple(options=options, value=tuple(selected), description=description,
                                  rows=min(12, max(3, len(options))), layout=widgets.Layout(width="90%"))


def step_lines(df, by: str, title: str, width: int = 420, height: int = 300, **opts):
    """Logged scalars (``step``, ``value`` columns: train.report.training_scalars) as one line per ``by`` value, with
    its points too: a one-step smoke run has no line to draw. ``opts`` go to hvplot (``ylabel=``, ...)."""
    import hvplot.pandas  # noqa: F401  (registers DataFrame.hvplot)
    return (df.hvplot.line(x="step", y="value", by=by, title=title, height=height, width=width, **opts)
            * df.hvplot.scatter(x="step", y="value", by=by, legend=False))
