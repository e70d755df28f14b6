"""Paired comparison of runs on the same tasks: is a difference larger than the noise?

    jitlab compare results/full-budget-textworld-test/textworld-react results/full-budget-textworld-test/textworld-aorchestra
    table, flips = jitlab.compare.compare_runs(["runs/a", "runs/b"])     # in a notebook

Each run (a run directory or its export) after the first is compared with the first, A. Episodes are matched by
(task id, seed), one finished episode per pair (its last attempt). Runs are refused, with a one-line error naming
the difference, when their suites (two mixes may differ in name, e.g. in order, ``mix:...@N``: their task lists
decide), splits, suite versions (where both recorded one), budgets (``max_steps``, ``max_tokens``, ``max_wall_s``)
or sets of (task id, seed) differ: a paired test on different tasks says nothing.
A budget that differs but bound no episode (no finished episode of either run used as much as the lower of the
two: steps, tokens, wall seconds) does not refuse; the row's ``budgets`` says it differed and did not bind.
With ``common=True`` (``--common``: a stopped stream, a partial run) the pairs are the (task id, seed) both runs
finished, and the output says how many each run had that the other lacks; no common pair is still refused, and
so are runs with no finished episode to pair. Backbones and harnesses may differ: that is what is compared.

Per pair (jitlab.stats): wins (B solved a task A did not), losses (the reverse), ties; the exact two-sided McNemar
p-value of success over the discordant tasks; the mean per-task Δ reward and Δ tokens (B − A) with paired
bootstrap 95% intervals; and the tasks that flipped, each with its family (in a mix ``<suite>/<family>``, so its
source suite too). Nothing here runs an episode: it reads records.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from jitlab.card import compute_card
from jitlab.envs.base import MIX_PREFIX
from jitlab.errors import ConfigError
from jitlab.stats import LEVEL, discordant, mcnemar_exact, paired_bootstrap
from jitlab.store import load

__all__ = ["BUDGETS", "COLUMNS", "RunRecord", "check_comparable", "common_keys", "compare_pair", "compare_runs",
           "read_run"]

BUDGETS = ("max_steps", "max_tokens", "max_wall_s")
COLUMNS = ["a", "b", "n_tasks", "success_a", "success_b", "wins", "losses", "ties", "mcnemar_p",
           "delta_reward", "delta_reward_lo", "delta_reward_hi", "delta_tokens", "delta_tokens_lo", "delta_tokens_hi",
           "flipped", "budgets"]
# what each budget limits, as an episode row records it (None: no limit, e.g. max_steps = each task's own)
USAGE = {"max_steps": "steps", "max_tokens": "tokens", "max_wall_s": "wall_s"}


@dataclass
class RunRecord:
    """One run read for comparison: its label, config, card and final episodes keyed by (task id, seed)."""
    path: Path
    label: str
    config: dict
    card: dict
    episodes: object  # DataFrame indexed by (task_id, seed): success, reward, tokens, steps, wall_s, family,
                      # position (JIT stream)


def read_run(path: str | Path, label: str | None = None) -> RunRecord:
    """Read a run directory or export for :func:`compare_pair` (the last final attempt of each task and seed)."""
    path = Path(path)
    frames = load(path)
    eps = frames["episodes"]
    done = eps[eps["final"]].sort_values(["task_id", "seed", "attempt"]).drop_duplicates(["task_id", "seed"], keep="last")
    done = done.assign(success=done["success"].fillna(0).astype(int), reward=done["reward"].fillna(0.0).astype(float),
                       tokens=done["tokens"].astype(float), seed=done["seed"].astype(int),
                       steps=done["steps"].astype(float), wall_s=done["wall_s"].astype(float),
                       position=done["extra"].map(_stream_index))
    config = frames["config"].iloc[0].to_dict() if len(frames["config"]) else {}
    return RunRecord(path, label or path.name, config, compute_card(frames),
                     done.set_index(["task_id", "seed"])[["success", "reward", "tokens", "steps", "wall_s", "family",
                                                          "position"]])


def _stream_index(extra) -> float:
    """A JIT episode's place in its stream (``extra["stream_index"]``, docs/records.md); NaN for a fixed harness."""
    try:
        index = json.loads(extra or "{}").get("stream_index")
    except (TypeError, ValueError):
        index = None
    return float("nan") if index is None else float(index)


def _few(keys, n: int = 3) -> str:
    names = [f"{t}#{s}" for t, s in sorted(keys)]
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def common_keys(a: RunRecord, b: RunRecord) -> list:
    """The (task id, seed) pairs both runs finished, sorted."""
    return sorted(set(a.episodes.index) & set(b.episodes.index))


def _bound(a: RunRecord, b: RunRecord, key: str) -> float | None:
    """The most any finished episode of ``a`` or ``b`` used of budget ``key`` when that reaches the lower of their
    two limits (so that budget could have stopped it; NaN: a use not recorded, counted as reaching it), else None."""
    import pandas as pd
    lower = min((v for v in (a.config.get(key), b.config.get(key)) if v is not None), default=None)
    used = pd.concat([a.episodes[USAGE[key]], b.episodes[USAGE[key]]])
    if lower is None or used.empty:
        return None
    if used.isna().any():
        return float("nan")
    return float(used.max()) if used.max() >= float(lower) else None


def check_comparable(a: RunRecord, b: RunRecord, common: bool = False) -> str:
    """Raise ConfigError naming the first difference that makes a paired comparison of ``a`` and ``b`` meaningless
    (with ``common``, differing task lists are allowed as long as they share a pair). Returns the budgets that
    differ but bound no episode ('' when none), as the row's ``budgets`` says them."""
    mixes = all(str(r.config.get("suite") or "").startswith(MIX_PREFIX) for r in (a, b))  # orders may differ:
    for key in ("split",) if mixes else ("suite", "split"):                                # the task lists decide
        if a.config.get(key) != b.config.get(key):
            raise ConfigError(f"cannot compare {a.label} and {b.label}: different {key} ({a.config.get(key)!r} vs "
                              f"{b.config.get(key)!r}); compare runs on the same tasks")
    va, vb = a.card.get("suite_version"), b.card.get("suite_version")
    if va is not None and vb is not None and set(str(va).split("+")) != set(str(vb).split("+")):  # a mix: its parts'
        raise ConfigError(f"cannot compare {a.label} and {b.label}: suite version {va} vs {vb} (the suite changed "
                          "between them); rerun the older one")
    differ = [k for k in BUDGETS if a.config.get(k) != b.config.get(k)]
    diffs = {k: f"{k} {a.config.get(k)!r} vs {b.config.get(k)!r}" for k in differ}
    binding = {k: used for k in differ if (used := _bound(a, b, k)) is not None}
    if binding:
        reached = "; ".join(f"{k}: an episode used {'an unrecorded amount' if u != u else f'{u:g}'}" for k, u in
                            binding.items())
        raise ConfigError(f"cannot compare {a.label} and {b.label}: budgets differ ({'; '.join(diffs.values())}) and "
                          f"bound an episode ({reached}, the lower limit or more); rerun one with the other's budgets")
    ka, kb = set(a.episodes.index), set(b.episodes.index)
    if not ka or not kb:
        empty = [r.label for r, k in ((a, ka), (b, kb)) if not k]
        raise ConfigError(f"cannot compare {a.label} and {b.label}: nothing to pair, {' and '.join(empty)} "
                          f"{'have' if len(empty) > 1 else 'has'} no finished episode; let the runs finish (rerun "
                          "their commands to resume) or compare other runs")
    if common and not ka & kb:
        raise ConfigError(f"cannot compare {a.label} and {b.label}: no task/seed pair finished in both; run them on "
                          "the same tasks and seeds")
    if ka != kb and not common:
        parts = [f"only in {r.label}: {_few(keys)}" for r, keys in ((a, ka - kb), (b, kb - ka)) if keys]
        raise ConfigError(f"cannot compare {a.label} and {b.label}: different task lists ({len(ka)} vs {len(kb)} "
                          f"finished task/seed pairs; {'; '.join(parts)}); run both on the same tasks and seeds "
                          "(same --split, --offset, --limit, --seed) and let unfinished tasks finish")
    return "; ".join(f"{d} (bound no episode)" for d in diffs.values())


def compare_pair(a: RunRecord, b: RunRecord, level: float = LEVEL, common: bool = False):
    """``(row, flips)``: the paired statistics of B vs A (a dict of :data:`COLUMNS`) and the flipped tasks (a
    DataFrame: task_id, seed, family, a_success, b_success, a_reward, b_reward, direction)."""
    import pandas as pd
    budgets = check_comparable(a, b, common)
    keys = common_keys(a, b)
    ea, eb = a.episodes.loc[keys], b.episodes.loc[keys]
    sa, sb = ea["success"].to_numpy(), eb["success"].to_numpy()
    wins, losses = discordant(sa, sb)
    dr = paired_bootstrap(ea["reward"], eb["reward"], level)
    dt = paired_bootstrap(ea["tokens"], eb["tokens"], level)
    flipped = [i for i, (x, y) in enumerate(zip(sa, sb)) if x != y]
    flips = pd.DataFrame([{"task_id": keys[i][0], "seed": keys[i][1], "family": ea["family"].iloc[i],
                           "a_success": int(sa[i]), "b_success": int(sb[i]),
                           "a_reward": float(ea["reward"].iloc[i]), "b_reward": float(eb["reward"].iloc[i]),
                           "direction": "win" if sb[i] else "loss"} for i in flipped],
                         columns=["task_id", "seed", "family", "a_success", "b_success", "a_reward", "b_reward",
                                  "direction"])
    n, mix = len(keys), str(a.config.get("suite") or "").startswith(MIX_PREFIX)   # a mix: each flip's suite/family
    row = {"a": a.label, "b": b.label, "n_tasks": n, "success_a": int(sa.sum()), "success_b": int(sb.sum()),
           "wins": wins, "losses": losses, "ties": n - wins - losses, "mcnemar_p": mcnemar_exact(losses, wins),
           "delta_reward": dr[0], "delta_reward_lo": dr[1], "delta_reward_hi": dr[2],
           "delta_tokens": dt[0], "delta_tokens_lo": dt[1], "delta_tokens_hi": dt[2],
           "flipped": "; ".join(f"{t}#{s}{f' ({f})' if mix else ''} {'+' if d == 'win' else '-'}" for t, s, f, d in
                                flips[["task_id", "seed", "family", "direction"]].itertuples(index=False)),
           "budgets": budgets}
    return row, flips


def compare_runs(paths, labels=None, level: float = LEVEL, common: bool = False):
    """Compare every run in ``paths`` after the first with the first: ``(table, flips, runs)``, a DataFrame with one
    row per pair (:data:`COLUMNS`), the flipped tasks of all pairs (with columns a, b) and the :class:`RunRecord` s
    (their ``card`` for printing). Labels default to the run folders' names (their paths when names repeat)."""
    import pandas as pd
    paths = [Path(p) for p in paths]
    if len(paths) < 2:
        raise ConfigError(f"compare needs at least two runs, got {len(paths)}; pass RUN_A RUN_B [...]")
    if labels is None:
        names = [p.name for p in paths]
        labels = names if len(set(names)) == len(names) else [str(p) for p in paths]
    runs = [read_run(p, label) for p, label in zip(paths, labels)]
    for other in runs[1:]:   # every refusal before any statistic
        check_comparable(runs[0], other, common)
    rows, flip_frames = [], []
    for other in runs[1:]:
        row, flips = compare_pair(runs[0], other, level, common)
        rows.append(row)
        flip_frames.append(flips.assign(a=runs[0].label, b=other.label))
    flips = pd.concat(flip_frames, ignore_index=True) if flip_frames else pd.DataFrame()
    return pd.DataFrame(rows, columns=COLUMNS), flips, runs

