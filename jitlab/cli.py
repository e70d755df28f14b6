"""The ``jitlab`` command. Subcommands import their heavy dependencies lazily, so
``jitlab --help`` stays fast (no torch, transformers or litellm import).

    jitlab run --suite textworld --harness react --backbone embedded --limit 5
    jitlab show runs/textworld-react-embedded
    jitlab suites | jitlab harnesses
    jitlab harnesses show resum | jitlab harnesses export resum --out my_resum
"""
from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_spend_arguments", "backbone_options", "build_parser", "main"]


def backbone_options(args) -> dict:
    """``--backbone-option KEY=VALUE`` (repeatable, JSON values) plus ``--api-base`` as a dict."""
    out = {}
    for item in args.backbone_option or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--backbone-option expects key=value, got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    if args.api_base:
        out["api_base"] = args.api_base
    return out


def add_spend_arguments(p) -> None:
    """``--max-cost`` and ``--max-tokens-total``: run-level caps (run, jit, batch)."""
    p.add_argument("--max-cost", type=float, metavar="USD",
                   help="stop starting episodes once the run's real backbone spend reaches USD; rerun with more to resume")
    p.add_argument("--max-tokens-total", type=int, metavar="N", help="the same cap on backbone tokens")


def cmd_run(args) -> int:
    from pathlib import Path

    from jitlab.runner import RunConfig, default_out, run
    from jitlab.store import summarize
    options = backbone_options(args)
    cfg = RunConfig(suite=args.suite, harness=args.harness, backbone=args.backbone, backbone_options=options,
                    split=args.split, family=args.family, limit=args.limit, seed=args.seed,
                    max_steps=args.max_steps, max_tokens=args.max_tokens, max_wall_s=args.max_wall_s,
                    isolation=args.isolation, allow_unisolated=args.allow_unisolated, cache=not args.no_cache,
                    out=args.out, concurrency=args.concurrency, new_run=args.new_run, max_cost=args.max_cost,
                    max_tokens_total=args.max_tokens_total)
    print(f"jitlab run: {cfg.harness} on {cfg.suite}/{cfg.split} with {cfg.backbone}", flush=True)
    from jitlab.runtime import SpendCapReached
    try:
        out = run(cfg)
    except SpendCapReached:
        if (out := Path(cfg.out) if cfg.out else default_out(cfg)).is_dir():
            _print_summary(summarize(out), out)
        raise
    summary = summarize(out)
    _print_summary(summary, out)
    return _unfinished(summary, out)


def _unfinished(summary: dict, out) -> int:
    """1 (and why, on stderr) when some task has no finished episode after the retries, e.g. every attempt
    was an infra_error; else 0."""
    if not summary["n_tasks_unfinished"]:
        return 0
    from jitlab.store import FINAL, load
    eps = load(out)["episodes"]
    last = eps[~eps["status"].isin(FINAL)].sort_values("id").groupby("task_id").tail(1)
    counts = ", ".join(f"{n} {k}" for k, n in last["status"].value_counts().items())
    error = str(last["error"].iloc[-1] or "")[:300] if len(last) else ""
    print(f"jitlab: error: {summary['n_tasks_unfinished']} task(s) have no finished episode ({counts}); last error: "
          f"{error or '(none)'}. Fix the cause and rerun the same command: finished episodes are kept, these are "
          "retried.", file=sys.stderr)
    return 1


def _print_summary(s: dict, out) -> None:
    print(f"\n{out}: {s['n_episodes']} episodes  success_rate={s['success_rate']:.2f}  "
          f"mean_reward={s['mean_reward']:.2f}  tokens/task={s['tokens_per_task']:.0f}  "
          f"cost/task=${s['cost_per_task']:.6f}  tool_calls/task={s['tool_calls_per_task']:.1f}  "
          f"wall_s/task={s['wall_s_per_task']:.1f}")


def cmd_show(args) -> int:
    import pandas as pd

    from jitlab.store import load, summarize
    rows = []
    for run_dir in args.run_dirs:
        summary = summarize(run_dir, write=False)  # a read-only command: summary.json is left as it is
        if len(args.run_dirs) == 1:
            eps = load(run_dir)["episodes"]
            cols = ["task_id", "attempt", "status", "success", "reward", "steps", "tokens", "cost", "tool_calls", "wall_s"]
            print(eps[cols].to_string(index=False))
        rows.append({"run": str(run_dir), **{k: summary[k] for k in (
            "harness", "backbone", "n_episodes", "success_rate", "mean_reward", "tokens_per_task",
            "cost_per_task", "tool_calls_per_task", "wall_s_per_task")}})
    print()
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    return 0


def cmd_suites(args) -> int:
    from jitlab.envs.base import SUITES, get_suite
    for name in sorted(SUITES):
        try:
            suite = get_suite(name)
            sizes = {split: len(suite.tasks(split)) for split in suite.splits}
            print(f"{name:<10} families: {', '.join(suite.families)}")
            print(f"{'':<10} splits: {', '.join(f'{k}={v}' for k, v in sizes.items())}")
        except Exception as exc:  # one broken suite must not hide the others
            print(f"{name:<10} unavailable: {exc}")
    return 0


def cmd_harnesses(args) -> int:
    action = getattr(args, "harness_action", None)
    if action == "show":
        from jitlab.resolve import resolve_folder
        files = resolve_folder(args.name)
        for name, text in files.items():
            print(f"# ==== {name} ====\n{text.rstrip()}\n")
        return 0
    if action == "export":
        from pathlib import Path

        from jitlab.errors import ConfigError
        from jitlab.resolve import resolve_folder
        files, out = resolve_folder(args.name), Path(args.out)
        if out.exists() and any(out.iterdir()):
            raise ConfigError(f"--out {out} exists and is not empty; choose a new folder")
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out / name).write_text(text)
        print(f"wrote {len(files)} files of {args.name} (resolved) to {out}")
        return 0
    if action == "regenerate":
        from jitlab.resolve import regenerate_seeds
        changed = regenerate_seeds(check=args.check)
        verb = "out of date" if args.check else "rewritten"
        print(f"seed_bank/: {', '.join(changed) + ' ' + verb if changed else 'up to date'}")
        return 1 if (args.check and changed) else 0
    from jitlab.harness import load_harness, seed_names
    for name in seed_names():
        desc = load_harness(name).description
        mods = desc.get("modules", {})
        try:
            from jitlab.anatomy import summary_row
            mods = summary_row(name)
        except ImportError:
            pass
        tag = " (baseline)" if desc.get("baseline") else ""
        print(f"{name + tag:<22} M={mods.get('M')} | P={mods.get('P')} | F={mods.get('F')} | A={mods.get('A')}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jitlab", description="Research workbench for LLM agent harnesses.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run a harness on a suite (resumable)")
    p.add_argument("--suite", required=True)
    p.add_argument("--split", default="dev")
    p.add_argument("--family")
    p.add_argument("--harness", default="react", help="seed name, 'oracle' or a harness folder path")
    p.add_argument("--backbone", default="embedded")
    p.add_argument("--backbone-option", action="append", metavar="KEY=VALUE", help="backend option, repeatable")
    p.add_argument("--api-base", help="OpenAI-compatible server URL for litellm backbones")
    p.add_argument("--limit", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int)
    p.add_argument("--max-tokens", type=int, default=60_000)
    p.add_argument("--max-wall-s", type=float, default=900.0)
    p.add_argument("--isolation", choices=["auto", "sandbox", "none"], default="auto")
    p.add_argument("--allow-unisolated", action="store_true", help="DANGEROUS: run untrusted code without bubblewrap")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--out")
    p.add_argument("--new-run", action="store_true", help="start over even if the config changed")
    add_spend_arguments(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("show", help="summary table of one or more run directories")
    p.add_argument("run_dirs", nargs="+")
    p.set_defaults(func=cmd_show)

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

    from jitlab.cli_bank import add_bank_commands
    from jitlab.cli_jit import add_jit_commands
    from jitlab.cli_viz import add_viz_commands
    add_jit_commands(sub)
    add_bank_commands(sub)
    add_viz_commands(sub)
    from jitlab.train.cli import add_train_commands
    add_train_commands(sub)
    return parser


def _oserror_line(exc: OSError) -> str:
    """One line for an OSError nothing more precise caught: the error, the file, what to do."""
    import errno
    where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f) or "a file jitlab read or wrote"
    todo = {errno.ENOSPC: "free space, then rerun the same command (a run resumes where it stopped)",
            errno.EACCES: "check its permissions or choose another path", errno.EPERM: "choose another path",
            errno.EROFS: "choose a path on a writable file system", errno.EEXIST: "something is in the way; "
            "choose another path", errno.ENOTDIR: "a parent of it is a file; choose "
            "another path", errno.EISDIR: "it is a directory; pass a file", errno.ENOENT: "check the path"}
    return f"{where}: {exc.strerror or exc}" + (f"; {todo[exc.errno]}" if exc.errno in todo else "")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import os
    import sqlite3
    import warnings

    from jitlab.errors import JitlabError
    shown = warnings.formatwarning  # jitlab's warnings (a cache or bank moved aside) as one line each
    warnings.formatwarning = lambda message, category, *rest, **kw: f"jitlab: warning: {message}\n"
    try:
        return args.func(args)
    except JitlabError as exc:
        print(f"jitlab: error: {exc}", file=sys.stderr)
        return 2
    # Backstop for user mistakes no precise check caught (a file where a folder goes, a full disk, a damaged
    # database): one line, not a traceback. JITLAB_DEBUG=1 shows the traceback.
    except (OSError, sqlite3.DatabaseError) as exc:
        if os.environ.get("JITLAB_DEBUG"):
            raise
        line = _oserror_line(exc) if isinstance(exc, OSError) else (
            f"an SQLite file jitlab read or wrote failed ({exc}); if it is a run's run.sqlite, rerun with --new-run "
            "(the old file is kept beside it); if it is the replay cache, delete $JITLAB_HOME/replay.sqlite")
        print(f"jitlab: error: {line} (JITLAB_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 2
    finally:
        warnings.formatwarning = shown


if __name__ == "__main__":
    sys.exit(main())
