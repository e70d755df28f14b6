"""``jitlab engineer``: harness editing from failures (jitlab.engineer).

    jitlab engineer packet runs/toy-react                     # the failure packet of a run, as JSON
    jitlab engineer mine runs/toy-react [more runs] --out hooks.py   # Life-Harness interventions as a patch
    jitlab engineer apply react hooks.py --out runs/react+patch       # base + patch -> a harness folder to run
    jitlab engineer run --suite toy --harness react --backbone scripted:pick-first --engineer rules \\
        --batch 4 --rounds 1 -k 4 --out runs/eng-toy [--disjoint] [--test 10]
    jitlab engineer table --suite textworld --harness react,aorchestra --engineers rules,interventions,embedded \\
        --batch 6 -k 4 --test 10 --out runs/engineer-table          # base vs + patches, one table
    jitlab engineer export runs/engineer-table --out results/engineer-table-textworld   # loops, runs, table
    jitlab transfer --suite textworld --learn-on embedded --apply-to gemma3-270m --limit 6 --out runs/transfer-tw

``run``'s options are generated from :class:`jitlab.engineer.loop.EngineerConfig`, ``table``'s from
:class:`jitlab.engineer.table.TableConfig` and ``transfer``'s from :class:`jitlab.engineer.transfer.TransferConfig`;
the engineer machinery is imported inside the commands, so ``jitlab --help`` stays fast.
"""
from __future__ import annotations

from jitlab.cli.options import add_config_arguments, config_from_args
from jitlab.engineer.loop import EngineerConfig, run_engineer
from jitlab.engineer.table import TableConfig, run_table
from jitlab.engineer.transfer import TransferConfig, run_transfer
from jitlab.errors import ConfigError

__all__ = ["add_engineer_commands", "cmd_apply", "cmd_engineer_run", "cmd_export", "cmd_mine", "cmd_packet",
           "cmd_table", "cmd_transfer"]


def cmd_packet(args) -> int:
    from jitlab.engineer.packets import build_packet, packet_json
    print(packet_json(build_packet(args.run_dir)))
    return 0


def cmd_mine(args) -> int:
    from pathlib import Path

    from jitlab.engineer.interventions import intervention_patch, mine
    text = intervention_patch(mine(args.run_dirs, threshold=args.threshold))
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}; `jitlab engineer apply HARNESS {args.out} --out DIR` makes a patched harness")
    else:
        print(text, end="")
    return 0


def cmd_apply(args) -> int:
    from pathlib import Path

    from jitlab.engineer.patches import apply_patch, check_patch, patch_identity
    text = Path(args.patch).read_text()
    problem = check_patch(text)
    if problem:
        raise ConfigError(f"{args.patch}: {problem['kind']}: {problem['message']}")
    folder = apply_patch(args.harness, text, args.out)
    print(f"{folder}: {args.harness} + {args.patch} (identity {patch_identity(args.harness, text)[:12]}); it runs in "
          "the sandbox: jitlab run --harness " + str(folder))
    return 0


def cmd_engineer_run(args) -> int:
    cfg = config_from_args(EngineerConfig, args)
    s = run_engineer(cfg)
    line = f"\n{cfg.out}: base success {s['base_success']:.2f} -> {s['success']:.2f} (Δ {s['delta_batch']:+.2f} on the batch)"
    for label in ("disjoint", "test"):
        d = s.get(f"delta_{label}")
        if d and d["delta"] is not None:
            line += f"; {label}: {d['base']:.2f} -> {d['patched']:.2f} (Δ {d['delta']:+.2f})"
    print(line + f"\n  kept patch: {s['kept_sha'][:12] if s['kept_sha'] else 'none'}; candidates in "
          f"{cfg.out}/candidates.jsonl", flush=True)
    return 0


def cmd_table(args) -> int:
    cfg = config_from_args(TableConfig, args)
    rows = run_table(cfg)
    print(f"\n{cfg.out}: {len(rows)} rows in {cfg.out}/table.md and table.csv; for results/: "
          f"jitlab engineer export {cfg.out} --out results/<name>", flush=True)
    return 0


def cmd_export(args) -> int:
    from jitlab.engineer.export import export_engineer
    n = export_engineer(args.src, args.out)
    print(f"jitlab engineer export: {n['loops']} loop(s), {n['runs']} run(s), {n['patches']} patch(es)"
          f"{' and the table' if n['table'] else ''} in {args.out}", flush=True)
    return 0


def cmd_transfer(args) -> int:
    cfg = config_from_args(TransferConfig, args)
    result = run_transfer(cfg)
    print(f"\n{cfg.out}: {len(result['learners'])} x {len(result['targets'])} transfer matrix ({cfg.method}, "
          f"{cfg.limit} test tasks per cell); table {cfg.out}/matrix.md, figure {cfg.out}/matrix.png", flush=True)
    return 0


def add_engineer_commands(subparsers) -> None:
    """Register ``engineer packet|mine|apply|run|table`` and ``transfer`` on an argparse subparsers object."""
    p = subparsers.add_parser("engineer", help="harness editing from failures: failure packets, patch loop")
    sub = p.add_subparsers(dest="engineer_command", required=True)
    pk = sub.add_parser("packet", help="print the failure packet of a run directory (JSON, deterministic)")
    pk.add_argument("run_dir", help="a jitlab run directory (holds run.sqlite)")
    pk.set_defaults(func=cmd_packet)
    m = sub.add_parser("mine", help="mine interventions from one backbone's run directories into a hooks.py patch")
    m.add_argument("run_dirs", nargs="+", help="jitlab run directories (one backbone's trajectories)")
    m.add_argument("--threshold", type=float, default=0.1, help="share of steps a pattern needs (default: 0.1)")
    m.add_argument("--out", help="write the patch here (default: print it)")
    m.set_defaults(func=cmd_mine)
    a = sub.add_parser("apply", help="write a harness folder: a base harness plus a hooks.py patch (base untouched)")
    a.add_argument("harness", help="base harness: seed name or folder")
    a.add_argument("patch", help="the patch (a hooks.py file)")
    a.add_argument("--out", required=True, help="folder to write the patched harness to")
    a.set_defaults(func=cmd_apply)
    r = sub.add_parser("run", help="run a batch, propose K patches, measure each by Δ success (resumable runs)")
    add_config_arguments(r, EngineerConfig, required=("suite",), exclude=("k",))
    r.add_argument("-k", "--k", dest="k", type=int, default=4, help="patches proposed per round (default: 4)")
    r.set_defaults(func=cmd_engineer_run)
    tb = sub.add_parser("table", help="base harnesses vs + each engineer's kept patch on the batch, a disjoint "
                                      "batch and test tasks: table.csv/.md (resumable runs)")
    add_config_arguments(tb, TableConfig, required=("suite",), exclude=("k",))
    tb.add_argument("-k", "--k", dest="k", type=int, default=4, help="patches proposed per engineer (default: 4)")
    tb.set_defaults(func=cmd_table)
    ex = sub.add_parser("export", help="compact export of engineer loops or a table (candidates, packets, patches, "
                                       "runs) for results/")
    ex.add_argument("src", help="a loop folder (`engineer run --out`) or a folder of loops (`engineer table --out`)")
    ex.add_argument("--out", required=True, help="export folder, e.g. results/<name> (replaced by a new export)")
    ex.set_defaults(func=cmd_export)
    t = subparsers.add_parser("transfer", help="learn a harness overlay on one backbone's dev runs, apply it to others: "
                                               "a Δ success matrix (resumable runs)")
    add_config_arguments(t, TransferConfig, required=("suite", "learn_on"))
    t.set_defaults(func=cmd_transfer)
