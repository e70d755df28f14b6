"""Repeats: each task rerun at K seeds (``--repeat K``), what the repeat varies, and the reliability it measures.

Repeat ``r`` of a run at ``seed`` s plays episode seed ``s + r``. That seed is part of the episode identity
(jitlab/store.py), so a repeat resumes on its own. A seed changes an episode in up to two ways, recorded as
``varies`` in each episode row's ``extra`` and in the summary:

- ``reset``: the suite's ``reset_varies`` is true (BabyAI: another layout; DBBench: another row order), so
  ``env.reset(seed)`` plays another episode of the task;
- ``sampling``: the backbone's configured ``temperature`` (``--backbone-option temperature=0.7``) is above 0,
  so every chat call is sampled with the episode seed as its sampling seed.

Greedy decoding on a deterministic game (TextWorld, toy) varies nothing: the K reruns would be copies, so
``--repeat K > 1`` there is refused with a line saying to set a temperature. A module that samples with its own
temperature (e.g. self-consistency) is not counted.

:func:`repeat_summary` reports, over the tasks, pass@1 (each task's success rate over its repeats, averaged),
pass^k (the share of tasks solved in all k repeats, as in tau-bench) and the per-task variance of success and
reward: the noise floor a difference between two harnesses must clear.
"""
from __future__ import annotations

from jitlab.errors import ConfigError
from jitlab.fields import SEED_MAX
from jitlab.stats import bootstrap_mean, wilson

__all__ = ["check_repeat", "repeat_seeds", "repeat_summary", "samples", "what_varies"]


def samples(backbone_options: dict | None) -> bool:
    """Whether the backbone samples (configured temperature above 0; every backend's default is 0, greedy)."""
    try:
        return float((backbone_options or {}).get("temperature") or 0.0) > 0
    except (TypeError, ValueError):
        return False  # a bad temperature is reported when the backbone loads


def what_varies(suite, backbone_options: dict | None) -> str:
    """What another episode seed changes: 'reset+sampling', 'reset', 'sampling' or 'nothing'."""
    parts = [name for name, on in (("reset", bool(getattr(suite, "reset_varies", False))),
                                   ("sampling", samples(backbone_options))) if on]
    return "+".join(parts) or "nothing"


def repeat_seeds(seed: int, repeat: int) -> list[int]:
    """The episode seeds of repeats 0..repeat-1 of a run at ``seed``; ConfigError when the last is past SEED_MAX (the
    largest seed a record holds), raised before any repeat runs."""
    if seed + repeat - 1 > SEED_MAX:
        raise ConfigError(f"--seed {seed} with --repeat {repeat} plays seeds up to {seed + repeat - 1}, past the largest "
                          f"seed {SEED_MAX}; lower --seed to at most {SEED_MAX - repeat + 1}")
    return list(range(seed, seed + repeat))


def check_repeat(suite, backbone_options: dict | None, repeat: int) -> str:
    """What the repeats vary; ConfigError when ``repeat`` > 1 and a seed changes nothing."""
    varies = what_varies(suite, backbone_options)
    if repeat > 1 and varies == "nothing":
        name = getattr(suite, "name", suite)
        raise ConfigError(f"--repeat {repeat} on {name} would rerun identical episodes: its games do not vary with the "
                          "reset seed and the backbone decodes greedily. Set a sampling temperature "
                          "(--backbone-option temperature=0.7; repeat r samples with seed r) or use --repeat 1")
    return varies


def repeat_summary(done) -> dict | None:
    """The reliability of a run's finished episodes (a DataFrame with task_id, seed, success, reward and
    ``extra``) when some task ran at more than one seed; None otherwise."""
    import json
    done = done.sort_values("id").drop_duplicates(["task_id", "seed"], keep="last")
    per = done.groupby("task_id", sort=False)
    k = per["seed"].nunique()
    if len(done) == 0 or k.max() < 2:
        return None
    rates = per["success"].mean()
    full = k == k.max()
    all_ok = per["success"].min()[full].astype(bool)
    varies = sorted({json.loads(e or "{}").get("varies", "unrecorded") for e in done["extra"]})
    p1, lo, hi = bootstrap_mean(rates.tolist())
    successes, n = int(done["success"].sum()), len(done)
    return {
        "k": int(k.max()), "seeds": sorted(int(s) for s in done["seed"].unique()), "varies": varies,
        "n_tasks": int(len(k)), "n_tasks_all_repeats": int(full.sum()),
        "pass_at_1": float(p1),
        "pass_at_1_wilson": list(wilson(successes, n)),               # episodes counted as independent trials
        "pass_at_1_task_bootstrap": [float(lo), float(hi)],           # tasks resampled: repeats stay together
        "pass_hat_k": float(all_ok.mean()) if len(all_ok) else 0.0,
        "pass_hat_k_wilson": list(wilson(int(all_ok.sum()), int(len(all_ok)))),
        "tasks_mixed": int(((rates > 0) & (rates < 1)).sum()),         # solved in some repeats, not all
        "success_var_per_task": float(per["success"].var(ddof=1).fillna(0).mean()),
        "reward_var_per_task": float(per["reward"].var(ddof=1).fillna(0).mean()),
        "per_task": {str(t): {"k": int(k[t]), "successes": int(per["success"].sum()[t]),
                              "reward_mean": float(per["reward"].mean()[t]),
                              "reward_var": float(per["reward"].var(ddof=1).fillna(0)[t])} for t in k.index},
    }
