"""``jitlab compare``: a paired comparison of runs on the same tasks and seeds (jitlab/compare.py), read-only;
``jitlab gap``: the four rows of one harness vs a harness per task (jitlab/gap.py), read-only.

    jitlab compare results/full-budget-textworld-test/textworld-react results/full-budget-textworld-test/textworld-aorchestra
    jitlab compare RUN_A RUN_B RUN_C --out runs/compare-tw      # + compare.md/.csv, flips.csv, compare.png/.html
    jitlab gap --dev DEV_RUN... --test TEST_RUN... --jit JIT_RUN... --out results/gap   # + gap.md, rows.csv, ...

Prints each run's harness card, then one row per run after the first against the first (A): wins/losses/ties,
the exact McNemar p-value of success, Δ reward and Δ tokens with paired bootstrap 95% intervals, the flipped tasks.
"""
from __future__ import annotations

from jitlab.store import make_dir

__all__ = ["add_compare_commands", "cmd_compare", "cmd_gap"]


def cmd_compare(args) -> int:
    from jitlab.card import format_card
    from jitlab.compare import compare_runs
    if args.out:
        make_dir(args.out, "--out")  # before any work: --out naming a file is a one-line error
    table, flips, runs = compare_runs(args.runs, level=args.level, common=args.common)
    for r in runs:
        print(format_card(r.card, r.label))
    from jitlab.viz.compare import compare_markdown, write_comparison
    counts = sorted(set(table["n_tasks"]))   # with --common each pair has its own count (the table's tasks column)
    on = f"{counts[0]} task/seed pairs" if len(counts) == 1 else "the task/seed pairs of each row (tasks)"
    print(f"\npaired on {on} (B vs A = {runs[0].label}; McNemar exact, "
          f"two-sided; Δ = B − A with {args.level:.0%} paired bootstrap intervals):\n")
    for other in runs[1:] if args.common else ():
        ka, kb = set(runs[0].episodes.index), set(other.episodes.index)
        if ka != kb:
            print(f"--common: {other.label} vs {runs[0].label} on the {len(ka & kb)} pairs both finished; left out "
                  f"{len(ka - kb)} only in {runs[0].label}, {len(kb - ka)} only in {other.label}")
    for _, row in table[table["budgets"] != ""].iterrows():   # differing budgets that stopped no episode
        print(f"budgets: {row['b']} vs {row['a']}: {row['budgets']}")
    print(compare_markdown(table, args.level))
    if args.out:
        written = write_comparison(table, flips, runs, args.out, figure=not args.no_figure, level=args.level)
        print(f"\njitlab compare: {', '.join(p.name for p in written)} in {args.out}")
    return 0


def cmd_gap(args) -> int:
    from jitlab.gap import gap_table
    from jitlab.viz.gap import gap_markdown, write_gap
    if args.out:
        make_dir(args.out, "--out")
    t = gap_table(args.dev, args.test, args.jit or (), level=args.level, bins=args.bins)
    print(gap_markdown(t, args.level))
    if args.out:
        written = write_gap(t, args.out, args.level)
        print(f"jitlab gap: {', '.join(p.name for p in written)} in {args.out}")
    return 0


def add_compare_commands(sub) -> None:
    """Register ``compare`` and ``gap`` on the ``jitlab`` subparsers object."""
    p = sub.add_parser("compare", help="paired comparison of runs on the same tasks: wins/losses, McNemar p, "
                                       "Δ reward and Δ tokens with 95%% intervals, flipped tasks")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directories or exports; each after the first is "
                   "compared with the first")
    p.add_argument("--out", help="folder for compare.md/.csv, flips.csv and the figure (compare.png/.html)")
    p.add_argument("--level", type=_level, default=0.95, help="confidence level of the bootstrap intervals")
    p.add_argument("--no-figure", action="store_true", help="with --out: write the tables only")
    p.add_argument("--common", action="store_true", help="pair on the task/seed pairs both runs finished (a stopped "
                   "stream, a partial run) instead of refusing different task lists; says how many were left out")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("gap", help="one harness vs a harness per task: best single fixed harness and per-family "
                                   "oracle chosen on dev, per-instance oracle, JIT runs; gap closed, McNemar, tokens")
    p.add_argument("--dev", nargs="+", required=True, metavar="RUN", help="one run per fixed harness on the dev split "
                   "(the choices are made here); several runs of one harness on disjoint tasks are read as its parts")
    p.add_argument("--test", nargs="+", required=True, metavar="RUN", help="the same fixed harnesses on the test tasks")
    p.add_argument("--jit", nargs="*", metavar="RUN", help="JIT runs on the test tasks (streaming, static, the "
                   "harness-only control, shuffles), each a row")
    p.add_argument("--bins", type=int, default=4, help="slices of the stream for success along stream position")
    p.add_argument("--level", type=_level, default=0.95, help="confidence level of the intervals")
    p.add_argument("--out", help="folder for gap.md, rows.csv, families.csv, stream.csv, chosen.csv")
    p.set_defaults(func=cmd_gap)


def _level(text: str) -> float:
    import argparse
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"--level must be a number in (0, 1), e.g. 0.95; got {text!r}")
    return value
