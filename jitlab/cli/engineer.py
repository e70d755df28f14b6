"""``jitlab engineer``: harness editing from failures (jitlab.engineer).

    jitlab engineer packet runs/toy-react                     # the failure packet of a run, as JSON
    jitlab engineer run --suite toy --harness react --backbone scripted:pick-first --engineer rules \\
        --batch 4 --rounds 1 -k 4 --out runs/eng-toy [--disjoint] [--test 10]

``run``'s options are generated from :class:`jitlab.engineer.loop.EngineerConfig`; the engineer machinery is
imported inside the commands, so ``jitlab --help`` stays fast.
"""
from __future__ import annotations

from jitlab.cli.options import add_config_arguments, config_from_args

__all__ = ["add_engineer_commands", "cmd_packet", "cmd_engineer_run"]


def cmd_packet(args) -> int:
    from jitlab.engineer.packets import build_packet, packet_json
    print(packet_json(build_packet(args.run_dir)))
    return 0


def cmd_engineer_run(args) -> int:
    from jitlab.engineer.loop import EngineerConfig, run_engineer
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


def add_engineer_commands(subparsers) -> None:
    """Register ``engineer packet`` and ``engineer run`` on an argparse subparsers object."""
    from jitlab.engineer.loop import EngineerConfig
    p = subparsers.add_parser("engineer", help="harness editing from failures: failure packets, patch loop")
    sub = p.add_subparsers(dest="engineer_command", required=True)
    pk = sub.add_parser("packet", help="print the failure packet of a run directory (JSON, deterministic)")
    pk.add_argument("run_dir", help="a jitlab run directory (holds run.sqlite)")
    pk.set_defaults(func=cmd_packet)
    r = sub.add_parser("run", help="run a batch, propose K patches, measure each by Δ success (resumable runs)")
    add_config_arguments(r, EngineerConfig, required=("suite",), exclude=("k",))
    r.add_argument("-k", "--k", dest="k", type=int, default=4, help="patches proposed per round (default: 4)")
    r.set_defaults(func=cmd_engineer_run)
