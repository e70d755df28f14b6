"""The closing table of issue 13: base harnesses vs + rule patches vs + learned interventions vs + engineer patches.

    jitlab engineer table --suite textworld --harness react,aorchestra --engineers rules,interventions,embedded \\
        --batch 6 -k 4 --test 10 --out runs/engineer-table
    from jitlab.engineer.table import TableConfig, run_table
    rows = run_table(TableConfig(suite="toy", harness="react", engineers="rules,interventions",
                                 backbone="scripted:pick-first", batch=2, test=2))

For each base harness H (``--harness``, comma-separated) and engineer E (``--engineers``: ``rules``,
``interventions`` or a backbone that writes patches, e.g. ``embedded`` untrained or ``hf:<adapter>`` trained) one
engineer loop (jitlab.engineer.loop.run_engineer: one round, ``batch`` dev tasks, K candidates, re-measured on the
disjoint next batch and on the first ``test`` test tasks) runs into ``<out>/<H>/<E>/``. Then ``<out>/table.csv``
and ``table.md`` (``table.json``: the same rows and the config): per harness one ``base`` row (the base harness's
runs of its first engineer's loop) and one row per engineer: success (and its Wilson 95% interval), Δ (and the exact
McNemar p of kept vs base on the same tasks) and tokens per task on the batch, the
disjoint batch and the test tasks, from the kept patch's runs, or the base's when no patch was kept (``kept``
False, Δ 0), and the kept patch's sha (16 hex).
Success and tokens are read back from the run directories each loop's ``summary.json`` lists under ``runs``
(jitlab.store.summarize); Δ is the loop's (over the (task, seed) pairs both runs finished, jitlab.engineer.loop.delta).

Resumable: a rerun with the same ``out`` reruns no finished episode (each loop resumes through its run dirs).
Every loop re-runs the base harness on the same tasks and seed; with the replay cache on (the default) the
repeats are answered from the cache (same prompts, same seed), so only the first costs model time. Caveat: each
method row's Δ is against its own loop's base runs; they equal the base row's when the cache answers them.
Export for results/: ``jitlab export`` of the run directories (``<out>/<H>/<E>/{round0,disjoint,test}/*``).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jitlab.engineer.loop import EngineerConfig, run_engineer
from jitlab.engineer.transfer import _names as names_of
from jitlab.engineer.transfer import slug
from jitlab.errors import ConfigError
from jitlab.fields import CANDIDATES_MAX, check_fields
from jitlab.harness import resolve
from jitlab.llm.base import DEFAULT_BACKBONE, check_name
from jitlab.llm.lazy import BackbonePool
from jitlab.run_options import EpisodeOptions, Quiet, RunControls, adjust, derive
from jitlab.store import summarize

__all__ = ["COLUMNS", "LABELS", "TableConfig", "run_table", "table_rows"]

LABELS = ("batch", "disjoint", "test")
COLUMNS = ["harness", "engineer", "kept", *(f"success_{x}" for x in LABELS), *(f"delta_{x}" for x in LABELS),
           *(f"tokens_{x}" for x in LABELS), "kept_sha", *(f"success_{x}_wilson" for x in LABELS),
           *(f"mcnemar_p_{x}" for x in LABELS)]


@dataclass
@adjust(defaults={"concurrency": 6}, help={"cache": "use the replay cache (answers the repeated base runs)"})
class TableConfig(EpisodeOptions, RunControls, Quiet):
    suite: str = field(default="textworld", metadata={"help": "suite name (jitlab suites)"})
    harness: str = field(default="react,aorchestra", metadata={"help": "base harnesses, comma-separated (seed "
                                                                        "names or folders; never edited)",
                                                                "nonempty": True})
    engineers: str = field(default="rules,interventions,embedded", metadata={
        "help": "engineers, comma-separated: rules, interventions, or a backbone that writes patches (embedded: "
                "untrained; hf:<dir>/adapter: trained)", "nonempty": True})
    backbone: str = field(default=DEFAULT_BACKBONE, metadata={"help": "backbone the harnesses run with"})
    batch: int = field(default=6, metadata={"help": "tasks in the batch (and in the disjoint batch)", "min": 1})
    offset: int = field(default=0, metadata={"help": "index of the batch's first dev task", "min": 0})
    k: int = field(default=4, metadata={"help": "patches proposed per engineer", "min": 1, **CANDIDATES_MAX})
    test: int = field(default=10, metadata={"help": "test tasks (the first N of the test split; 0: none)", "min": 0})
    out: str = field(default="runs/engineer-table", metadata={"help": "output directory", "nonempty": True})
    selection: str = field(default="greedy", metadata={"help": "rule that admits each loop's best patch "
                                                               "(jitlab/selection.py; confirm uses the batch after "
                                                               "the disjoint one)",
                                                       "choices": ("greedy", "screen", "confirm", "paired")})

    def __post_init__(self):
        check_fields(self)


def _names(text: str, what: str) -> list[str]:
    names = names_of(text)
    if not names:
        raise ConfigError(f"engineer table: --{what} names nothing; give one or more, comma-separated")
    return names


def _side(summary: dict, label: str, side: str) -> dict:
    """Success (with its Wilson 95% interval, ``lo–hi``) and tokens per task of one run a loop measured (None when
    the loop did not measure ``label``)."""
    run_dir = summary.get("runs", {}).get(label, {}).get(side)
    if run_dir is None:
        return {f"success_{label}": None, f"tokens_{label}": None, f"success_{label}_wilson": None}
    s = summarize(run_dir, write=False)
    lo, hi = s["success_rate_wilson"]
    return {f"success_{label}": s["success_rate"], f"tokens_{label}": s["tokens_per_task"],
            f"success_{label}_wilson": f"{lo:.2f}–{hi:.2f}"}


def _mcnemar(summary: dict, label: str) -> float | None:
    """The exact McNemar p of the kept harness against the base on ``label``'s tasks (jitlab.compare)."""
    runs = summary.get("runs", {}).get(label, {})
    if not runs.get("base") or not runs.get("kept"):
        return None
    if Path(runs["base"]).resolve() == Path(runs["kept"]).resolve():
        return 1.0   # nothing kept: the base against itself
    from jitlab.compare import compare_runs
    return float(compare_runs([runs["base"], runs["kept"]])[0]["mcnemar_p"].iloc[0])


def table_rows(harness: str, summaries: dict[str, dict]) -> list[dict]:
    """The base row and one row per engineer of one harness, from its loops' ``summary.json`` dicts (by engineer)."""
    first = next(iter(summaries.values()))
    rows = [{"harness": harness, "engineer": "base", "kept": None, "kept_sha": None,
             **{k: v for x in LABELS for k, v in _side(first, x, "base").items()}}]
    for engineer, s in summaries.items():
        row = {"harness": harness, "engineer": engineer, "kept": s["kept_sha"] is not None,
               "kept_sha": (s["kept_sha"] or "")[:16] or None}
        for x in LABELS:
            row |= _side(s, x, "kept")
            row[f"delta_{x}"] = s["delta_batch"] if x == "batch" else (s.get(f"delta_{x}") or {}).get("delta")
            row[f"mcnemar_p_{x}"] = _mcnemar(s, x)
        rows.append(row)
    return rows


def run_table(cfg: TableConfig) -> list[dict]:
    """Run every (harness, engineer) loop and write ``table.csv``/``table.md`` (see the module docstring); returns
    the rows."""
    import pandas as pd

    from jitlab.engineer.proposer import OFFLINE
    from jitlab.viz.tables import markdown_table
    check_fields(cfg)
    harnesses, engineers = _names(cfg.harness, "harness"), _names(cfg.engineers, "engineers")
    for name in [cfg.backbone, *(e for e in engineers if e not in OFFLINE)]:  # bad names fail before any run
        check_name(name)
    for harness in harnesses:
        resolve(harness)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda *a: None) if cfg.quiet else (lambda *a: print(*a, flush=True))
    rows, backbones = [], BackbonePool()   # one loaded model per backbone for every loop of the table
    spend = cfg.command_spend(out)         # the caps bound the whole table: every loop's runs and engineer calls
    for harness in harnesses:
        summaries = {}
        for engineer in engineers:
            loop_out = out / slug(harness) / slug(engineer)
            summaries[engineer] = run_engineer(derive(
                EngineerConfig, cfg, suite=cfg.suite, harness=harness, backbone=cfg.backbone, engineer=engineer,
                batch=cfg.batch, offset=cfg.offset, k=cfg.k, rounds=1, disjoint=True, test=cfg.test,
                out=str(loop_out), quiet=True, selection=cfg.selection), backbones, spend)
            s = summaries[engineer]
            say(f"{harness} + {engineer}: batch {s['base_success']:.2f} -> {s['success']:.2f}, kept "
                f"{(s['kept_sha'] or 'none')[:12]} ({loop_out})")
        rows += table_rows(harness, summaries)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame.to_csv(out / "table.csv", index=False)
    shown = frame.astype(object).where(frame.notna(), None)
    for x in LABELS:  # whole tokens read better than 1.35e+03
        shown[f"tokens_{x}"] = [None if v is None else round(v) for v in shown[f"tokens_{x}"]]
    (out / "table.md").write_text(markdown_table(shown, empty="—") + "\n")
    (out / "table.json").write_text(json.dumps({"config": asdict(cfg), "rows": rows}, indent=2, default=str))
    return rows
