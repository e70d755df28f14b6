"""One harness vs a harness per task: the four rows researchers report, built from runs on the same paired tasks.

    jitlab gap --dev results/mix-dev/* --test results/mix-test/* --jit runs/jit-stream runs/jit-static --out results/gap
    table = jitlab.gap.gap_table(dev_paths, test_paths, jit_paths)   # .rows, .families, .stream, .chosen

Fixed harnesses run on a dev split (``--dev``) and on the test split (``--test``), one record per harness on each
(matched by the run's harness name); a harness's record may come in parts, runs of the same code and settings on
disjoint tasks (per-suite runs of a mix's tasks, say), read as one run on a mix of their tasks. JIT runs (``--jit``:
streaming, static, the harness-only control, shuffles) on the test tasks. Rows, each on every test task:

- (a) ``best single``: the fixed harness with the most dev successes (then the higher mean reward, the fewer tokens
  per task, the name), run on every test task;
- (b) ``per-family oracle``: per family (keyed by (suite, family); jitlab/envs/mix.py), the fixed harness best on
  that family's dev tasks by the same order; a family with no dev task takes (a)'s. Ahead of time but specialised:
  the row a JIT must beat;
- (c) ``per-instance oracle``: on each test task the fixed harness that did best there (success, reward, then the
  fewer tokens: its tokens are the row's). An upper bound, not a method: it reads the test outcomes;
- (d) each JIT run.

Each row: successes with the Wilson interval, tokens per task, the paired comparison with (b) and with (a) (wins,
losses, the exact McNemar p, Δ success with its paired bootstrap interval; jitlab.stats), the share of the gap
closed, (row − a) / (c − a) (NaN when c = a), and the equal-weight mean of the per-suite success rates with its
standard error, sqrt(Σ r(1 − r)/n) / S over the S suites, beside the pooled rate. ``families`` gives the rates and gap
shares per suite and per (suite, family); ``stream`` the successes along stream position (``bins`` equal slices of
the stream: a JIT row by its own ``stream_index``, the fixed rows in the first JIT run's order); ``chosen`` the
harness each dev choice picked and its dev record.

Families are keyed by (suite, family) (``<suite>/<family>``, as a mix records them), so a single-suite run's
``other`` is not another suite's. Refused, in one line, before any statistic: a run given twice, parts of one fixed
harness that differ in a setting (code, backbone, split, seed, budgets) or share a task, a JIT run among the fixed
ones (or the reverse), a test harness without a dev run (or the reverse), dev runs on the test split or sharing a
task with it, and runs that ``jitlab compare`` would not pair (suite, split, budgets, task lists).
Nothing here runs an episode: it reads records.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from jitlab.compare import RunRecord, check_comparable, read_run
from jitlab.envs.base import MIX_PREFIX
from jitlab.envs.mix import source_of
from jitlab.errors import ConfigError
from jitlab.stats import LEVEL, discordant, mcnemar_exact, paired_bootstrap, wilson

__all__ = ["BEST_SINGLE", "PER_FAMILY", "PER_INSTANCE", "GapTable", "gap_table"]

BEST_SINGLE, PER_FAMILY, PER_INSTANCE = "best single", "per-family oracle", "per-instance oracle"
SELECTION = ("suite", "limit", "offset", "family")   # the settings that choose a run's tasks: its parts may differ there
ALL = "(all)"   # the family column of a suite's own line in ``families``


@dataclass
class GapTable:
    """The DataFrames of :func:`gap_table` (see the module docstring) and the runs they were built from."""
    rows: object
    families: object
    stream: object
    chosen: object
    runs: list


def _is_jit(run: RunRecord) -> bool:
    return str(run.config.get("harness") or "").startswith("jit-") or run.episodes["position"].notna().any()


def _read(paths, what: str, jit: bool) -> dict[str, RunRecord]:
    """``{name: run}``: fixed runs by harness name; JIT runs by the labels of a mapping ``{label: path}``, else by
    folder name (``parent/name`` when names repeat)."""
    labels = list(paths) if isinstance(paths, dict) else None
    paths = [Path(p) for p in (paths.values() if isinstance(paths, dict) else paths)]
    if len(set(paths)) != len(paths):
        raise ConfigError(f"gap: a run is given twice in {what}")
    names = [p.name for p in paths]
    labels = labels or [n if names.count(n) == 1 else f"{p.parent.name}/{n}" for p, n in zip(paths, names)]
    runs = [_keyed(read_run(p, label)) for p, label in zip(paths, labels)]
    out = {}
    for run in runs:
        if _is_jit(run) != jit:
            raise ConfigError(f"gap: {run.path} is {'a JIT' if _is_jit(run) else 'a fixed-harness'} run; pass it with "
                              f"{'--jit' if _is_jit(run) else '--dev / --test'}")
        out.setdefault(run.label if jit else str(run.config.get("harness") or run.label), []).append(run)
    return {name: parts[0] if len(parts) == 1 else _join(name, parts, what) for name, parts in out.items()}, runs


def _keyed(run: RunRecord) -> RunRecord:
    """``run`` with each family as its (suite, family) key, ``<suite>/<family>`` (a mix's records have it already)."""
    suite = str(run.config.get("suite"))
    return replace(run, episodes=run.episodes.assign(family=["/".join(source_of(f, suite)) for f in run.episodes["family"]]))


def _join(name: str, parts: list, what: str) -> RunRecord:
    """One fixed harness's record from its ``parts``: runs with the same settings on disjoint tasks, read as one run
    on a mix of their tasks (its suite version the parts' together)."""
    import pandas as pd
    first = parts[0]
    for run in parts[1:]:
        for key in sorted((set(first.config) | set(run.config)) - set(SELECTION)):
            if first.config.get(key) != run.config.get(key):
                raise ConfigError(f"gap: {what} has runs of harness {name} that differ in {key} ({first.config.get(key)!r} "
                                  f"in {first.path}, {run.config.get(key)!r} in {run.path}); give its parts with one "
                                  "code and settings")
    episodes = pd.concat([run.episodes for run in parts])
    if episodes.index.duplicated().any():
        task = episodes.index[episodes.index.duplicated()][0][0]
        raise ConfigError(f"gap: task {task} is in two runs of harness {name} in {what}; its parts must not share tasks")
    suites = [str(run.config.get("suite")) for run in parts]
    versions = [run.card.get("suite_version") for run in parts]
    version = None if None in versions else "+".join(
        v if s.startswith(MIX_PREFIX) else f"{s}={v}" for s, v in zip(suites, map(str, versions)))
    config = {**first.config, "suite": MIX_PREFIX + "+".join(s.removeprefix(MIX_PREFIX) for s in suites)}
    return RunRecord(first.path, name, config, {**first.card, "suite_version": version}, episodes)


def _check(dev: dict, test: dict, jit: dict) -> None:
    if not test:
        raise ConfigError("gap: no --test runs; give one run per fixed harness on the test tasks")
    for a, b, what in ((dev, test, "a dev run"), (test, dev, "a test run")):
        if missing := sorted(set(a) - set(b)):
            raise ConfigError(f"gap: harness {missing[0]} has {what} but no {'test' if what == 'a dev run' else 'dev'} "
                              "run; give every fixed harness on both")
    first_dev, first_test = next(iter(dev.values())), next(iter(test.values()))
    for run in [*dev.values()][1:]:
        check_comparable(first_dev, run)
    for run in [*test.values()][1:] + [*jit.values()]:
        check_comparable(first_test, run)
    if first_dev.config.get("split") == first_test.config.get("split"):
        raise ConfigError(f"gap: the dev runs are on split {first_dev.config.get('split')!r}, as are the test runs; "
                          "choose the fixed harnesses on another split")
    if shared := sorted(set(first_dev.episodes.index.get_level_values(0)) & set(first_test.episodes.index.get_level_values(0))):
        raise ConfigError(f"gap: task {shared[0]} is in both the dev and the test runs; dev and test must not share tasks")


def _rank(name: str, eps) -> tuple:
    """The dev order: more successes, higher mean reward, fewer tokens per task, then the name."""
    return (-int(eps["success"].sum()), -float(eps["reward"].mean()), float(eps["tokens"].mean()), name)


def _best(dev: dict, family: str | None = None) -> str | None:
    pick = {h: r.episodes if family is None else r.episodes[r.episodes["family"] == family] for h, r in dev.items()}
    pick = {h: e for h, e in pick.items() if len(e)}
    return min(pick, key=lambda h: _rank(h, pick[h])) if pick else None


def _rows(dev: dict, test: dict, jit: dict):
    """``({row: episodes on the test keys}, {row: what it ran}, chosen records)``."""
    import pandas as pd
    keys = sorted(next(iter(test.values())).episodes.index)
    panel = {h: r.episodes.loc[keys] for h, r in test.items()}
    family = next(iter(panel.values()))["family"]
    single = _best(dev)
    chosen = [{"choice": BEST_SINGLE, "family": ALL, "harness": single, **_dev_record(dev[single].episodes)}]
    per_family = {}
    for fam in dict.fromkeys(family):
        per_family[fam] = _best(dev, fam) or single
        fam_eps = dev[per_family[fam]].episodes
        chosen.append({"choice": PER_FAMILY, "family": fam, "harness": per_family[fam],
                       **_dev_record(fam_eps[fam_eps["family"] == fam])})
    by_family = pd.concat([panel[per_family[family[k]]].loc[[k]] for k in keys])
    instance = pd.concat([panel[min(panel, key=lambda h, k=k: _rank(h, panel[h].loc[[k]]))].loc[[k]] for k in keys])
    rows = {BEST_SINGLE: panel[single], PER_FAMILY: by_family, PER_INSTANCE: instance,
            **{label: run.episodes.loc[keys] for label, run in jit.items()}}
    ran = {BEST_SINGLE: single, PER_FAMILY: f"{len(set(per_family.values()))} harness(es) over {len(per_family)} "
           "families", PER_INSTANCE: "the best fixed harness on each test task", **{k: "JIT" for k in jit}}
    return rows, ran, pd.DataFrame(chosen)


def _dev_record(eps) -> dict:
    return {"dev_tasks": len(eps), "dev_success": int(eps["success"].sum()),
            "dev_tokens_per_task": float(eps["tokens"].mean()) if len(eps) else math.nan}


def _share(value: float, low: float, high: float) -> float:
    return (value - low) / (high - low) if high != low else math.nan


def _suites(eps):
    return eps["family"].map(lambda f: source_of(f)[0])


def _paired(base, row, level: float) -> dict:
    wins, losses = discordant(base["success"], row["success"])
    delta = paired_bootstrap(base["success"], row["success"], level)
    return {"wins": wins, "losses": losses, "mcnemar_p": mcnemar_exact(losses, wins), "delta_success": delta[0],
            "delta_success_lo": delta[1], "delta_success_hi": delta[2]}


def _equal_weight(eps) -> tuple[float, float, int]:
    """(mean of the per-suite success rates, its standard error, number of suites)."""
    rates = eps.groupby(_suites(eps))["success"].agg(["mean", "size"])
    se = math.sqrt(sum(r * (1 - r) / n for r, n in zip(rates["mean"], rates["size"]))) / len(rates)
    return float(rates["mean"].mean()), se, len(rates)


def gap_table(dev, test, jit=(), level: float = LEVEL, bins: int = 4) -> GapTable:
    """The four rows (see the module docstring) from run directories or exports: ``dev`` and ``test`` one fixed
    harness each, ``jit`` JIT runs on the test tasks (a list, or ``{label: path}`` to name their rows)."""
    import pandas as pd
    if bins < 1:
        raise ConfigError(f"gap: --bins must be at least 1, got {bins}")
    (dev_runs, dev_read), (test_runs, test_read), (jit_runs, jit_read) = (
        _read(dev, "--dev", False), _read(test, "--test", False), _read(jit, "--jit", True))
    _check(dev_runs, test_runs, jit_runs)
    rows, ran, chosen = _rows(dev_runs, test_runs, jit_runs)
    a, b, c = rows[BEST_SINGLE], rows[PER_FAMILY], rows[PER_INSTANCE]
    table = []
    for name, eps in rows.items():
        k, n = int(eps["success"].sum()), len(eps)
        lo, hi = wilson(k, n, level)
        mean, se, n_suites = _equal_weight(eps)
        table.append({"row": name, "ran": ran[name], "n_tasks": n, "success": k, "rate": k / n, "wilson_lo": lo,
                      "wilson_hi": hi, "tokens_per_task": float(eps["tokens"].mean()),
                      "gap_share": _share(k / n, a["success"].mean(), c["success"].mean()),
                      "suites": n_suites, "equal_weight_rate": mean, "equal_weight_se": se,
                      **{f"vs_family_{key}": v for key, v in _paired(b, eps, level).items()},
                      **{f"vs_single_{key}": v for key, v in _paired(a, eps, level).items()}})
    return GapTable(pd.DataFrame(table), _families(rows), _stream(rows, jit_runs, bins), chosen,
                    [*dev_read, *test_read, *jit_read])


def _families(rows: dict):
    """Per suite (family ``(all)``) and per (suite, family): tasks, successes, rate and gap share of every row."""
    import pandas as pd
    any_row = next(iter(rows.values()))
    groups = [(s, ALL, _suites(any_row) == s) for s in dict.fromkeys(_suites(any_row))]
    groups += [(*source_of(f), any_row["family"] == f) for f in dict.fromkeys(any_row["family"])]
    out = []
    for s, fam, mask in groups:
        low, high = (rows[r]["success"][mask].mean() for r in (BEST_SINGLE, PER_INSTANCE))
        for name, eps in rows.items():
            k, n = int(eps["success"][mask].sum()), int(mask.sum())
            out.append({"row": name, "suite": s, "family": fam, "n_tasks": n, "success": k, "rate": k / n,
                        "gap_share": _share(k / n, low, high)})
    return pd.DataFrame(out)


def _stream(rows: dict, jit: dict, bins: int):
    """Successes in ``bins`` equal slices of the stream (positions from each JIT run, the first one's for the rest)."""
    import pandas as pd
    if not jit:
        return pd.DataFrame(columns=["row", "bin", "positions", "n_tasks", "success", "rate"])
    first = next(iter(jit.values())).episodes.loc[next(iter(rows.values())).index, "position"]
    out = []
    for name, eps in rows.items():
        position = eps["position"] if name in jit else first
        n = len(eps)
        for i in range(bins):
            lo, hi = i * n // bins, (i + 1) * n // bins
            mask = (position >= lo) & (position < hi)
            k, m = int(eps["success"][mask].sum()), int(mask.sum())
            out.append({"row": name, "bin": i, "positions": f"{lo}-{hi - 1}", "n_tasks": m, "success": k,
                        "rate": k / m if m else math.nan})
    return pd.DataFrame(out)
