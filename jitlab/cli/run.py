"""``jitlab run | show | export | suites | harnesses``: run a harness on a suite, read runs back, export them compactly
(to commit under results/), list suites and seeds.

    jitlab run --suite textworld --harness react --limit 5      # the default backbone; --backbone embedded: hf float32
    jitlab show runs/textworld-react-openvino_embedded
    jitlab export runs/textworld-react-openvino_embedded --out results/tw-react/      # jitlab/export.py
    jitlab suites | jitlab harnesses
    jitlab harnesses show resum | jitlab harnesses export resum --out my_resum

``run``'s options are generated from :class:`jitlab.runner.RunConfig` (jitlab/cli/options.py).
"""
from __future__ import annotations

import json
from pathlib import Path

from jitlab.cli.options import add_config_arguments, config_from_args, unfinished
from jitlab.compliance import compliance_by_step, compliance_summary, steps_compliance
from jitlab.envs.base import MIX_PREFIX, SUITES, get_suite
from jitlab.envs.mix import source_of
from jitlab.errors import ConfigError
from jitlab.harness import case_study_names, load_harness, regenerate_seeds, resolve_folder, seed_names
from jitlab.runner import RunConfig, default_out, run
from jitlab.runtime import SpendCapReached
from jitlab.store import DB_NAME, EXPORT_MARKER, load, summarize
from jitlab.timing import time_breakdown

__all__ = ["add_run_commands", "cmd_export", "cmd_harnesses", "cmd_run", "cmd_show", "cmd_suites"]


def cmd_run(args) -> int:
    cfg = config_from_args(RunConfig, args)
    print(f"jitlab run: {cfg.harness} on {cfg.suite}/{cfg.split} with {cfg.backbone}", flush=True)
    try:
        out = run(cfg)
    except SpendCapReached:
        if (out := Path(cfg.out) if cfg.out else default_out(cfg)).is_dir():
            _print_summary(summarize(out), out)
        raise
    summary = summarize(out)
    _print_summary(summary, out)
    return unfinished(summary, out)


def _print_summary(s: dict, out) -> None:
    lo, hi = s["success_rate_wilson"]
    print(f"\n{out}: {s['n_episodes']} episodes  success_rate={s['success_rate']:.2f} (Wilson 95% {lo:.2f}–{hi:.2f})  "
          f"mean_reward={s['mean_reward']:.2f}  tokens/task={s['tokens_per_task']:.0f}  "
          f"cost/task=${s['cost_per_task']:.6f}  tool_calls/task={s['tool_calls_per_task']:.1f}  "
          f"wall_s/task={s['wall_s_per_task']:.1f}")


def _repeat_folder(folder) -> tuple[list, dict] | None:
    """``(run directories, summary)`` of a ``jitlab jit --repeat`` folder (no run.sqlite of its own; its summary.json
    lists the repeats' runs, each a subfolder of it), else None."""
    folder = Path(folder)
    if (folder / DB_NAME).exists() or (folder / EXPORT_MARKER).exists() or not (folder / "summary.json").is_file():
        return None
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    runs = summary.get("runs") if isinstance(summary, dict) else None
    if not isinstance(runs, list) or not runs:
        return None
    return [folder / Path(str(r)).name for r in runs], summary


def cmd_show(args) -> int:
    import pandas as pd

    repeats = {}   # a jit --repeat folder: its repeats' runs are shown, then its reliability
    run_dirs = []
    for run_dir in args.run_dirs:
        found = _repeat_folder(run_dir)
        if found:
            repeats[run_dir] = found[1]
        run_dirs += found[0] if found else [run_dir]
    args.run_dirs = run_dirs
    rows, summaries = [], {}
    for run_dir in args.run_dirs:
        summary = summaries[run_dir] = summarize(run_dir, write=False)  # read-only: summary.json is left as it is
        if len(args.run_dirs) == 1:
            eps = load(run_dir)["episodes"]
            cols = ["task_id", "attempt", "status", "success", "reward", "steps", "tokens", "cost", "tool_calls", "wall_s"]
            if eps["seed"].nunique() > 1:  # repeats (--repeat): which seed each row is
                cols.insert(1, "seed")
            if _is_mix(summary):  # each task's source suite and family (<suite>/<family>)
                cols.insert(1, "family")
            print(eps[cols].to_string(index=False))
        rows.append({"run": str(run_dir), **{k: summary[k] for k in (
            "harness", "backbone", "n_episodes", "success_rate", "mean_reward", "tokens_per_task",
            "cost_per_task", "tool_calls_per_task", "wall_s_per_task")},
            "prefix_reuse": (summary.get("prefix_reuse") or {}).get("share")})
    print()
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.4g}", na_rep="-"))
    _print_intervals(summaries)
    _print_prefix_reuse(summaries)
    for run_dir in args.run_dirs:
        _print_repeats(summaries[run_dir], run_dir)
        if _is_mix(summaries[run_dir]):
            _print_families(run_dir)
    for folder, summary in repeats.items():  # pass@1 over the repeats, pass^k: from the folder's summary.json
        _print_repeats(summary, folder)
    if args.compliance:
        for run_dir in args.run_dirs:
            _print_compliance(run_dir)
    if args.time:
        for run_dir in args.run_dirs:
            _print_time(run_dir)
    if args.mechanisms:
        from jitlab.viz.runs import class_counts, mechanism_usage
        for run_dir in args.run_dirs:
            tasks, mech = mechanism_usage(run_dir)
            slots = ["stream_index", "task_id", "harness_name", "M", "P", "F", "A", "H", "success"]
            print(f"\nmechanisms per task in {run_dir} (the library class of each slot of the harness that ran; "
                  "H none: no hooks.py)")
            print(tasks[slots].to_string(index=False, na_rep="-"))
            print(f"\nlibrary classes over {run_dir} (tasks whose harness carried each, their share and success)")
            print(class_counts(tasks).to_string(index=False, float_format=lambda x: f"{x:.2f}", na_rep="-"))
            print(f"\ncase-study mechanisms in {run_dir} (tasks whose harness used each; success and reward when "
                  "chosen vs not; candidates containing it)")
            print(mech.to_string(index=False, float_format=lambda x: f"{x:.3g}", na_rep="-"))
    return 0


def _print_intervals(summaries: dict) -> None:
    """The 95% intervals of each run's summary (jitlab.stats.run_intervals): success, reward, tokens per task."""
    import pandas as pd

    from jitlab.viz.tables import RATE_HEADER, mean_cell, rate_cell
    rows = []
    for run_dir, s in summaries.items():
        rows.append({"run": str(run_dir), RATE_HEADER: rate_cell(s["n_success"], s["n_episodes"]),
                     "mean reward (bootstrap 95%)": mean_cell(s["mean_reward"], *s["mean_reward_ci"])
                     if s["mean_reward_ci"] else "–",   # no finished episode: no interval
                     "tokens/task (bootstrap 95%)": mean_cell(s["tokens_per_task"], *s["tokens_per_task_ci"])
                     if s["tokens_per_task_ci"] else "–"})
    print(f"\n95% intervals ({s['interval_method']}):")
    print(pd.DataFrame(rows).to_string(index=False))
def _print_prefix_reuse(summaries: dict) -> None:
    """Each run's prefix-reuse share by call kind (jitlab.store.prefix_reuse), and the calls not measured in tokens."""
    print("\nprefix reuse (prompt tokens from the backbone's prefix cache / prompt tokens read; score calls: prompt "
          "and candidates):")
    for run_dir, s in summaries.items():
        r = s.get("prefix_reuse")
        if r is None:
            print(f"  {run_dir}: no backbone call")
            continue
        kinds = [f"{k} {v['share']:.2f} of {v['prompt_tokens']:,} tokens ({v['calls']} calls)" if v["share"] is not None
                 else f"{k} - ({v['calls']} calls)" for k, v in r["by_kind"].items()]
        unmeasured = (f"; not measured: {r['unmeasured_calls']} calls, {r['unmeasured_prompt_tokens']:,} prompt tokens "
                      "(score calls counted in words by a backbone without a tokenizer, or records from before "
                      "schema 2)" if r["unmeasured_calls"] else "")
        print(f"  {run_dir}: {', '.join(kinds) or 'no call measured in tokens'}{unmeasured}")


def _is_mix(summary: dict) -> bool:
    return str(summary.get("suite") or "").startswith(MIX_PREFIX)


def _print_families(run_dir) -> None:
    """A mix's finished episodes by source suite and family (jitlab/envs/mix.py): tasks, successes, tokens per task."""
    eps = load(run_dir)["episodes"]
    done = eps[eps["final"]]
    parts = done["family"].map(source_of)
    by = done.assign(suite=parts.str[0], family=parts.str[1]).groupby(["suite", "family"], sort=False)
    table = by.agg(tasks=("task_id", "nunique"), episodes=("id", "size"), success=("success", "sum"),
                   tokens_per_task=("tokens", "mean")).reset_index()
    print(f"\nby source suite and family in {run_dir}:")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.0f}"))


def _print_repeats(summary: dict, run_dir) -> None:
    """The reliability line of a run with repeats (``--repeat K``; jitlab/repeats.py); nothing otherwise."""
    r = summary.get("repeats")
    if not r:
        return
    lo, hi = r["pass_at_1_wilson"]
    print(f"\nrepeats in {run_dir}: k={r['k']} (seeds {r['seeds'][0]}..{r['seeds'][-1]}, varies: "
          f"{', '.join(r['varies'])}) over {r['n_tasks']} tasks  pass@1={r['pass_at_1']:.3f} [Wilson {lo:.3f}, {hi:.3f}]"
          f"  pass^{r['k']}={r['pass_hat_k']:.3f}  tasks mixed={r['tasks_mixed']}  per-task var: success "
          f"{r['success_var_per_task']:.3f}, reward {r['reward_var_per_task']:.3f}")


def _print_compliance(run_dir) -> None:
    """The compliance shares of a run, overall and by step index (jitlab/compliance.py)."""
    frames = load(run_dir)
    steps, episodes = frames["steps"], frames["episodes"]
    overall = compliance_summary(steps, episodes)
    if overall is None:
        print(f"\ncompliance in {run_dir}: not recorded (a run from before per-step compliance records)")
        return
    shares = ", ".join(f"{k}={v:.2f}" for k, v in overall.items() if isinstance(v, float))
    print(f"\ncompliance in {run_dir} ({overall['n_steps']} steps): {shares}")
    print(compliance_by_step(steps, episodes).to_string(index=False, float_format=lambda x: f"{x:.2f}", na_rep="-"))
    gaps = steps_compliance(steps, episodes)["gap"].dropna()
    if len(gaps):  # the likelihood choice's lead over the runner-up: what a margin would cut
        q = gaps.quantile([0.25, 0.5, 0.75])
        print(f"backbone's lead over the runner-up ({len(gaps)} scored steps): quartiles {q.iloc[0]:.2f} / "
              f"{q.iloc[1]:.2f} / {q.iloc[2]:.2f}; under 0.5: {(gaps < 0.5).mean():.2f}, under 1.0: "
              f"{(gaps < 1.0).mean():.2f}")


def _print_time(run_dir) -> None:
    """Where a run's episode time went (jitlab/timing.py)."""
    episodes = load(run_dir)["episodes"]
    table = time_breakdown(episodes)
    if table is None:
        print(f"\ntime in {run_dir}: not recorded (a run from before the time breakdown)")
        return
    print(f"\ntime in {run_dir} (episode-seconds over {len(episodes)} episode rows; concurrent episodes overlap)")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}", na_rep="-"))


def cmd_export(args) -> int:
    from jitlab.export import export_runs
    written = export_runs(args.runs, args.out)
    total = 0
    for folder in written:
        size = sum(f.stat().st_size for f in folder.iterdir())
        total += size
        print(f"  {folder}  {size / 1e3:.0f} kB")
    print(f"jitlab export: {len(written)} run(s) in {args.out} ({total / 1e6:.2f} MB); "
          f"`jitlab figures --runs {args.out}` draws from them")
    return 0


def cmd_suites(args) -> int:
    for name in sorted(SUITES):
        try:
            suite = get_suite(name)
            sizes = {split: len(suite.tasks(split)) for split in suite.splits}
            print(f"{name:<10} families: {', '.join(suite.families)}")
            print(f"{'':<10} splits: {', '.join(f'{k}={v}' for k, v in sizes.items())}")
        except Exception as exc:  # one broken suite must not hide the others
            print(f"{name:<10} unavailable: {exc}")
    print(f"{MIX_PREFIX + '...':<10} a mixed stream: mix:<a>+<b>[@shuffle seed] or mix:<spec.yaml> (jitlab/envs/mix.py)")
    return 0


def cmd_harnesses(args) -> int:
    action = getattr(args, "harness_action", None)
    if action == "show":
        files = resolve_folder(args.name)
        for name, text in files.items():
            print(f"# ==== {name} ====\n{text.rstrip()}\n")
        return 0
    if action == "export":
        files, out = resolve_folder(args.name), Path(args.out)
        if out.exists() and any(out.iterdir()):
            raise ConfigError(f"--out {out} exists and is not empty; choose a new folder")
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out / name).write_text(text)
        print(f"wrote {len(files)} files of {args.name} (resolved) to {out}")
        return 0
    if action == "regenerate":
        changed = regenerate_seeds(check=args.check)
        verb = "out of date" if args.check else "rewritten"
        print(f"seed_bank/: {', '.join(changed) + ' ' + verb if changed else 'up to date'}")
        return 1 if (args.check and changed) else 0
    for name in seed_names() + case_study_names():  # the case studies after the seeds (they are not in B0)
        desc = load_harness(name).description
        mods = desc.get("modules", {})
        try:
            from jitlab.viz.anatomy_table import summary_row
            mods = summary_row(name)
        except ImportError:
            pass
        tag = " (baseline)" if desc.get("baseline") else ""
        print(f"{name + tag:<24} M={mods.get('M')} | P={mods.get('P')} | F={mods.get('F')} | A={mods.get('A')}")
    return 0


def add_run_commands(sub) -> None:
    """Register ``run``, ``show``, ``suites`` and ``harnesses`` on the ``jitlab`` subparsers object."""
    p = sub.add_parser("run", help="run a harness on a suite (resumable)")
    add_config_arguments(p, RunConfig, required=("suite",))
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("show", help="summary table of one or more run directories")
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--compliance", action="store_true", help="also per-step compliance: shares of replies that "
                   "parsed, named an admissible action, were changed by realisation or a hook, by step index")
    p.add_argument("--mechanisms", action="store_true", help="also the mechanisms the run's harnesses carried: per "
                   "task the library class of each slot M/P/F/A/H, the tasks that carried each class, and the "
                   "case-study mechanisms with success when chosen vs not (jitlab.viz.runs.mechanism_usage)")
    p.add_argument("--time", action="store_true", help="also where the episodes' time went: model compute, queue "
                   "for the model, backbone overhead, harness code, sandbox, environment, bookkeeping (jitlab/timing.py)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("export", help="compact export of run directories (summary, episodes, per-call aggregates) to commit")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories or folders of them")
    p.add_argument("--out", required=True, help="export folder, e.g. results/<name>/ (each run in a subfolder)")
    p.set_defaults(func=cmd_export)

    sub.add_parser("suites", help="list suites, families and split sizes").set_defaults(func=cmd_suites)
    p = sub.add_parser("harnesses", help="list seed harnesses with their M/P/F/A; show/export resolved source")
    p.set_defaults(func=cmd_harnesses)
    hsub = p.add_subparsers(dest="harness_action")
    h = hsub.add_parser("show", help="print a harness's resolved source (library code it uses written out)")
    h.add_argument("name", help="seed name or harness folder")
    h = hsub.add_parser("export", help="write a harness's resolved, self-contained folder")
    h.add_argument("name", help="seed name or harness folder")
    h.add_argument("--out", required=True, help="new (or empty) folder to write")
    h = hsub.add_parser("regenerate", help="rewrite seed_bank/ from jitlab/seeds/ and the module library")
    h.add_argument("--check", action="store_true", help="write nothing; exit 1 when seed_bank/ is out of date")
