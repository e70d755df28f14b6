"""The published rows, read from the committed exports under ``results/``: what the figure notebooks draw by default.

Each :class:`Row` names one row of docs/measurements.md's tables (a suite, a split, the method as the figures
label it, its backbone), the export(s) under ``results/`` that hold its episodes, and the figure sets it belongs
to (``FIGURES``). :func:`collect` reads a set back into the tidy frame of :func:`jitlab.viz.figures.collect`, so
every figure function draws it unchanged (Figure 4, 5 and 6, the seed-bank table), with the Wilson intervals those
functions already carry; :func:`table` is the set's rows with ``k/n (lo–hi)``, tokens per task and the exports.

    from jitlab.viz import published as P
    df = P.collect("fig4", suite="textworld")    # the TextWorld test rows of Figure 4 (ReAct ... streaming JIT)
    P.table(df)                                  # one line per row: n, success with its interval, exports

A row may join several exports (BabyAI's ReAct: test tasks 1-11 in one, 12-35 in another); a task that ran in
both counts once (the first export's episode). Nothing here runs anything: the notebooks' ``rerun`` parameter does.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jitlab.errors import ConfigError
from jitlab.paths import repo_root
from jitlab.viz.figures import collect as _collect
from jitlab.viz.figures import pairings
from jitlab.viz.tables import rate_cell

__all__ = ["FIGURES", "GAPS", "ROWS", "Row", "collect", "exports", "gap_runs", "results_root", "rows", "run_dirs",
           "summaries", "table"]

FIGURES = {
    "fig4": "Figures 4 and 5 (notebook 06): every published row of a suite's test split, cost vs success",
    "fig6": "Figure 6 (notebook 05): a static and a streaming JIT of one design on the same test tasks",
    "seeds": "seed harnesses at full budget (notebook 01): ReAct and the best dev seed on the first 10 test tasks",
}


@dataclass(frozen=True)
class Row:
    suite: str
    split: str
    method: str            # what the figures call it (Figure 5 pairs "react" with the "jit-*" methods)
    label: str             # what the tables call it (docs/measurements.md's wording)
    exports: tuple         # folders under results/, each a run export (jitlab export)
    figures: frozenset
    backbone: str = "embedded"


def _row(suite, split, method, label, exports, figures, backbone="embedded") -> Row:
    return Row(suite, split, method, label, tuple(exports.split()), frozenset(figures.split()), backbone)


# docs/measurements.md, section "Issue 29's rows in one place" (fig4), its static/streaming pairs (fig6), and
# section "Full step budgets" (seeds; ReAct and the best dev seed, the first 10 test tasks)
ROWS = (
    _row("textworld", "test", "react", "ReAct", "small-model-jit/tw-test-react", "fig4"),
    _row("textworld", "test", "aorchestra", "aorchestra (best dev seed; first 10)",
         "full-budget-textworld-test/textworld-aorchestra", "fig4"),
    _row("textworld", "test", "explorer", "small_model/explorer (best fixed composition)",
         "small-model-test/tw-test-explorer", "fig4"),
    _row("textworld", "test", "explorer_margin", "small_model/explorer_margin",
         "small-model-margin/tw-test-explorer-m1.0", "fig4"),
    _row("textworld", "test", "jit-static", "static JIT", "small-model-jit/tw-test-jit-static", "fig4 fig6"),
    _row("textworld", "test", "jit-streaming", "streaming JIT (the bank as evidence)",
         "small-model-evidence/tw-test-jit-stream-bank", "fig4"),
    _row("textworld", "test", "jit-streaming", "streaming JIT (partner-keeping mutation)",
         "small-model-jit/tw-test-jit-stream2", "fig6"),
    _row("textworld", "test", "jit-streaming", "streaming JIT, harness-only control",
         "small-model-evidence/tw-test-jit-stream-bank-uniform", "fig4", "scripted:uniform"),
    _row("babyai", "test", "react", "ReAct (two exports: tasks 1-11, 12-35)",
         "small-model-evidence/ba-test-react small-model-rows/ba-test-react-rest", "fig4"),
    _row("babyai", "test", "agentfold", "agentfold (best dev seed; first 10)",
         "full-budget-babyai-test/babyai-agentfold", "fig4"),
    _row("babyai", "test", "navigator", "small_model/navigator (best fixed composition)",
         "small-model-test/ba-test-navigator", "fig4"),
    _row("babyai", "test", "jit-static", "static JIT (first 13; stopped for time)",
         "small-model-rows/ba-test-jit-static", "fig4 fig6"),
    _row("babyai", "test", "jit-streaming", "streaming JIT (the bank as evidence)",
         "small-model-evidence/ba-test-jit-stream-bank", "fig4 fig6"),
    _row("babyai", "test", "jit-streaming", "streaming JIT, harness-only control",
         "small-model-evidence/ba-test-jit-stream-bank-uniform", "fig4", "scripted:uniform"),
    _row("dbbench", "test", "react", "ReAct (also the best dev seed)", "small-model-sql/db-test-react", "fig4"),
    _row("dbbench", "test", "sql", "small_model/sql, value-grounded (best fixed composition)",
         "small-model-sql/db-test-sqlg", "fig4"),
    _row("dbbench", "test", "jit-static", "static JIT (first 20; stopped for time)",
         "small-model-keep/db-test-jit-static", "fig4 fig6"),
    _row("dbbench", "test", "jit-streaming", "streaming JIT (evident roles kept)",
         "small-model-keep/db-test-jit-stream-keep", "fig4 fig6"),
    _row("dbbench", "test", "jit-streaming", "streaming JIT, harness-only control",
         "small-model-evidence/db-test-jit-stream-bank-uniform", "fig4", "scripted:uniform"),
    _row("textworld", "test", "react", "ReAct", "full-budget-textworld-test/textworld-react", "seeds"),
    _row("textworld", "test", "aorchestra", "aorchestra (best dev seed)",
         "full-budget-textworld-test/textworld-aorchestra", "seeds"),
    _row("babyai", "test", "react", "ReAct", "full-budget-babyai-test/babyai-react", "seeds"),
    _row("babyai", "test", "agentfold", "agentfold (best dev seed)", "full-budget-babyai-test/babyai-agentfold",
         "seeds"),
    _row("dbbench", "test", "react", "ReAct (also the best dev seed)", "full-budget-dbbench-test/dbbench-react",
         "seeds"),
)


# docs/measurements.md, section "The four rows on the 30-task mixed stream": the exports `jitlab gap` builds the table
# from (notebook 09 draws them): the fixed harnesses on the mix's dev side (the choices) and on its test side, and the
# JIT rows on the test side, by label; and "The four rows on the 121-task mixed test stream"
_FIXED = ("explorer_margin", "navigator", "sql")
GAPS = {
    "mix-30": {"dev": tuple(f"mix-30/mix30dev-{h}" for h in _FIXED), "test": tuple(f"mix-30/mix30-{h}" for h in _FIXED),
               "jit": {"streaming": "mix-30/mix30-jit-stream", "static": "mix-30/mix30-jit-static",
                       "harness-only control": "mix-30/mix30-jit-control",
                       "streaming, shuffle 1": "mix-30/mix30-jit-stream-shuffle1"}},
    "mix-121": {"dev": tuple(f"mix-121/mix121dev-{h}" for h in _FIXED),
                "test": tuple(f"mix-121/mix121-{h}" for h in _FIXED),
                "jit": {"streaming": "mix-121/mix121-jit-m3", "streaming, shuffle 1": "mix-121/mix121-jit-shuffle1",
                        "streaming, shuffle 2": "mix-121/mix121-jit-shuffle2", "static": "mix-121/mix121-jit-static",
                        "harness-only control": "mix-121/mix121-jit-control-presets",
                        "streaming, margin preset only": "mix-121/mix121-jit-stream-margin",
                        "harness-only control, margin preset only": "mix-121/mix121-jit-control"}},
}


def results_root() -> Path:
    """``results/`` of the source checkout."""
    return repo_root() / "results"


def rows(figure: str, suite: str | None = None) -> list[Row]:
    """The rows of figure set ``figure`` (a key of ``FIGURES``), of one ``suite`` or all."""
    if figure not in FIGURES:
        raise ConfigError(f"unknown figure set {figure!r}; one of {', '.join(FIGURES)}")
    found = [r for r in ROWS if figure in r.figures and suite in (None, r.suite)]
    if not found:
        raise ConfigError(f"no published {figure} rows for suite {suite!r}; suites with some: "
                          + ", ".join(sorted({r.suite for r in ROWS if figure in r.figures})))
    return found


def exports(row: Row, root: str | Path | None = None) -> list[Path]:
    """The export folders of ``row`` under ``root`` (default :func:`results_root`); each must exist."""
    return _present([Path(root or results_root()) / e for e in row.exports], f"{row.label} ({row.suite})")


def _present(paths: list[Path], what: str) -> list[Path]:
    """``paths``, each an export (its run.json there), else a one-line ConfigError naming ``what`` and the missing."""
    missing = [str(p) for p in paths if not (p / "run.json").is_file()]
    if missing:
        raise ConfigError(f"{what}: no export at {', '.join(missing)} (see results/README.md)")
    return paths


def run_dirs(figure: str, suite: str | None = None, root: str | Path | None = None) -> dict:
    """``{suite: {method: export}}`` of the single-export rows of ``figure``, the ``jit-`` prefix dropped from the
    method (``{"textworld": {"static": ..., "streaming": ...}}`` for ``fig6``, as experiments.run_jit_modes names
    its runs), for what reads run directories (``jitlab.compare.compare_runs``, ``experiments.jit_summaries``)."""
    out: dict = {}
    for row in rows(figure, suite):
        paths = exports(row, root)
        if len(paths) != 1:
            raise ConfigError(f"{row.label} ({row.suite}) joins {len(paths)} exports; read it with collect()")
        out.setdefault(row.suite, {})[row.method.removeprefix("jit-")] = paths[0]
    return out


def gap_runs(name: str, root: str | Path | None = None) -> tuple[list[Path], list[Path], dict[str, Path]]:
    """The (dev, test, jit) exports of the published gap table ``name`` (a key of ``GAPS``), as ``jitlab.gap.gap_table``
    takes them; each must exist."""
    if name not in GAPS:
        raise ConfigError(f"unknown published gap table {name!r}; one of {', '.join(GAPS)}")
    base, spec = Path(root or results_root()), GAPS[name]
    dev, test = [base / e for e in spec["dev"]], [base / e for e in spec["test"]]
    jit = {label: base / e for label, e in spec["jit"].items()}
    _present([*dev, *test, *jit.values()], f"gap table {name}")
    return dev, test, jit


SUMMARY_COLUMNS = ["suite", "harness", "backbone", "run_dir", "n_episodes", "success_rate", "mean_reward",
                   "tokens_per_task", "cost_per_task", "tool_calls_per_task", "status_counts", "row"]


def summaries(figure: str, suite: str | None = None, root: str | Path | None = None):
    """One line per single-export row of ``figure`` from its export's summary.json, in the columns of
    ``experiments.run_grid`` (``harness`` is the row's method, ``run_dir`` its export), plus ``row`` (its label):
    what the grid helpers (``experiments.grid_table``, ``best_per_suite``) take in place of a grid just run."""
    import json

    import pandas as pd
    lines = []
    for row in rows(figure, suite):
        if len(row.exports) != 1:
            raise ConfigError(f"{row.label} ({row.suite}) joins {len(row.exports)} exports; read it with collect()")
        path = exports(row, root)[0]
        summary = json.loads((path / "summary.json").read_text())
        lines.append({**{k: summary.get(k) for k in SUMMARY_COLUMNS}, "suite": row.suite, "harness": row.method,
                      "backbone": row.backbone, "run_dir": str(path), "row": row.label})
    return pd.DataFrame(lines, columns=SUMMARY_COLUMNS)


def collect(figure: str, suite: str | None = None, root: str | Path | None = None):
    """One tidy frame (:func:`jitlab.viz.figures.collect`) of the rows of ``figure`` (and ``suite``), one line per
    finished episode, with the catalogue's ``method``, ``backbone`` and ``label`` (``row``) per row and the export
    named relative to ``results/`` (``export``). A task seen in two exports of one row counts once."""
    import pandas as pd
    base = Path(root or results_root())
    frames = []
    for row in rows(figure, suite):
        df = _collect(exports(row, base)).drop_duplicates("task_id", keep="first")
        df["method"], df["backbone"], df["row"] = row.method, row.backbone, row.label
        df["export"] = [str(Path(r).relative_to(base)) for r in df["run"]]
        df["split"] = row.split
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def table(df):
    """One line per published row of ``df`` (from :func:`collect`): suite, split, row, method, backbone, n, success
    as ``rate (k/n; lo–hi)`` (Wilson 95%), tokens per task and the exports it was read from."""
    keys = ["suite", "split", "row", "method", "backbone"]
    p = pairings(df, by=("row",))
    k = df.groupby(keys, sort=False)["success"].sum()
    where = df.groupby(keys, sort=False)["export"].agg(lambda s: ", ".join(dict.fromkeys(s)))
    order = list(dict.fromkeys(map(tuple, df[keys].itertuples(index=False))))
    p = p.set_index(keys).loc[order].reset_index()
    p["success"] = [rate_cell(int(k[key]), int(n)) for key, n in zip(map(tuple, p[keys].itertuples(index=False)),
                                                                        p["n"])]
    p["exports"] = [where[tuple(r)] for r in p[keys].itertuples(index=False)]
    p["tokens_per_task"] = p["tokens_per_case"].round(0).astype(int)
    return p[[*keys, "n", "success", "tokens_per_task", "exports"]]
