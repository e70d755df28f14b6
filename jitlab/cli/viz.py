"""The read-only visual subcommands of ``jitlab``: ``batch``, ``dash``, ``figures``.

    jitlab figures --runs runs/ --out figures/                    # every figure the runs support + README, cards
    jitlab dash runs/tw-streaming [more runs] [--live] [--port N] [--no-show]
    jitlab batch notebooks/05_static_vs_streaming.ipynb --grid params.yaml --out batches/05 [--parallel N]

``add_viz_commands(subparsers)`` registers them on jitlab's argparse subparsers (jitlab/cli/__init__.py);
``batch``'s options are generated from :class:`jitlab.batch.BatchConfig`.
Heavy libraries (holoviews, panel, papermill) are imported inside the command functions only.
"""
from __future__ import annotations

import shlex

from jitlab.batch import BatchConfig, run_batch
from jitlab.cli.options import add_config_arguments, config_from_args
from jitlab.store import make_dir
from jitlab.viz.dash.server import add_arguments, serve  # argparse only; panel is imported when serving

__all__ = ["add_viz_commands", "cmd_batch", "cmd_dash", "cmd_figures"]


def cmd_figures(args) -> int:
    from jitlab.viz.figures import make_figures
    make_dir(args.out, "--out")  # before any work: --out naming a file is a one-line error
    command = ("jitlab figures --runs " + " ".join(shlex.quote(r) for r in args.runs)
               + f" --out {shlex.quote(args.out)}" + (f" --window {args.window}" if args.window != 5 else "")
               + (f" --baseline {shlex.quote(args.baseline)}" if args.baseline != "react" else "")
               + (" --inline-js" if args.inline_js else ""))
    entries = make_figures(args.runs, args.out, command=command, window=args.window, baseline=args.baseline,
                           resources="inline" if args.inline_js else "cdn")
    from jitlab.card import format_card, read_card
    from jitlab.viz.figures import expand_runs
    print("harness cards of the runs drawn:")
    for run in expand_runs(args.runs):
        print(format_card(read_card(run), str(run)))
    for e in entries:
        print(f"  {e['stem']:<28} {', '.join(e['files'])}")
    print(f"jitlab figures: {len(entries)} figures/tables in {args.out}; listed in {args.out}/README.md")
    return 0


def cmd_dash(args) -> int:
    serve(args.run_dirs, port=args.port, show=not args.no_show, live=args.live, poll_s=args.poll_s,
          window=args.window, trust_code=args.trust_harness_code)
    return 0


def cmd_batch(args) -> int:
    manifest = run_batch(config_from_args(BatchConfig, args))
    s = manifest["summary"]
    print(f"jitlab batch: {s['ok']} ok ({s['skipped']} skipped as already ok), {s['failed']} failed of "
          f"{s['total']}; manifest: {args.out}/manifest.json")
    return 0 if s["failed"] == 0 else 1


def add_viz_commands(subparsers) -> None:
    """Register ``figures``, ``dash`` and ``batch`` on ``subparsers`` (from ``add_subparsers``)."""
    p = subparsers.add_parser("figures", help="regenerate the papers' figures from run directories")
    p.add_argument("--runs", "--results", dest="runs", nargs="+", required=True, metavar="DIR",
                   help="run directories, their exports (results/<name>/, `jitlab export`) or folders of either")
    p.add_argument("--out", default="figures", help="output folder (README.md there lists every figure)")
    p.add_argument("--window", type=int, default=5, help="tasks in the rolling mean/std window (Figure 6)")
    p.add_argument("--baseline", default="react", help="fixed harness JIT is compared with (Figure 5)")
    p.add_argument("--inline-js", action="store_true",
                   help="embed BokehJS in the HTML figures (opens offline; ~3 MB each instead of a CDN link)")
    p.set_defaults(func=cmd_figures)

    p = subparsers.add_parser("dash", help="serve the replay / comparison dashboards on 127.0.0.1")
    add_arguments(p)
    p.set_defaults(func=cmd_dash)

    p = subparsers.add_parser("batch", help="run a notebook once per parameter combination (papermill)")
    add_config_arguments(p, BatchConfig, required=("grid", "out"), positional=("notebook",))
    p.set_defaults(func=cmd_batch)
