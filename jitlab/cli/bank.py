"""``jitlab bank show|export|frontier``: look into a harness bank (``jitlab.jit.bank``).

    jitlab bank show [--bank runs/bank.sqlite]          entries: lineage, evaluations, frontier flag
    jitlab bank frontier [--step N]                     the Pareto frontier (now, or after update step N)
    jitlab bank export DIR                              every entry as a harness folder + DIR/index.json

``add_bank_commands(subparsers)`` registers them on the ``jitlab`` parser. The bank module is imported
inside the commands, so ``jitlab --help`` stays fast. These commands only read: they open the bank
read-only, and a missing, empty or damaged file is an error that leaves the file as it was.
"""
from __future__ import annotations

import argparse
import json
import re

from jitlab.store import make_dir

__all__ = ["add_bank_commands", "cmd_bank_export", "cmd_bank_frontier", "cmd_bank_show"]


def _open(args):
    from jitlab.jit.bank import Bank
    return Bank(args.bank, readonly=True)


def _num(x, fmt="{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def _table(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in cols) for r in rows]
    return "\n".join(lines)


def _row(e, names: dict) -> dict:
    return {"sha": e.sha[:10], "name": e.name, "generator": e.generator,
            "parents": ",".join(names.get(p, p[:10]) for p in e.parents) or "-", "evals": e.n_evals,
            "tasks": e.n_tasks, "reward": _num(e.mean_reward), "success": _num(e.success_rate, "{:.2f}"),
            "cost": _num(e.mean_cost, "{:.6f}"), "tokens": _num(e.mean_tokens, "{:.0f}"),
            "latency_s": _num(e.mean_latency, "{:.2f}"), "frontier": "*" if e.on_frontier else ""}


def cmd_bank_show(args) -> int:
    bank = _open(args)
    entries = bank.entries()
    names = {e.sha: e.name for e in entries}
    print(f"{bank.path}: {len(entries)} entries, {len(bank.frontier())} on the frontier, "
          f"{len(bank.frontier_history())} update steps")
    print(_table([_row(e, names) for e in entries]))
    incumbents = bank.incumbents()
    if incumbents:
        print("\nincumbent per family:")
        for fam, e in incumbents.items():
            print(f"  {fam:<24} {e.name} ({e.sha[:10]})")
    return 0


def cmd_bank_frontier(args) -> int:
    bank = _open(args)
    shas = bank.frontier(args.step)
    when = f"after step {args.step}" if args.step is not None else "now"
    print(f"{bank.path}: Pareto frontier {when} over (reward up, {bank.config.cost_metric} down, latency down), "
          f"{len(shas)} entries")
    entries = {e.sha: e for e in bank.entries()}
    names = {s: e.name for s, e in entries.items()}
    print(_table([_row(entries[s], names) for s in shas]))
    return 0


def cmd_bank_export(args) -> int:
    bank = _open(args)
    out = make_dir(args.dir, "export folder")
    index = []
    for e in bank.entries():
        folder = f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', e.name)[:40]}-{e.sha[:10]}"
        bank.materialize(e.sha, out / folder)
        index.append({**e.as_dict(), "dir": folder})
        for key in ("score", "why"):
            index[-1].pop(key)
    index_doc = {"bank": str(bank.path), "frontier": bank.frontier(),
                 "incumbents": {f: e.sha for f, e in bank.incumbents().items()}, "entries": index}
    tmp = out / "index.json.tmp"
    tmp.write_text(json.dumps(index_doc, indent=2))
    tmp.replace(out / "index.json")
    print(f"exported {len(index)} harnesses to {out} (index: {out / 'index.json'})")
    return 0


def add_bank_commands(subparsers) -> argparse.ArgumentParser:
    """Register ``bank show|export|frontier`` on the ``jitlab`` subparsers object."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bank", default="runs/bank.sqlite", help="bank file (default: runs/bank.sqlite)")
    p = subparsers.add_parser("bank", help="the harness bank: show, export, frontier")
    sub = p.add_subparsers(dest="bank_command", required=True)
    s = sub.add_parser("show", parents=[common], help="entries with lineage, evaluations and frontier flag")
    s.set_defaults(func=cmd_bank_show)
    s = sub.add_parser("frontier", parents=[common], help="the Pareto frontier table")
    s.add_argument("--step", type=int, help="the frontier after this update step (default: now)")
    s.set_defaults(func=cmd_bank_frontier)
    s = sub.add_parser("export", parents=[common], help="write every entry as a harness folder + index.json")
    s.add_argument("dir")
    s.set_defaults(func=cmd_bank_export)
    return p
