"""What the stage notebooks and the pipeline's figures read back from the training records: the curves TRL wrote to
TensorBoard (``<stage>/<phase>/runs/``), Stage III's per-candidate channels (completions.jsonl), the evaluations'
summaries, and the figures drawn from them.

    df = training_scalars("runs/train/stage1")                  # phase, tag, step, value (TensorBoard event files)
    F.save(fig_curves(df, ["train/loss"]), "figures/stage1_loss")
    channels = candidate_channels("runs/train/stage3")          # one row per sampled plan
    eval_table({"base": "runs/p/validity/base", "stage1": ...})  # the JIT summaries side by side
    closing_table("runs/p", compare_runs), paired_table("runs/p", compare_runs)   # the pipeline's closing table

Caveat: with ``report_to: none`` there are no event files; ``training_scalars`` then falls back to the Trainer's
``log_history.jsonl`` (the same numbers, written by jitlab.train.common) and says so in its ``source`` column.
"""
from __future__ import annotations

import json
from pathlib import Path

from jitlab.compare import compare_pair, read_run
from jitlab.errors import ConfigError
from jitlab.jit.generate.plan import PlanError, check_plan, parse_plan, plan_text
from jitlab.stats import wilson
from jitlab.train.records import is_replaced
from jitlab.viz import style as S
from jitlab.viz.figures import write_table
from jitlab.viz.runs import register_figure, save_figure

__all__ = ["CLOSING_COLUMNS", "PAIRED_COLUMNS", "candidate_channels", "closing_table", "eval_table", "example_lengths",
           "fig_curves", "pair_rewards", "paired_table", "phases_table", "pipeline_figures", "read_records",
           "repair_by_op", "repair_table", "training_scalars"]

EVAL_COLUMNS = ["policy", "generator", "n_episodes", "success_rate", "tokens_per_task", "gen_tokens_per_task",
                "repair_tokens_per_task", "exec_tokens_per_task", "first_try_valid_rate", "repair_success_rate"]
VALIDITY_COLUMNS = ["policy", "backbone", "n", "parse_rate", "first_try_valid_rate", "tasks_needing_repair",
                    "repair_success_rate", "valid_rate", "gen_tokens_per_task", "repair_tokens_per_task"]


CLOSING_COLUMNS = ["policy", "n_validity", "first_try_valid_rate", "distinct_plans", "n_episodes", "n_success",
                   "success_rate", "success_lo", "success_hi", "tokens_per_task", "grpo_groups",
                   "grpo_nonzero_advantage_share"]
PAIRED_COLUMNS = ["a", "b", "n_tasks", "success_a", "success_b", "wins", "losses", "mcnemar_p", "delta_tokens", "note"]


def read_records(path: str | Path):
    """A JSONL file of records as a DataFrame (empty when the file is missing or empty)."""
    import pandas as pd
    path = Path(path)
    lines = path.read_text().splitlines() if path.is_file() else []
    return pd.DataFrame([json.loads(line) for line in lines if line.strip()])


def _text(messages) -> str:
    return messages if isinstance(messages, str) else "".join(str(m.get("content", "")) for m in messages or [])


def example_lengths(sft, pairs=None):
    """One row per training example (``kind``: sft, chosen, rejected) with its prompt and completion length in
    characters, from the records of a Stage I data folder (sft.jsonl, pairs.jsonl as DataFrames)."""
    import pandas as pd
    rows = [{"kind": "sft", "task_id": r["task_id"], "prompt_chars": len(_text(r["prompt"])),
             "completion_chars": len(_text(r["completion"]))} for r in sft.to_dict("records")]
    for r in (pairs.to_dict("records") if pairs is not None else []):
        rows += [{"kind": k, "task_id": r["task_id"], "prompt_chars": len(_text(r["prompt"])),
                  "completion_chars": len(_text(r[k]))} for k in ("chosen", "rejected")]
    return pd.DataFrame(rows, columns=["kind", "task_id", "prompt_chars", "completion_chars"])


def pair_rewards(pairs):
    """Stage I's preference pairs (pairs.jsonl as a DataFrame), one row per rule then ``all``: how many pairs, how
    many whose rewards differ (the rest differ in cost or tokens only), and the reward spread: the chosen minus
    rejected reward gap (min, mean, max) and the lowest and highest reward of the pairs' plans."""
    import pandas as pd
    cols = ["rule", "pairs", "reward_differs", "gap_min", "gap_mean", "gap_max", "reward_min", "reward_max"]
    if pairs is None or pairs.empty:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame({"rule": pairs["rule"], "chosen": [m["reward"] for m in pairs["chosen_metrics"]],
                       "rejected": [m["reward"] for m in pairs["rejected_metrics"]]})
    df["gap"] = df["chosen"] - df["rejected"]
    rows = [{"rule": rule, "pairs": len(g), "reward_differs": int((g["gap"].abs() > 1e-9).sum()),
             "gap_min": g["gap"].min(), "gap_mean": g["gap"].mean(), "gap_max": g["gap"].max(),
             "reward_min": min(g["chosen"].min(), g["rejected"].min()),
             "reward_max": max(g["chosen"].max(), g["rejected"].max())}
            for rule, g in [*df.groupby("rule", sort=True), ("all", df)]]
    return pd.DataFrame(rows, columns=cols)


def phases_table(run_dir: str | Path):
    """One row per phase of a stage run from its manifest.json: steps, examples, first and last loss, wall time."""
    import pandas as pd
    manifest = json.loads((Path(run_dir) / "manifest.json").read_text())
    cols = ["phase", "global_step", "examples", "dropped_too_long", "first_loss", "last_loss", "wall_s",
            "resumed_from", "skipped"]
    return pd.DataFrame([{"phase": name, **p} for name, p in manifest["phases"].items()]).reindex(columns=cols)


def repair_table(folders: dict):
    """``{label: evaluate_repair folder}`` -> one row per label and diagnostic kind (``all`` first): n, repaired,
    rate, from each folder's summary.json."""
    import pandas as pd
    rows = []
    for label, folder in folders.items():
        s = json.loads((Path(folder) / "summary.json").read_text())
        rows.append({"policy": label, "kind": "all", "n": s["n"], "repaired": s["repaired"], "rate": s["rate"],
                     "backbone": s["backbone"]})
        rows += [{"policy": label, "kind": kind, "n": c["n"], "repaired": c["repaired"],
                  "rate": c["repaired"] / c["n"] if c["n"] else None, "backbone": s["backbone"]}
                 for kind, c in sorted(s["by_kind"].items())]
    return pd.DataFrame(rows, columns=["policy", "kind", "n", "repaired", "rate", "backbone"])


def repair_by_op(folders: dict, data: str | Path):
    """``{label: evaluate_repair folder}`` and the Stage II data folder -> one row per label and fault operator of the
    held-out faults (each folder's heldout.jsonl): n, repaired, rate, and ``seen``: whether Stage II trained on that
    operator (it has ``train`` examples in data/repairs.jsonl; unseen: an operator held out, ``heldout_ops``)."""
    import pandas as pd
    repairs = read_records(Path(data) / "repairs.jsonl")
    trained = set(repairs.loc[repairs["split"] == "train", "op"]) if not repairs.empty else set()
    rows = []
    for label, folder in folders.items():
        faults = read_records(Path(folder) / "heldout.jsonl")
        for op, g in (faults.groupby("op", sort=True) if not faults.empty else []):
            rows.append({"policy": label, "op": op, "seen": op in trained, "n": len(g),
                         "repaired": int(g["ok"].sum()), "rate": float(g["ok"].mean())})
    return pd.DataFrame(rows, columns=["policy", "op", "seen", "n", "repaired", "rate"])


def training_scalars(run_dir: str | Path, tags=None):
    """One row per logged scalar of every phase of a stage run (``phase``, ``tag``, ``step``, ``value``,
    ``source``), read from TRL's TensorBoard event files under ``<phase>/runs/``; tags as TensorBoard shows them
    (``train/loss``, ``train/rewards/task_delta/mean``, ...). ``tags``: keep only these."""
    import pandas as pd
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    run_dir = Path(run_dir)
    rows = []
    for phase_dir in sorted(p for p in run_dir.iterdir() if p.is_dir()) if run_dir.is_dir() else []:
        events = sorted({f.parent for f in (phase_dir / "runs").rglob("events.out.tfevents.*")})
        for folder in events:
            acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
            acc.Reload()
            for tag in acc.Tags().get("scalars", []):
                rows += [{"phase": phase_dir.name, "tag": tag, "step": e.step, "value": e.value,
                          "source": "tensorboard"} for e in acc.Scalars(tag)]
        history = phase_dir / "log_history.jsonl"
        if not events and history.is_file():     # report_to: none
            for h in (json.loads(line) for line in history.read_text().splitlines() if line.strip()):
                rows += [{"phase": phase_dir.name, "tag": f"train/{k}", "step": h.get("step"), "value": v,
                          "source": "log_history"} for k, v in h.items()
                         if k not in ("step", "epoch") and isinstance(v, (int, float))]
    df = pd.DataFrame(rows, columns=["phase", "tag", "step", "value", "source"])
    if tags is not None:
        df = df[df["tag"].isin(list(tags))]
    return df.drop_duplicates(["phase", "tag", "step"], keep="last").sort_values(["phase", "tag", "step"]) \
             .reset_index(drop=True)


def fig_curves(df, tags=None, title: str = ""):
    """A HoloViews layout, one panel per tag, one curve per phase (``label`` column when present: e.g. the stage)."""
    hv = S.hv()
    if tags is not None:
        df = df[df["tag"].isin(list(tags))]
    if df.empty:
        raise ConfigError("fig_curves: no logged scalar to draw (did the training run log with report_to?)")
    label = df["label"] if "label" in df else df["phase"]
    df = df.assign(curve=label)
    colors = S.colors(df["curve"])
    panels = []
    for tag, part in df.groupby("tag", sort=False):
        curves = []
        for name, g in part.groupby("curve", sort=False):     # points too: a one-step run draws no line
            g = g.sort_values("step")
            curves += [S.style(hv.Curve(g, "step", "value", label=str(name)), colors[name], width=2),
                       S.style(hv.Scatter(g, "step", "value", label=str(name)), colors[name])]
        panels.append(S.panel_opts(hv.Overlay(curves), f"{title} {tag}".strip(), "step", tag.split("/", 1)[-1]))
    return hv.Layout(panels).cols(2)


def candidate_channels(run_dir: str | Path):
    """Stage III: one row per sampled candidate from completions.jsonl, in sampling order (``index``): the four
    channel values (None: gated off), gate, validity, its reward and the incumbent's, whether it entered the frontier."""
    import pandas as pd
    path = Path(run_dir) / "completions.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
    rows = [{"index": i, "task_id": r.get("task_id"), **r["channels"], "gate": bool(r["gate"]),
             "valid": bool(r["outcome"].get("valid")), "reward": r["outcome"].get("reward"),
             "incumbent_reward": r["incumbent"].get("reward"), "kind": (r["outcome"].get("meta") or {}).get("kind"),
             "sha": r.get("sha"), "entered_frontier": bool((r.get("bank") or {}).get("entered_frontier"))}
            for i, r in enumerate(records)]
    return pd.DataFrame(rows)


def eval_table(run_dirs: dict, columns=None):
    """``{policy: folder}`` -> one row per policy from each folder's summary.json: ``VALIDITY_COLUMNS`` for
    jitlab.train.evaluate folders, ``EVAL_COLUMNS`` for JIT runs (or ``columns``)."""
    import pandas as pd
    rows = []
    for policy, run_dir in run_dirs.items():
        s = json.loads((Path(run_dir) / "summary.json").read_text())
        columns = columns or (VALIDITY_COLUMNS if "first_try_valid_rate" in s and "mode" not in s else EVAL_COLUMNS)
        rows.append({"policy": policy, **{k: s.get(k) for k in columns[1:]}})
    return pd.DataFrame(rows, columns=columns or VALIDITY_COLUMNS)


def _distinct_plans(tasks_jsonl: Path) -> int | None:
    """Distinct plans among a validity evaluation's replies (canonical plan text; None when none is one): a reply
    counts when it parses and is a plan of the library's options (``check_plan``; a JSON object with a role's
    parameters outside ``params: {role: {...}}`` is not one)."""
    plans = set()
    for r in read_records(tasks_jsonl).to_dict("records"):
        try:
            plan = parse_plan(str(r.get("reply") or ""))
            check_plan(plan)
        except PlanError:
            continue
        plans.add(plan_text(plan))
    return len(plans) or None


def _order(policy: str):
    return policy != "base", policy          # the untrained policy first, then stage1, stage2, stage3


def _policy_runs(out: Path) -> dict:
    """``{policy: RunRecord}`` (jitlab.compare.read_run) of the streaming JIT runs under ``out/streaming/``, in the
    closing table's order."""
    names = [p.name for p in (out / "streaming").glob("*") if (p / "summary.json").is_file() and not is_replaced(p.name)]
    return {name: read_run(out / "streaming" / name, name) for name in sorted(names, key=_order)}


def _streaming(run) -> dict:
    """A run's streaming columns from its finished episodes: n, successes, rate with its Wilson 95% interval,
    tokens per task."""
    eps = run.episodes
    n, k = len(eps), int(eps["success"].sum())
    lo, hi = wilson(k, n)
    return {"n_episodes": n, "n_success": k, "success_rate": k / n if n else None, "success_lo": lo, "success_hi": hi,
            "tokens_per_task": float(eps["tokens"].mean()) if n else None}


def closing_table(out: str | Path, compare_runs=()):
    """The pipeline's closing table, one row per evaluated policy (untrained ``base``, ``stage1``... in that order),
    then one per run of ``compare_runs`` (streaming JIT runs on the same split, e.g. the compose JIT's export; labelled
    by their folder's name, streaming columns only), each with its own n: first-try plan validity and distinct plans
    over the tasks its validity evaluation played (``n_validity``; validity/), streaming JIT success with its Wilson
    95% interval and tokens per task over its finished episodes (``n_episodes``; streaming/, the records the pairs of
    ``paired_table`` use), and for the policy trained with GRPO (stage3) its groups and the share with non-zero
    advantage (jitlab.train.evo.signal_share, from stage3/manifest.json)."""
    import pandas as pd
    out = Path(out)
    runs = _policy_runs(out)
    rows = []
    validated = {p.parent.name for p in (out / "validity").glob("*/summary.json") if not is_replaced(p.parent.name)}
    for policy in sorted(validated | set(runs), key=_order):
        row = {"policy": policy}
        validity = out / "validity" / policy
        if (validity / "summary.json").is_file():
            v = json.loads((validity / "summary.json").read_text())
            row.update(first_try_valid_rate=v.get("first_try_valid_rate"), n_validity=v.get("n"),
                       distinct_plans=_distinct_plans(validity / "tasks.jsonl"))
        if policy in runs:
            row.update(_streaming(runs[policy]))
        manifest = out / policy / "manifest.json"
        groups = (json.loads(manifest.read_text()).get("summary") or {}).get("groups") if manifest.is_file() else None
        if groups:
            row.update(grpo_groups=groups["groups"], grpo_nonzero_advantage_share=groups["share"])
        rows.append(row)
    rows += [{"policy": run.label, **_streaming(run)} for run in map(read_run, compare_runs)]
    return pd.DataFrame(rows, columns=CLOSING_COLUMNS)


def paired_table(out: str | Path, compare_runs=()):
    """The paired comparisons of the closing table's streaming rows, B against A (:data:`PAIRED_COLUMNS`): each trained
    policy (B) against ``base`` (A), then the final policy (the last of the pipeline's rows) against each run of
    ``compare_runs`` (A). jitlab.compare's statistics over the tasks both rows finished (``n_tasks``: a policy may
    play a prefix of the split, the pipeline's ``eval_limits``): wins, losses, the exact McNemar p, the mean per-task
    Δ tokens (B - A). A pair jitlab.compare refuses (another suite or split, a budget that bound an episode) says why
    in ``note`` instead of numbers; a differing budget that bound no episode is said there too."""
    import pandas as pd
    runs = _policy_runs(Path(out))
    pairs = [(runs["base"], run) for policy, run in runs.items() if policy != "base"] if "base" in runs else []
    if runs:
        final = list(runs.values())[-1]
        pairs += [(other, final) for other in map(read_run, compare_runs)]
    rows = []
    for a, b in pairs:
        try:
            row = compare_pair(a, b, common=True)[0]
            rows.append({**row, "note": row["budgets"]})
        except ConfigError as exc:      # not comparable: the row says why
            rows.append({"a": a.label, "b": b.label, "note": str(exc)})
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS)


def pipeline_figures(out: str | Path, compare_runs=()) -> list[str]:
    """The pipeline's figures under ``out/figures``: the loss curves of every trained stage, Stage III's reward
    channels per step, the closing table and its pairs (``closing_table``, ``paired_table``, with ``compare_runs``) and
    the evaluation tables (markdown + CSV); each listed in figures/README.md."""
    import pandas as pd

    out = Path(out)
    fig_dir = out / "figures"
    command = f"jitlab train pipeline --out {out}"
    written = []
    frames = [training_scalars(out / s).assign(label=lambda d, s=s: s + "/" + d["phase"])
              for s in ("stage1", "stage2", "stage3") if (out / s).is_dir()]
    curves = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    losses = curves[curves["tag"] == "train/loss"] if not curves.empty else curves
    if not losses.empty:
        written += save_figure(fig_curves(losses), fig_dir, "training_loss", "Training loss per stage and phase",
                               command, "TRL's train/loss as logged to TensorBoard, per optimizer step.")
    rewards = curves[curves["tag"].str.startswith("train/rewards/") & curves["tag"].str.endswith("/mean")] \
        if not curves.empty else curves
    if not rewards.empty:
        written += save_figure(fig_curves(rewards), fig_dir, "stage3_channels", "Stage III reward channels per step",
                               command, "Mean of each Evo-GDPO channel over the step's group (TRL's "
                               "rewards/<channel>/mean); latency/cost only over gated-in candidates.")
    closing, pairs = closing_table(out, compare_runs), paired_table(out, compare_runs)
    if not closing.empty:
        paths = write_table(closing, fig_dir / "closing")
        register_figure(fig_dir, "closing", paths, "Untrained vs Stage I vs I+II vs I+II+III", command,
                        "Plan validity and distinct plans on the held-out tasks a policy played (n_validity), streaming "
                        "JIT success with its Wilson 95% interval and tokens per task (n_episodes), the share of Stage "
                        "III's GRPO groups with non-zero advantage; compare runs below the policies.", numbers=closing)
        written += paths
    if not pairs.empty:
        paths = write_table(pairs, fig_dir / "closing_pairs")
        register_figure(fig_dir, "closing_pairs", paths, "Paired: each trained policy vs the untrained one, the final "
                        "policy vs each compare run", command, "B against A on the tasks both played (n_tasks): wins, "
                        "losses, exact McNemar p, mean Δ tokens per task (B - A).", numbers=pairs)
        written += paths
    for mode in ("validity", "streaming"):
        runs = {p.name: p for p in sorted((out / mode).glob("*")) if (p / "summary.json").is_file()}
        if runs:
            table = eval_table(runs)
            paths = write_table(table, fig_dir / f"eval_{mode}")
            register_figure(fig_dir, f"eval_{mode}", paths, f"Held-out evaluation ({mode} JIT) per policy", command,
                            numbers=table)
            written += paths
    return [str(Path(p).relative_to(out)) for p in written]
