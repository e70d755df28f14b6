"""Run comparison dashboard: several runs side by side, per task, with the Pareto view.

    import jitlab.viz.dash
    jitlab.viz.dash.compare(["runs/tw-react", "runs/tw-static", "runs/tw-streaming"])
    jitlab dash runs/tw-react runs/tw-static runs/tw-streaming      # served, with a replay tab per run

Per task in stream order, one line per run: cumulative success, tokens, cost and tool calls; the
cost-vs-score scatter of the runs' harness × backbone pairings with the global Pareto frontier
(jitlab.viz.figures.fig_pareto); and a table of the numbers. Reads saved records only; ``refresh()``
rereads them (live mode polls it).
"""
from __future__ import annotations

from pathlib import Path

import holoviews as hv
import panel as pn
import param

from jitlab.viz.dash.data import status_counts
from jitlab.viz.dash.replay_view import _setup
from jitlab.viz.figures import collect, expand_runs, fig_pareto, pairings, pareto_frontier, stream_curves
from jitlab.viz.style import PALETTE

__all__ = ["CompareApp", "compare", "METRICS"]

METRICS = [("cum_accuracy", "cumulative success"), ("tokens", "tokens per task"), ("cost", "cost per task ($)"),
           ("tool_calls", "tool calls per task")]


class CompareApp(param.Parameterized):
    """Side-by-side view of several runs. ``view()`` is the servable layout."""

    version = param.Integer(default=0, doc="bumped whenever the records are reread")

    def __init__(self, run_dirs, live: bool = False, poll_s: float = 5.0, window: int = 5, **params):
        super().__init__(**params)
        _setup()
        self.run_dirs = [Path(p) for p in expand_runs(run_dirs)]
        self.live, self.poll_s, self.window = live, poll_s, window
        self._stamp = None
        self._load()

    def _load(self) -> None:
        self._stamp = [status_counts(d) for d in self.run_dirs]
        self.df = collect(self.run_dirs)
        self.curves = stream_curves(self.df, self.window) if len(self.df) else self.df

    def refresh(self) -> bool:
        if [status_counts(d) for d in self.run_dirs] == self._stamp:
            return False
        self._load()
        self.version += 1
        return True

    def _label(self, run: str) -> str:
        g = self.df[self.df["run"] == run].iloc[0]
        return f"{Path(run).name} ({g['method']} · {g['backbone']})"

    def _metric(self, column, ylabel, version=None):
        lines = []
        for i, (run, g) in enumerate(self.curves.groupby("run", sort=False) if len(self.curves) else []):
            dash = {"static": "dashed", "fixed": "dotted"}.get(g["mode"].iloc[0], "solid")
            ys = g[column] if column == "cum_accuracy" else g[f"{column}_mean"] if f"{column}_mean" in g else \
                g[column].rolling(self.window, min_periods=1).mean()
            lines.append(hv.Curve((g["stream_index"], ys), "task", ylabel, label=self._label(run))
                         .opts(color=PALETTE[i % 8], line_width=2, line_dash=dash, tools=["hover"]))
        title = ylabel if column == "cum_accuracy" else f"{ylabel} ({self.window}-task rolling mean)"
        return hv.Overlay(lines).opts(title=title, width=460, height=300, show_grid=True, xlabel="task in stream",
                                      ylabel=ylabel, legend_position="top_left", show_legend=column == "cum_accuracy")

    def _pareto(self, version=None):
        if self.df.empty:
            return hv.Scatter([], "cost_per_case", "score").opts(title="no finished episodes yet")
        return fig_pareto(self.df).opts(width=700, height=400)

    def _table(self, version=None):
        if self.df.empty:
            return pn.pane.Markdown("No finished episodes yet.")
        p = pairings(self.df)
        p["on_frontier"] = p.index.isin(pareto_frontier(p).index)
        return pn.pane.DataFrame(p.round(6), index=False, sizing_mode="stretch_width")

    def view(self):
        v = self.param.version

        def plot(fn, *args):
            return pn.pane.HoloViews(pn.bind(fn, *args, version=v), backend="bokeh", linked_axes=False)
        names = ", ".join(d.name for d in self.run_dirs)
        layout = pn.Column(
            pn.pane.Markdown(f"### comparing {len(self.run_dirs)} runs: {names}"),
            pn.GridBox(*[plot(self._metric, col, label) for col, label in METRICS], ncols=2),
            pn.Row(plot(self._pareto), pn.panel(pn.bind(self._table, version=v))),
            name="compare", sizing_mode="stretch_width")
        if self.live:
            pn.state.onload(lambda: pn.state.add_periodic_callback(self.refresh, period=int(self.poll_s * 1000)))
        return layout

    def __panel__(self):
        return self.view()


def compare(run_dirs, live: bool = False, poll_s: float = 5.0, window: int = 5):
    """A servable Panel layout comparing ``run_dirs`` (see the module docstring)."""
    return CompareApp(run_dirs, live=live, poll_s=poll_s, window=window).view()
