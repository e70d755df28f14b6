"""``jitlab jit``: just-in-time harness inference (jitlab.jit.inference), static or streaming.

    jitlab jit --suite textworld --mode streaming --generator compose --limit 20
    jitlab jit --suite toy --mode static --generator code:embedded --n-candidates 4 --selector logprob

``add_jit_commands(subparsers)`` registers the command on the ``jitlab`` parser. Its options are generated from
:class:`jitlab.jit.inference.JITConfig` (jitlab/cli/options.py); the JIT machinery is imported inside the
command, so ``jitlab --help`` stays fast. Rerunning the same command resumes the run.
"""
from __future__ import annotations

import json

from jitlab.cli.options import add_config_arguments, config_from_args, unfinished
from jitlab.cli.run import _print_repeats
from jitlab.jit.config import JITConfig

__all__ = ["add_jit_commands", "cmd_jit"]


def cmd_jit(args) -> int:
    from jitlab.jit.inference import JITConfig, run_jit
    cfg = config_from_args(JITConfig, args)
    print(f"jitlab jit: {cfg.mode} {cfg.generator} on {cfg.suite}/{cfg.split} with {cfg.backbone} "
          f"({cfg.candidates()} candidate(s) per task)", flush=True)
    out = run_jit(cfg)
    s = json.loads((out / "summary.json").read_text())
    if "per_repeat" in s:  # --repeat K: one run directory per seed, the reliability over them
        for run_dir, r in zip(s["runs"], s["per_repeat"]):
            print(f"  {run_dir}: {r['n_episodes']} tasks  success_rate={r['success_rate']:.2f}  "
                  f"tokens/task={r['tokens_per_task']:.0f}")
        _print_repeats(s, out)
        return int(bool(s["n_tasks_unfinished"]))
    print(f"\n{out}: {s['n_episodes']} tasks  success_rate={s['success_rate']:.2f}  mean_reward={s['mean_reward']:.2f}  "
          f"tokens/task={s['tokens_per_task']:.0f} (gen {s['gen_tokens_per_task']:.0f}, select "
          f"{s['select_tokens_per_task']:.0f}, repair {s['repair_tokens_per_task']:.0f}, exec "
          f"{s['exec_tokens_per_task']:.0f})  tool_calls/task={s['tool_calls_per_task']:.1f}\n"
          f"  valid first try {s['valid_candidates']}/{s['candidates']}  repair rounds used "
          f"{s['repair_rounds_used']}  fallbacks {s['fallback_rate']:.2f}  bank {s['bank_size_before']} -> "
          f"{s['bank_size_after']}", flush=True)
    return unfinished(s, out)


def add_jit_commands(subparsers) -> None:
    """Register ``jit`` on an argparse subparsers object."""
    p = subparsers.add_parser("jit", help="just-in-time harness inference (static or streaming; resumable)")
    add_config_arguments(p, JITConfig, required=("suite",))
    p.set_defaults(func=cmd_jit)
