"""The papers' figures as pure functions: tidy DataFrame in, HoloViews figure out.

    from jitlab.viz import figures as F
    df = F.collect(["runs/tw-static", "runs/tw-streaming"])   # one row per finished episode
    F.save(F.fig_stream(df), "figures/fig6_stream_textworld")  # .png .pdf (matplotlib) + .html (bokeh)

or regenerate everything a set of runs supports (and figures/README.md, listing each figure with
the command that made it), from run directories or their compact exports (``jitlab export``, results/):

    jitlab figures --runs runs/ --out figures/
    jitlab figures --runs results/tw-jit/ --out figures/

Figures: ``fig_stream`` (paper Figure 6: cumulative accuracy over the task stream, static dashed and
streaming solid; per-task cost and tool calls with local-variation bands = rolling mean ± rolling
std), ``fig_pareto`` (Figure 4: harness × backbone pairings as (cost per case, score), the global
Pareto frontier as a step line, dominated region shaded), ``fig_jit_gain`` (Figure 5: JIT vs ReAct
per backbone, gain in the axis labels), ``seed_bank_table`` (per-harness results table); every success is
labelled ``k/n (lo–hi)`` (``rate_label``, Wilson 95%) and its axis runs 0-1. ``per_suite`` draws one of them once per
suite (suites are never pooled; ``on_frontier`` flags each suite's Pareto frontier). ``make_figures`` also
redraws the case-study anatomy diagrams (``figures/case_studies/``; from code, no runs needed).
The numbers behind each figure come from the table functions (``stream_curves``, ``final_accuracy``,
``pairings``, ``pareto_frontier``, ``jit_gain``), which need only pandas.

Caveats: static images use the matplotlib backend (no browser); the HTML files load BokehJS from
its CDN when opened. A run's mode comes from ``episodes.extra["mode"]`` (JIT runs, see
docs/records.md), else from its config, else it is a fixed-harness run (mode ``fixed``); tasks of a
fixed run are ordered by episode id.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
from pathlib import Path

from jitlab.errors import ConfigError
from jitlab.jit.record import read_jit_record
from jitlab.stats import bootstrap_mean, wilson
from jitlab.store import DB_NAME, EXPORT_MARKER, load
from jitlab.viz.anatomy_table import CASE_STUDY_CAPTION, save_case_studies, summary_row
from jitlab.viz.style import colors as _colors
from jitlab.viz.style import hv as _hv
from jitlab.viz.style import panel_opts as _panel_opts
from jitlab.viz.style import style as _style
from jitlab.viz.tables import markdown_table

__all__ = ["collect", "expand_runs", "stream_curves", "final_accuracy", "pairings", "pareto_frontier",
           "jit_gain", "seed_bank_table", "fig_stream", "fig_pareto", "fig_jit_gain", "save",
           "write_table", "make_figures", "register", "write_readme", "RUN_COLUMNS", "EXTRA_COLUMNS"]

RUN_COLUMNS = ["run", "run_name", "suite", "split", "harness", "backbone", "mode", "method", "run_generator", "settings"]
# the config fields that make runs of one harness comparable (one seed-bank cell averages only runs that agree)
SETTINGS = ("split", "family", "offset", "limit", "seed", "max_steps", "max_tokens")
EXTRA_COLUMNS = ["stream_index", "generator", "gen_tokens", "select_tokens", "repair_tokens", "exec_tokens",
                 "gen_cost", "repair_cost", "exec_cost", "repair_rounds", "n_candidates", "valid_candidates",
                 "harness_dir", "references", "nearest_reference", "bank_size_before", "bank_size_after",
                 "frontier"]
JIT_MODES = ("static", "streaming")
_INDEX = "figures.json"


# -- data ---------------------------------------------------------------------------------------
def expand_runs(paths) -> list[Path]:
    """Run directories named by ``paths``: a run directory itself, or a folder with runs anywhere beneath
    it (``runs/`` holding ``<suite>/<harness>-<backbone>/`` and ``<suite>/jit-.../<mode>/``). A compact export
    of a run (``jitlab export``: ``results/<name>/<run>/`` with run.json) counts as a run directory."""
    found: list[Path] = []
    for p in [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]:
        if (p / DB_NAME).exists() or (p / EXPORT_MARKER).is_file():
            found.append(p)
        elif p.is_dir() and (subs := sorted({f.parent for name in (DB_NAME, EXPORT_MARKER) for f in p.rglob(name)
                                             if name == DB_NAME or not (f.parent / DB_NAME).exists()})):
            found.extend(subs)
        else:
            raise ConfigError(f"{p} is neither a run directory (no {DB_NAME}) nor a folder of run directories or of "
                              "exports (run.json); pass the --out folder of a `jitlab run`, or the folder holding several")
    return found


def collect(run_dirs, include_unfinished: bool = False):
    """One tidy DataFrame from many runs: one row per finished episode (all attempts when
    ``include_unfinished``), the episode columns of docs/records.md, the keys of ``extra`` as columns
    (``EXTRA_COLUMNS``), and run-level columns ``RUN_COLUMNS``. The episode's own harness name is kept
    as ``episode_harness``; ``method`` is ``jit-<mode>`` for JIT runs (``jit-<mode> · <generator>`` when JIT runs of
    one suite, mode and backbone used different generators, so they stay apart), else the harness name;
    ``run_generator`` is a JIT run's generator and ``settings`` its ``SETTINGS`` as ``split=dev limit=5 ...``."""
    import pandas as pd

    frames = []
    for run_dir in expand_runs(run_dirs):
        rec = load(run_dir)
        eps = rec["episodes"].sort_values("id")
        if not include_unfinished:
            eps = eps[eps["final"]]
        eps = eps.rename(columns={"harness": "episode_harness"}).reset_index(drop=True)
        config = rec["config"].iloc[0].to_dict() if len(rec["config"]) else {}
        extras = [read_jit_record(x) for x in eps["extra"]]
        for key in EXTRA_COLUMNS:
            eps[key] = [getattr(e, key) for e in extras]
        modes = [e.mode for e in extras if e.mode]
        mode = modes[0] if modes else (config.get("mode") or "fixed")
        if eps["stream_index"].isna().all():
            eps["stream_index"] = range(len(eps))
        harness = config.get("harness") or ("jit" if mode in JIT_MODES else "?")
        harness = Path(str(harness)).name
        eps["run"], eps["run_name"] = str(run_dir), Path(run_dir).name
        eps["suite"], eps["split"], eps["backbone"] = config.get("suite"), config.get("split"), config.get("backbone")
        eps["harness"], eps["mode"] = harness, mode
        eps["method"] = f"jit-{mode}" if mode in JIT_MODES else harness
        eps["run_generator"] = config.get("generator") if mode in JIT_MODES else None
        eps["settings"] = " ".join(f"{k}={config.get(k)}" for k in SETTINGS if config.get(k) is not None)
        frames.append(eps)
    if not frames:
        return pd.DataFrame(columns=RUN_COLUMNS + EXTRA_COLUMNS)
    df = pd.concat(frames, ignore_index=True)
    df["success"] = df["success"].fillna(0).astype(float)
    for col in ("cost", "tokens", "tool_calls", "prompt_tokens", "completion_tokens"):
        df[col] = pd.to_numeric(df[col], errors="coerce").fillna(0.0)
    df["stream_index"] = pd.to_numeric(df["stream_index"], errors="coerce")
    jit = df["mode"].isin(JIT_MODES)
    if jit.any():
        several = df[jit].groupby(["suite", "mode", "backbone"], dropna=False)["run_generator"].transform("nunique") > 1
        qualify = several[several].index
        df.loc[qualify, "method"] = df.loc[qualify, "method"] + " · " + df.loc[qualify, "run_generator"].astype(str)
    return df


def stream_curves(df, window: int = 5):
    """Per run, in stream order: cumulative accuracy and rolling mean/std of cost and tool calls
    (``window`` tasks, trailing). Columns: run, suite, backbone, mode, method, stream_index, task_id,
    success, cum_accuracy (with its Wilson 95% interval cum_accuracy_lo/_hi over the tasks so far), cost, cost_mean,
    cost_std, tool_calls, tool_calls_mean, tool_calls_std, tokens."""
    import pandas as pd
    parts = []
    for _, g in df.groupby("run", sort=False):
        g = g.sort_values("stream_index")
        out = g[["run", "suite", "backbone", "mode", "method", "stream_index", "task_id", "success", "cost",
                 "tool_calls", "tokens"]].copy().reset_index(drop=True)
        out["cum_accuracy"] = out["success"].expanding().mean()
        bounds = [wilson(int(k), i + 1) for i, k in enumerate(out["success"].cumsum())]
        out["cum_accuracy_lo"], out["cum_accuracy_hi"] = [b[0] for b in bounds], [b[1] for b in bounds]
        for col in ("cost", "tool_calls"):
            roll = out[col].rolling(window, min_periods=1)
            out[f"{col}_mean"] = roll.mean()
            out[f"{col}_std"] = roll.std().fillna(0.0)
        parts.append(out)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _with_intervals(df, keys, rate: str, means: dict):
    """Per group of ``keys``: the Wilson interval of the success rate (``<rate>_lo``/``_hi``) and a bootstrap
    interval (``<name>_lo``/``_hi``) of each mean in ``means`` ({name: episode column})."""
    import pandas as pd
    rows = []
    for key, g in df.groupby(keys, sort=True, dropna=False):
        lo, hi = wilson(int(g["success"].sum()), len(g))
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)), **{f"{rate}_lo": lo, f"{rate}_hi": hi})
        for name, col in means.items():
            row[f"{name}_lo"], row[f"{name}_hi"] = bootstrap_mean(g[col])[1:]
        rows.append(row)
    return pd.DataFrame(rows, columns=[*keys, f"{rate}_lo", f"{rate}_hi",
                                       *(f"{n}_{e}" for n in means for e in ("lo", "hi"))])


def final_accuracy(df):
    """Final cumulative accuracy per run: suite, backbone, mode, method, run, n_tasks, final_accuracy (with its
    Wilson 95% interval final_accuracy_lo/_hi), cost_per_task, tool_calls_per_task."""
    keys = ["suite", "backbone", "mode", "method", "run"]
    rows = df.groupby(keys, sort=True, dropna=False).agg(
        n_tasks=("success", "size"), final_accuracy=("success", "mean"), cost_per_task=("cost", "mean"),
        tool_calls_per_task=("tool_calls", "mean")).reset_index()
    return rows.merge(_with_intervals(df, keys, "final_accuracy", {}), on=keys, how="left")


def pairings(df, by=()):
    """One row per (suite, split, method, backbone) (and ``by`` columns; a test and a holdout run are never
    pooled): n, score (success rate) with its Wilson 95% interval (score_lo/_hi), cost_per_case and
    tokens_per_case with bootstrap 95% intervals (``_lo``/``_hi``), tool_calls_per_case."""
    keys = ["suite", *(["split"] if "split" in df else []), "method", "backbone", *by]
    rows = df.groupby(keys, sort=True, dropna=False).agg(
        n=("success", "size"), score=("success", "mean"), cost_per_case=("cost", "mean"),
        tokens_per_case=("tokens", "mean"), tool_calls_per_case=("tool_calls", "mean")).reset_index()
    more = _with_intervals(df, keys, "score", {"cost_per_case": "cost", "tokens_per_case": "tokens"})
    return rows.merge(more, on=keys, how="left")


def pareto_frontier(points, x: str = "cost_per_case", y: str = "score"):
    """The non-dominated rows of ``points`` (lower ``x`` and higher ``y`` are better), sorted by ``x``.
    A point is dominated when another has ``x`` no larger and ``y`` no smaller, one of them strictly."""
    ordered = points.sort_values([x, y], ascending=[True, False])
    keep, best = [], None
    for idx, row in ordered.iterrows():
        if best is None or row[y] > best:
            keep.append(idx)
            best = row[y]
    return ordered.loc[keep]


def on_frontier(points, x: str = "cost_per_case", y: str = "score"):
    """Per suite (and split) of ``points`` (from :func:`pairings`): whether each row is on that suite's Pareto
    frontier (:func:`pareto_frontier`; suites are never pooled). A boolean Series on ``points``' index."""
    keys = [k for k in ("suite", "split") if k in points]
    front = set()
    for _, g in points.groupby(keys, sort=False, dropna=False):
        front |= set(pareto_frontier(g, x, y).index)
    return points.index.isin(front)


def jit_gain(df, baseline: str = "react"):
    """Per (suite, backbone, JIT mode): baseline score, JIT score and gain (JIT − baseline), both as
    success rates with their Wilson 95% intervals (``*_score_lo``/``_hi``), plus the cost per case of each. Only
    backbones that have both runs appear. (The gain's paired test is ``jitlab compare``.)"""
    import pandas as pd
    p = pairings(df)
    base = p[p["method"] == baseline]
    rows = []
    for _, b in base.iterrows():
        same = (p["suite"] == b["suite"]) & (p["backbone"] == b["backbone"])
        if "split" in p:
            same &= p["split"].fillna("") == ("" if pd.isna(b["split"]) else b["split"])
        jit = p[same & p["method"].str.startswith("jit-")]
        for _, j in jit.iterrows():
            rows.append({"suite": b["suite"], "backbone": b["backbone"], "jit": j["method"],
                         "baseline": baseline, "baseline_score": b["score"], "jit_score": j["score"],
                         "gain": j["score"] - b["score"], "baseline_cost": b["cost_per_case"],
                         "jit_cost": j["cost_per_case"], "n_baseline": b["n"], "n_jit": j["n"],
                         "baseline_score_lo": b["score_lo"], "baseline_score_hi": b["score_hi"],
                         "jit_score_lo": j["score_lo"], "jit_score_hi": j["score_hi"]})
    return pd.DataFrame(rows, columns=["suite", "backbone", "jit", "baseline", "baseline_score", "jit_score",
                                       "gain", "baseline_cost", "jit_cost", "n_baseline", "n_jit",
                                       "baseline_score_lo", "baseline_score_hi", "jit_score_lo", "jit_score_hi"])


def seed_bank_table(df, with_anatomy: bool = True):
    """Results of fixed-harness runs as a table: one row per (harness, backbone), per suite its success
    rate with its Wilson 95% interval (``score_lo``/``score_hi``), cost and tool calls per case. Runs whose
    ``settings`` differ (another split, task slice, seed or budget: exports of unrelated experiments) are never
    averaged together: the table then has a ``settings`` column and a row per settings. With ``with_anatomy`` and
    jitlab.viz.anatomy available, the harness's M/P/F/A labels are added for seed harnesses."""
    import pandas as pd
    fixed = df[df["mode"] == "fixed"]
    if fixed.empty:
        return pd.DataFrame()
    by = ["settings"] if "settings" in fixed and fixed["settings"].nunique(dropna=False) > 1 else []
    p = pairings(fixed, by).rename(columns={"method": "harness"})
    metrics = ["cost_per_case", "score", "score_lo", "score_hi", "tool_calls_per_case"]   # column order per suite
    wide = p.pivot_table(index=[*by, "harness", "backbone"], columns="suite", values=metrics)
    wide = wide[sorted(wide.columns, key=lambda c: (c[1], metrics.index(c[0])))]
    wide.columns = [f"{suite}:{metric}" for metric, suite in wide.columns]
    wide = wide.reset_index()
    if with_anatomy:
        mpfa = {}
        for name in wide["harness"].unique():
            try:
                mpfa[name] = summary_row(name)
            except Exception:  # not a seed name (a generated folder, oracle): no anatomy column for it
                mpfa[name] = {}
        for slot in ("M", "P", "F", "A"):
            wide.insert(len(by) + 2 + "MPFA".index(slot), slot, [mpfa[h].get(slot, "") for h in wide["harness"]])
    return wide


# -- figures ------------------------------------------------------------------------------------
def _stream_label(row) -> str:
    return f"{row['backbone']} · {row['mode'] if row['mode'] in JIT_MODES else row['method']}"


def rate_label(k, n) -> str:
    """``k/n (lo–hi)``: a success count with its Wilson 95% interval, for legends and axis labels."""
    lo, hi = wilson(int(k), int(n))
    return f"{int(k)}/{int(n)} ({lo:.2f}–{hi:.2f})"


def fig_stream(df, window: int = 5, title: str | None = None):
    """Paper Figure 6: three panels over the task stream — cumulative accuracy (band: its Wilson 95% interval
    over the tasks so far), per-task cost and per-task tool calls (rolling mean line ± rolling std band). One line
    (and colour) per run; static dashed, streaming solid (fixed runs dotted)."""
    hv = _hv()
    curves = stream_curves(df, window)
    if curves.empty:
        raise ConfigError("fig_stream: no finished episodes in the given runs")
    labels = {run: f"{_stream_label(g.iloc[0])} · {rate_label(g['success'].sum(), len(g))}"
              for run, g in curves.groupby("run", sort=False)}   # the final k/n and its Wilson interval
    colors = _colors(labels.values())
    acc, cost, calls = [], [], []
    for run, g in curves.groupby("run", sort=False):
        first = g.iloc[0]
        label = labels[run]
        color, mode = colors[label], first["mode"]
        x = g["stream_index"].to_numpy()
        y = g["cum_accuracy"].to_numpy()
        band = hv.Spread((x, y, y - g["cum_accuracy_lo"].to_numpy(), g["cum_accuracy_hi"].to_numpy() - y), "task",
                         ["cumulative accuracy", "neg", "pos"], label=label)   # Wilson 95% over the tasks so far
        acc.append(_style(band, color=color, alpha=0.12, fill=True))
        acc.append(_style(hv.Curve((x, y), "task", "cumulative accuracy", label=label),
                          color=color, dash=mode, width=2))
        for bucket, col, ylabel in ((cost, "cost", "cost per task ($)"), (calls, "tool_calls", "tool calls per task")):
            band = hv.Spread((x, g[f"{col}_mean"], g[f"{col}_std"]), "task", [ylabel, "std"], label=label)
            bucket.append(_style(band, color=color, alpha=0.18, fill=True))
            bucket.append(_style(hv.Curve((x, g[f"{col}_mean"]), "task", ylabel, label=label),
                                 color=color, dash=mode, width=2))
    head = f"{title}: " if title else ""
    # the static figure's legend (labels with k/n and an interval are long) sits below the first panel, clear of
    # its curves and axis labels
    below = dict(legend_position="inner", legend_opts=dict(loc="upper left", bbox_to_anchor=(0, -0.2)))
    layout = (_panel_opts(hv.Overlay(acc), f"{head}cumulative accuracy", "task in stream",
                          "cumulative accuracy (band: Wilson 95%)").opts(backend="matplotlib", **below)
              .redim.range(**{"cumulative accuracy": (0, 1)})
              + _panel_opts(hv.Overlay(cost), f"{head}cost per task", "task in stream",
                            f"$ per task ({window}-task mean ± std)", legend=False)
              + _panel_opts(hv.Overlay(calls), f"{head}tool calls per task", "task in stream",
                            f"tool calls ({window}-task mean ± std)", legend=False))
    # panel letters above the y-axis labels, not on them
    return layout.cols(3).opts(backend="matplotlib", sublabel_position=(-0.25, 1.02))


def _staircase(front, xmax: float):
    """x, y of the frontier as a step function from its cheapest point to ``xmax``."""
    xs, ys = [], []
    pts = list(zip(front["cost_per_case"], front["score"]))
    for i, (c, s) in enumerate(pts):
        nxt = pts[i + 1][0] if i + 1 < len(pts) else xmax
        xs += [c, nxt]
        ys += [s, s]
    return xs, ys


def fig_pareto(df, title: str | None = None):
    """Paper Figure 4: every harness × backbone pairing as (cost per case, score) with the score's Wilson 95%
    interval as an error bar; the global Pareto frontier as a step line; the region it dominates shaded."""
    hv = _hv()
    p = pairings(df)
    if p.empty:
        raise ConfigError("fig_pareto: no finished episodes in the given runs")
    front = pareto_frontier(p)
    xmax = float(p["cost_per_case"].max()) * 1.08 or 1.0
    xs, ys = _staircase(front, xmax)
    shade = _style(hv.Area((xs, ys), "cost per case ($)", "score", label="dominated"), color="#999999", alpha=0.25,
                   fill=True)
    step = _style(hv.Curve((xs, ys), "cost per case ($)", "score", label="Pareto frontier"), color="black",
                  dash="streaming", width=1.5)
    colors = _colors(p["method"])
    markers = dict(zip(dict.fromkeys(p["backbone"]), ["o", "s", "^", "D", "v", "P", "X", "*"] * 4))
    bk_markers = {"o": "circle", "s": "square", "^": "triangle", "D": "diamond", "v": "inverted_triangle",
                  "P": "plus", "X": "x", "*": "star"}
    dots = []
    for (method, backbone), g in p.groupby(["method", "backbone"], sort=False):
        pts = hv.Scatter(g, "cost_per_case", ["score", "method", "backbone", "n", "tokens_per_case"],  # hover shows all
                         label=f"{method} · {backbone} · " + "; ".join(
                             rate_label(round(r.score * r.n), r.n) for r in g.itertuples()))
        m = markers[backbone]
        score = g["score"].to_numpy()
        bars = hv.ErrorBars((g["cost_per_case"], score, score - g["score_lo"].to_numpy(),
                             g["score_hi"].to_numpy() - score), "cost_per_case", ["score", "neg", "pos"])
        dots.append(bars.opts(backend="bokeh", line_color=colors[method], line_alpha=0.6)
                    .opts(backend="matplotlib", color=colors[method], alpha=0.6))   # Wilson 95% of the score
        dots.append(pts.opts(backend="bokeh", color=colors[method], marker=bk_markers[m], size=11)
                    .opts(backend="matplotlib", color=colors[method], marker=m, s=70))
    labels = hv.Labels((p["cost_per_case"], p["score"], p["method"]), ["cost_per_case", "score"], "method") \
        .opts(backend="bokeh", text_font_size="8pt", yoffset=0.03, text_color="#444444") \
        .opts(backend="matplotlib", size=7, yoffset=0.03, color="#444444")
    overlay = hv.Overlay([shade, step, *dots, labels])
    overlay = _panel_opts(overlay, f"{title + ': ' if title else ''}cost vs score ({len(p)} pairings, "
                          f"{len(front)} on the Pareto frontier)", "cost per case ($)",
                          "score (success rate, Wilson 95%)")
    return overlay.opts(backend="bokeh", width=900, height=460, legend_position="right", xformatter="%.1e") \
                  .opts(backend="matplotlib", fig_size=180, aspect=1.4, legend_position="right") \
                  .redim.range(cost_per_case=(0, xmax), score=(0, 1))   # a success rate: always 0-1


def fig_jit_gain(df, baseline: str = "react", title: str | None = None):
    """Paper Figure 5: per backbone (and suite, when there are several), the baseline (ReAct) score next to each JIT
    mode's score, each with its Wilson 95% interval as an error bar and ``k/n (lo–hi)`` in its axis label; the gain
    in points is in the title. The score axis runs 0-1."""
    hv = _hv()
    gains = jit_gain(df, baseline)
    if gains.empty:
        raise ConfigError(f"fig_jit_gain: no backbone has both a {baseline} run and a JIT run")
    several = gains["suite"].nunique() > 1
    rows = []
    order = [baseline] + sorted(gains["jit"].unique())
    for (suite, backbone), g in gains.groupby(["suite", "backbone"], sort=False):
        where = f"{suite} · {backbone}" if several else backbone
        tag = ", ".join(f"{r.jit[4:]} {r.gain * 100:+.1f} pts" for r in g.itertuples())
        first = g.iloc[0]
        rows.append((where, tag, baseline, first["baseline_score"], first["baseline_score_lo"],
                     first["baseline_score_hi"], first["n_baseline"]))
        rows.extend((where, tag, r.jit, r.jit_score, r.jit_score_lo, r.jit_score_hi, r.n_jit) for r in g.itertuples())
    rows.sort(key=lambda r: (r[0], order.index(r[2])))
    # one categorical axis "backbone · method · k/n (lo-hi)" (error bars do not overlay a two-level axis)
    keys = [f"{b} · {m} · {rate_label(round(s * n), n)}" for b, _, m, s, _, _, n in rows]
    score = [float(r[3]) for r in rows]
    bars = hv.Bars((keys, score, [r[2] for r in rows]), "bar", ["score", "method"])
    errors = hv.ErrorBars((keys, score, [s - r[4] for s, r in zip(score, rows)],
                           [r[5] - s for s, r in zip(score, rows)]), "bar", ["score", "neg", "pos"])
    colors = _colors(order)
    color = hv.dim("method").categorize(colors)
    bars = bars.opts(backend="bokeh", color=color).opts(backend="matplotlib", color=color)
    gain = "; ".join(dict.fromkeys(f"{r[0]}: {r[1]}" for r in rows))
    xlabel = ("suite · " if several else "") + "backbone · method · k/n (Wilson 95%)"
    overlay = _panel_opts(hv.Overlay([bars, errors.opts(backend="bokeh", line_color="black")
                                      .opts(backend="matplotlib", color="black")]),
                          f"{title + ': ' if title else ''}JIT vs {baseline} ({gain})", xlabel,
                          "score (success rate, Wilson 95%)", legend=False)
    return overlay.opts(backend="bokeh", width=max(560, 150 * len(rows)), height=380, xrotation=20) \
                  .opts(backend="matplotlib", fig_size=160, xrotation=20).redim.range(score=(0, 1))


def per_suite(figure, df, cols: int = 1, **kwargs):
    """``figure`` (e.g. :func:`fig_pareto`) drawn once per suite of ``df``, titled with the suite, ``cols`` panels
    a row (3 for :func:`fig_stream`'s three panels per suite); a single suite gives that one figure."""
    hv = _hv()
    figs = [figure(g, title=suite, **kwargs) for suite, g in df.groupby("suite", sort=False)]
    if not figs:
        raise ConfigError("per_suite: no finished episodes in the given runs")
    return figs[0] if len(figs) == 1 else hv.Layout(figs).cols(cols)


def save(fig, stem: str | Path, formats=("png", "pdf", "html"), resources: str = "cdn") -> list[Path]:
    """Write ``stem.png``/``stem.pdf`` (matplotlib) and ``stem.html`` (bokeh). Returns the paths.
    ``resources``: ``cdn`` (small file; BokehJS loads from its CDN when opened) or ``inline`` (works
    offline; about 1-2 MB more per file)."""
    hv = _hv()
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = stem.with_name(f"{stem.name}.{fmt}")
        if fmt == "html":
            hv.save(fig, path, backend="bokeh", fmt=fmt, title=stem.name, resources=resources)
        else:
            hv.save(fig, path, backend="matplotlib", fmt=fmt)
        written.append(path)
    import matplotlib.pyplot as plt
    plt.close("all")
    return written


def write_table(table, stem: str | Path) -> list[Path]:
    """Write a DataFrame as ``stem.md`` and ``stem.csv``."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    md, csv = stem.with_name(stem.name + ".md"), stem.with_name(stem.name + ".csv")
    md.write_text(markdown_table(table) + "\n")
    table.to_csv(csv, index=False)
    return [md, csv]




# -- regenerate all + README ---------------------------------------------------------------------
def _slug(text) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in str(text)).strip("_") or "x"


def make_figures(run_dirs, out: str | Path = "figures", command: str | None = None, window: int = 5,
                 formats=("png", "pdf", "html"), baseline: str = "react", resources: str = "cdn") -> list[dict]:
    """Write every figure the given runs support into ``out`` and (re)write ``out/README.md``.

    Per suite (per suite and split when its runs span several splits, e.g. test and a holdout: stems then end in
    ``-<split>``): Figure 6 (if it has JIT runs), Figure 4 (any runs), Figure 5 (a ``baseline`` run and a
    JIT run on the same backbone); the seed-bank table (fixed-harness runs); the case-study anatomy diagrams
    (``out/case_studies/``, from code). Returns the index entries."""
    out = Path(out)
    given = [run_dirs] if isinstance(run_dirs, (str, Path)) else list(run_dirs)
    runs = [str(p) for p in expand_runs(given)]
    command = command or ("jitlab figures --runs " + " ".join(shlex.quote(str(r)) for r in given)
                          + f" --out {shlex.quote(str(out))}" + (f" --window {window}" if window != 5 else ""))
    df = collect(runs)
    if df.empty:
        raise ConfigError(f"no finished episodes in {', '.join(runs)}; nothing to draw")
    entries = []

    def add(stem, files, title, caption, sub, numbers=None, **more):
        entries.append({"stem": stem, "files": [p.name for p in files], "title": title, "caption": caption,
                        "command": command, "runs": sorted(sub["run"].unique().tolist()),
                        "numbers": numbers, "generated": _dt.datetime.now().isoformat(timespec="seconds"), **more})

    several = df.groupby("suite")["split"].transform("nunique") > 1
    # a suite whose runs span splits (test and a holdout) gets one set of figures per split: never pooled (a run
    # that records no split, e.g. an old fixture, pools with the others when there is one split)
    df["panel"] = df["suite"].where(~several, df["suite"].astype(str) + " (" + df["split"].astype(str) + ")")
    for panel, sub in df.groupby("panel", sort=True):
        suite, slug = panel, _slug(panel.replace(" (", "-").rstrip(")"))
        jit = sub[sub["mode"].isin(JIT_MODES)]
        if not jit.empty:
            stem = f"fig6_stream_{slug}"
            files = save(fig_stream(jit, window, title=suite), out / stem, formats, resources)
            fa = final_accuracy(jit)[["backbone", "mode", "n_tasks", "final_accuracy", "final_accuracy_lo",
                                      "final_accuracy_hi", "cost_per_task", "tool_calls_per_task"]]
            add(stem, files, f"Figure 6 ({suite}): static vs streaming over the task stream",
                "Cumulative accuracy (static dashed, streaming solid) with its Wilson 95% band; per-task cost "
                "and tool calls as a "
                f"{window}-task rolling mean with ± rolling std band.", jit, markdown_table(fa),
                final_accuracy=[{"suite": suite, **r} for r in fa.to_dict("records")])
        stem = f"fig4_pareto_{slug}"
        p = pairings(sub)
        front = pareto_frontier(p)
        p["on_frontier"] = p.index.isin(front.index)
        files = save(fig_pareto(sub, title=suite), out / stem, formats, resources)
        add(stem, files, f"Figure 4 ({suite}): cost vs score of harness × backbone pairings",
            "Each point is a pairing (mean cost per case, success rate); black step line = global Pareto "
            "frontier, grey = dominated region; error bars: the success rate's Wilson 95% interval.", sub,
            markdown_table(p[["method", "backbone", "n", "score", "score_lo", "score_hi", "cost_per_case",
                              "tokens_per_case", "tokens_per_case_lo", "tokens_per_case_hi", "tool_calls_per_case",
                              "on_frontier"]]))
        gains = jit_gain(sub, baseline)
        if not gains.empty:
            stem = f"fig5_jit_gain_{slug}"
            files = save(fig_jit_gain(sub, baseline, title=suite), out / stem, formats, resources)
            add(stem, files, f"Figure 5 ({suite}): JIT vs {baseline} per backbone",
                "Success rate of the baseline and each JIT mode per backbone with Wilson 95% error bars; the gain "
                "is in the title (its paired test: `jitlab compare`).",
                sub[sub["method"].isin([baseline, *gains["jit"]])],
                markdown_table(gains[["backbone", "jit", "baseline_score", "baseline_score_lo", "baseline_score_hi",
                                      "jit_score", "jit_score_lo", "jit_score_hi", "gain"]]))
    table = seed_bank_table(df)
    if not table.empty:
        files = write_table(table, out / "table_seed_bank")
        add("table_seed_bank", files, "Seed-bank table: fixed harnesses per suite",
            "Success rate (score, with its Wilson 95% interval score_lo-score_hi), cost and tool calls per case of "
            "each fixed harness run, per suite and backbone" + (", with its M/P/F/A" if "M" in table.columns else "")
            + ".", df[df["mode"] == "fixed"])
    entries += _case_study_entries(out, command)
    register(out, entries)
    return entries


def _case_study_entries(out: Path, command: str) -> list[dict]:
    """The case-study anatomy diagrams (from code, no runs needed) in ``out/case_studies/``."""
    paths = save_case_studies(out / "case_studies")
    if not paths:
        return []
    return [{"stem": "case_studies", "files": [str(p.relative_to(out)) for p in paths],
             "title": "Anatomy diagrams of the case-study harnesses", "caption": CASE_STUDY_CAPTION,
             "command": command, "generated": _dt.datetime.now().isoformat(timespec="seconds")}]


def register(out: str | Path, entries: list[dict]) -> Path:
    """Add or replace entries in ``out/figures.json`` (keyed by stem) and rewrite ``out/README.md``.
    Other producers of figures (e.g. anatomy diagrams) call this with entries holding at least
    ``stem``, ``files``, ``title`` and ``command``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    index_path = out / _INDEX
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    for entry in entries:
        index[entry["stem"]] = entry
    index = {k: v for k, v in index.items() if any((out / f).exists() for f in v.get("files", []))}
    tmp = index_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(index, indent=2, sort_keys=True))
    os.replace(tmp, index_path)
    return write_readme(out, index)


def write_readme(out: str | Path, index: dict | None = None) -> Path:
    """Rewrite ``out/README.md`` from ``out/figures.json``: every figure, its files and its command."""
    out = Path(out)
    if index is None:
        path = out / _INDEX
        index = json.loads(path.read_text()) if path.exists() else {}
    lines = ["# figures", "",
             "Regenerated from saved run records. Do not edit by hand: this file is rewritten from "
             f"`{_INDEX}` whenever a figure is (re)made (`jitlab figures`, or a notebook through "
             "`jitlab.viz.figures.register`). Each entry gives the exact command that made it. Static PNG/PDF "
             "use matplotlib; the HTML files are interactive bokeh (BokehJS from its CDN unless made with "
             "`--inline-js`).", "",
             "Records: the runs behind a published figure are committed as compact exports in `results/<name>/` "
             "(`jitlab export RUN_DIR... --out results/<name>/`; layout in docs/records.md, \"Exports\"). "
             "`jitlab figures --runs results/<name>/ --out figures/` redraws a figure from its export exactly as "
             "from the run directories; a command below that names `runs/...` used run directories that are not in git.",
             ""]
    if not index:
        lines += ["No figures yet. Make runs, then: `jitlab figures --runs runs/ --out figures/`.", ""]
    for stem in sorted(index):
        e = index[stem]
        files = ", ".join(f"[{f}]({f})" for f in e.get("files", []))
        lines += [f"## {e.get('title', stem)}", "", f"Files: {files}", ""]
        if e.get("caption"):
            lines += [e["caption"], ""]
        lines += ["Command:", "", "```", e["command"], "```", ""]
        if e.get("runs"):
            lines += ["Runs: " + ", ".join(f"`{r}`" for r in e["runs"]), ""]
        if e.get("numbers"):
            lines += ["Numbers:", "", e["numbers"], ""]
        if e.get("generated"):
            lines += [f"Generated {e['generated']}.", ""]
    finals = [r for e in index.values() for r in e.get("final_accuracy", [])]
    if finals:
        lines += ["## Closing note: the numbers behind Figure 6", "",
                  "Final cumulative accuracy over the task stream, static vs streaming, per suite and backbone "
                  "(n = tasks in the stream), with its Wilson 95% interval:", "",
                  "| suite | backbone | static | streaming | n (static / streaming) | static, Wilson 95% | "
                  "streaming, Wilson 95% |", "|---|---|---|---|---|---|---|"]
        keys = sorted({(r["suite"], r["backbone"]) for r in finals}, key=str)
        for suite, backbone in keys:
            cell = {r["mode"]: r for r in finals if (r["suite"], r["backbone"]) == (suite, backbone)}
            acc = [f"{cell[m]['final_accuracy']:.3f}" if m in cell else "–" for m in JIT_MODES]
            ci = [f"{cell[m]['final_accuracy_lo']:.2f}–{cell[m]['final_accuracy_hi']:.2f}"
                  if "final_accuracy_lo" in cell.get(m, {}) else "–" for m in JIT_MODES]
            ns = " / ".join(str(cell[m]["n_tasks"]) if m in cell else "–" for m in JIT_MODES)
            lines.append(f"| {suite} | {backbone} | {acc[0]} | {acc[1]} | {ns} | {ci[0]} | {ci[1]} |")
        lines.append("")
    path = out / "README.md"
    tmp = out / "README.md.tmp"
    tmp.write_text("\n".join(lines))
    os.replace(tmp, path)
    return path
