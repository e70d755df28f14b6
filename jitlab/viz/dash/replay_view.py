"""Streaming replay dashboard: step through a run's task stream with a Player widget.

    import jitlab.viz.dash
    jitlab.viz.dash.replay("runs/tw-streaming")                 # in JupyterLab: displays inline
    jitlab.viz.dash.replay("runs/tw-streaming", live=True)      # a run still writing: polls for new tasks
    jitlab dash runs/tw-streaming                           # served (see jitlab/viz/dash/server.py)

Linked to the Player's position: cumulative accuracy, per-task cost and tool calls (rolling mean ±
std) up to the current task; the harnesses run so far as (cost, score) with the bank's frontier at
that moment (``extra.frontier``); and the harness of the current task: its anatomy diagram
(jitlab.viz.anatomy) and a unified diff against its nearest reference (``extra.nearest_reference``).

Caveats: reads saved records only. Drawing the anatomy of a *generated* harness imports its code
in this process, so it is off unless ``trust_code=True`` (``--trust-harness-code``); seed harnesses
are always drawn. Live mode needs a running Panel server or notebook kernel for its periodic callback.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import holoviews as hv
import pandas as pd
import panel as pn
import param

from jitlab.viz.anatomy import anatomy
from jitlab.viz.anatomy_svg import to_svg
from jitlab.viz.dash import data as D
from jitlab.viz.figures import stream_curves

__all__ = ["ReplayApp", "replay", "PLOTS"]

PLOTS = 4          # bokeh plots one replay page draws (accuracy, cost, tool calls, frontier)
_W, _H = 400, 280
_BLUE, _RED, _GREY = "#1f77b4", "#d62728", "#9e9e9e"
_CURVE_COLUMNS = ["stream_index", "success", "cum_accuracy", "cost", "cost_mean", "cost_std", "tool_calls",
                  "tool_calls_mean", "tool_calls_std", "tokens"]


def _setup() -> None:
    pn.extension(notifications=False)
    import holoviews.plotting.bokeh  # noqa: F401  registers the backend without notebook output
    hv.Store.set_current_backend("bokeh")


@lru_cache(maxsize=128)
def _anatomy_svg(folder: str) -> str:
    return to_svg(anatomy(folder))


class ReplayApp(param.Parameterized):
    """The replay of one run. ``view()`` is the servable Panel layout; ``refresh()`` rereads the run."""

    version = param.Integer(default=0, doc="bumped whenever the records are reread")

    def __init__(self, run_dir, live: bool = False, poll_s: float = 2.0, window: int = 5,
                 trust_code: bool = False, **params):
        super().__init__(**params)
        _setup()
        self.run_dir, self.live, self.poll_s = Path(run_dir), live, poll_s
        self.window, self.trust_code = window, trust_code
        self.counts: dict = {}
        self._load()
        self.player = pn.widgets.Player(label="task in stream", start=0, end=max(len(self.df) - 1, 1), value=0,
                                        interval=700, loop_policy="once", show_loop_controls=False, width=420)

    # -- data -------------------------------------------------------------------------------------
    def _load(self) -> None:
        self.counts = D.status_counts(self.run_dir)
        self.df = D.load_run(self.run_dir)
        if len(self.df):
            curves = stream_curves(self.df, self.window)
        else:
            curves = pd.DataFrame(columns=_CURVE_COLUMNS).astype(float)
            curves["task_id"] = curves["mode"] = pd.Series(dtype=str)
        curves["position"] = range(len(curves))
        self.curves = curves

    def refresh(self) -> bool:
        """Reread the records if they changed; the Player follows new tasks when it sat at the end.
        Returns whether anything changed."""
        counts = D.status_counts(self.run_dir)
        if counts == self.counts:
            return False
        following = self.player.value >= len(self.df) - 1
        self._load()
        end = max(len(self.df) - 1, 1)
        self.player.end = end
        if following:
            self.player.value = max(len(self.df) - 1, 0)
        self.version += 1
        return True

    # -- panels -----------------------------------------------------------------------------------
    def _xlim(self):
        return (-0.5, max(len(self.df) - 0.5, 1.5))

    def _upto(self, pos):
        return self.curves.iloc[: pos + 1]

    def _accuracy(self, pos, version=None):
        # the same elements every frame (also with no task yet): a DynamicMap updates them in place
        c = self._upto(pos)
        dash = "dashed" if len(c) and c["mode"].iloc[0] == "static" else "solid"
        line = hv.Curve((c["position"], c["cum_accuracy"]), "task", "cumulative accuracy") \
            .opts(color=_BLUE, line_width=2, line_dash=dash)
        dots = hv.Scatter(c, "position", ["success", "task_id"]).opts(color=_GREY, size=5, alpha=0.6, tools=["hover"])
        title = (f"cumulative accuracy: {c['cum_accuracy'].iloc[-1]:.2f} after {len(c)} tasks" if len(c)
                 else "cumulative accuracy (no finished task yet)")
        return (line * dots).opts(title=title, width=_W, height=_H, xlim=self._xlim(), ylim=(-0.05, 1.05),
                                  show_grid=True, xlabel="task in stream", ylabel="accuracy / success", framewise=True)

    def _per_task(self, pos, column, ylabel, version=None):
        c = self._upto(pos)
        x = c["position"]
        band = hv.Spread((x, c[f"{column}_mean"], c[f"{column}_std"]), "task", [ylabel, "std"]) \
            .opts(fill_color=_BLUE, fill_alpha=0.18, line_alpha=0)
        mean = hv.Curve((x, c[f"{column}_mean"]), "task", ylabel).opts(color=_BLUE, line_width=2)
        raw = hv.Scatter(c, "position", [column, "task_id"]).opts(color=_GREY, size=5, tools=["hover"])
        full = self.curves
        top = max(float((full[f"{column}_mean"] + full[f"{column}_std"]).max()) if len(full) else 0.0,
                  float(full[column].max()) if len(full) else 0.0, 1e-9) * 1.1
        return (band * mean * raw).opts(title=f"{ylabel} per task (±std, {self.window}-task window)", width=_W,
                                        height=_H, xlim=self._xlim(), ylim=(0, top), show_grid=True,
                                        xlabel="task in stream", ylabel=ylabel, framewise=True,
                                        yformatter="%.1e" if column == "cost" else "%.3g")

    def _frontier(self, pos, version=None):
        vdims = ["score", "label", "sha8", "n"]
        if self.df.empty:
            pts = pd.DataFrame(columns=["cost_per_case", *vdims, "on_frontier", "harness_sha"])
            pts["on_frontier"] = pts["on_frontier"].astype(bool)
            title, current = "bank frontier (no finished task yet)", None
        else:
            pts = D.harness_points(self.df, pos)
            row = D.at_position(self.df, pos)
            current = row["harness_sha"]
            recorded = D.frontier_at(self.df, pos)
            bank = ""
            if pd.notna(row.get("bank_size_before")) and pd.notna(row.get("bank_size_after")):
                bank = f", bank {int(row['bank_size_before'])}→{int(row['bank_size_after'])}"
            title = (f"bank frontier after task {pos}: {len(recorded)} sha{'s' * (len(recorded) != 1)}{bank}"
                     if recorded is not None
                     else f"Pareto frontier of harnesses so far: {int(pts['on_frontier'].sum())}")
        others = hv.Scatter(pts[~pts["on_frontier"]], "cost_per_case", vdims, label="harness run so far") \
            .opts(color=_GREY, size=8, tools=["hover"], framewise=True)
        front = hv.Scatter(pts[pts["on_frontier"]], "cost_per_case", vdims, label="on the frontier") \
            .opts(color=_RED, size=11, tools=["hover"], framewise=True)
        cur = hv.Scatter(pts[pts["harness_sha"] == current], "cost_per_case", vdims,
                         label="current task's harness") \
            .opts(color="black", marker="star", size=16, alpha=0.7, framewise=True)
        return (others * front * cur).opts(title=title, width=_W + 160, height=_H, show_grid=True,
                                           xlim=self._cost_range(), ylim=(-0.05, 1.1), xlabel="cost per case ($)",
                                           ylabel="score", legend_position="right", framewise=True,
                                           xformatter="%.1e", xticks=4)

    def _cost_range(self):
        """x range of the frontier panel: every harness of the whole run, so axes stay put while stepping."""
        if self.df.empty:
            return (0.0, 1.0)
        costs = D.harness_points(self.df, len(self.df) - 1)["cost_per_case"]
        lo, hi = float(costs.min()), float(costs.max())
        pad = (hi - lo) * 0.08 or max(abs(hi) * 0.1, 1e-6)
        return (lo - pad, hi + pad)

    def _info(self, pos, version=None):
        head = (f"### {self.run_dir.name}\n`{self.run_dir}`  \n"
                f"suite **{self._run('suite')}** · backbone **{self._run('backbone')}** · "
                f"mode **{self._run('mode')}** · harness **{self._run('method')}**  \n"
                f"episodes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items())))
        if self.df.empty:
            return pn.pane.Markdown(head + "\n\nNo finished task yet.", width=520)
        r = D.at_position(self.df, pos)
        extra = ""
        if pd.notna(r.get("repair_rounds")):
            extra = (f"  \ngen/repair/exec tokens {r.get('gen_tokens')}/{r.get('repair_tokens')}/"
                     f"{r.get('exec_tokens')} · repair rounds {r.get('repair_rounds')}")
        return pn.pane.Markdown(
            f"{head}\n\n**task {pos}** `{r['task_id']}`: {'**success**' if r['success'] else '**failure**'} · "
            f"status {r['status']} · reward {r['reward']:.2f} · cost ${r['cost']:.6f} · tokens {int(r['tokens'])} · "
            f"tool calls {int(r['tool_calls'])}{extra}", width=520)

    def _run(self, column):
        return self.df[column].iloc[0] if len(self.df) else "?"

    def _harness(self, pos, version=None):
        if self.df.empty:
            return pn.pane.Markdown("No harness yet.")
        row = D.at_position(self.df, pos)
        folder = D.harness_folder(self.run_dir, row)
        if folder is None:
            return pn.pane.Markdown(f"Harness `{row['harness_sha'][:12]}`: its files are not in this run "
                                    "directory nor in the seed bank.")
        parts = [pn.pane.Markdown(f"**harness of task {pos}**: `{row['episode_harness']}` sha "
                                  f"`{row['harness_sha'][:12]}` · `{folder}`")]
        if D.is_seed(folder) or self.trust_code:
            try:
                parts.append(pn.pane.SVG(_anatomy_svg(str(folder)), sizing_mode="stretch_width", max_width=900))
            except ImportError:
                parts.append(pn.pane.Markdown("_jitlab.viz.anatomy is not available: no diagram._"))
            except Exception as exc:  # a broken generated harness: show why instead of failing the page
                parts.append(pn.pane.Markdown(f"_anatomy failed: {type(exc).__name__}: {exc}_"))
        else:
            parts.append(pn.pane.Markdown("_Anatomy of a generated harness imports its code; start the "
                                          "dashboard with `--trust-harness-code` (trust_code=True) to draw it._"))
        ref_sha = row.get("nearest_reference")
        ref = D.reference_files(self.run_dir, ref_sha)
        if ref is None:
            note = ("no nearest reference recorded" if not isinstance(ref_sha, str) else
                    f"reference `{ref_sha[:12]}` is not in this run, its bank.sqlite, nor the seed bank")
            parts.append(pn.pane.Markdown(f"_Diff: {note}._"))
        else:
            where, files = ref
            diff = D.harness_diff(folder, files)
            parts.append(pn.pane.Markdown(f"**diff against nearest reference** `{ref_sha[:12]}` (`{where}`)"))
            parts.append(pn.pane.Markdown(f"```diff\n{diff or '(identical)'}\n```", max_height=420,
                                          styles={"overflow": "auto"}, sizing_mode="stretch_width"))
        return pn.Column(*parts, sizing_mode="stretch_width")

    # -- layout -----------------------------------------------------------------------------------
    def view(self):
        """The servable layout (a pn.Column)."""
        v, p = self.param.version, self.player.param.value

        def plot(fn, *args):
            # a DynamicMap over the bound function updates the bokeh data in place on every step
            return pn.pane.HoloViews(hv.DynamicMap(pn.bind(fn, p, *args, version=v)), backend="bokeh",
                                     linked_axes=False)
        layout = pn.Column(
            pn.Row(pn.Column(self.player, pn.pane.Markdown("Step through the task stream; every panel shows "
                                                          "the run up to the current task.")),
                   pn.bind(self._info, p, version=v)),
            pn.Row(plot(self._accuracy), plot(self._per_task, "cost", "cost ($)"),
                   plot(self._per_task, "tool_calls", "tool calls")),
            pn.Row(plot(self._frontier), pn.panel(pn.bind(self._harness, p, version=v), sizing_mode="stretch_width"),
                   sizing_mode="stretch_width"),
            name=f"replay {self.run_dir.name}", sizing_mode="stretch_width")
        if self.live:
            pn.state.onload(lambda: pn.state.add_periodic_callback(self.refresh, period=int(self.poll_s * 1000)))
        return layout

    def __panel__(self):
        return self.view()


def replay(run_dir, live: bool = False, poll_s: float = 2.0, window: int = 5, trust_code: bool = False):
    """A servable Panel layout replaying ``run_dir`` (see the module docstring)."""
    return ReplayApp(run_dir, live=live, poll_s=poll_s, window=window, trust_code=trust_code).view()
