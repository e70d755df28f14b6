"""``jitlab jit``: just-in-time harness inference (jitlab.jit), static or streaming.

    jitlab jit --suite textworld --mode streaming --generator compose --backbone embedded --limit 20
    jitlab jit --suite toy --mode static --generator code:embedded --n-candidates 4 --selector logprob

``add_jit_commands(subparsers)`` registers the command on the ``jitlab`` parser. jitlab.jit is imported inside the command, so
``jitlab --help`` stays fast. Rerunning the same command resumes the run.
"""
from __future__ import annotations

import json

__all__ = ["add_jit_commands", "cmd_jit"]


def cmd_jit(args) -> int:
    from jitlab.cli import _unfinished, backbone_options
    from jitlab.jit import JITConfig, run_jit
    options = backbone_options(args)
    cfg = JITConfig(suite=args.suite, mode=args.mode, generator=args.generator, backbone=args.backbone,
                    backbone_options=options, judge_backbone=args.judge_backbone, split=args.split,
                    family=args.family, limit=args.limit, seed=args.seed, n_candidates=args.n_candidates,
                    selector=args.selector, k_references=args.k_references, compose_strategy=args.compose_strategy,
                    max_repair_rounds=args.max_repair_rounds, smoke_steps=args.smoke_steps, on_invalid=args.on_invalid,
                    avoid_retries=args.avoid_retries, avoid_after=args.avoid_after,
                    max_steps=args.max_steps, max_tokens=args.max_tokens, max_wall_s=args.max_wall_s,
                    retrieval=args.retrieval, allow_unisolated=args.allow_unisolated, cache=not args.no_cache,
                    out=args.out, concurrency=args.concurrency, new_run=args.new_run, quiet=args.quiet,
                    max_cost=args.max_cost, max_tokens_total=args.max_tokens_total)
    print(f"jitlab jit: {cfg.mode} {cfg.generator} on {cfg.suite}/{cfg.split} with {cfg.backbone} "
          f"({cfg.candidates()} candidate(s) per task)", flush=True)
    out = run_jit(cfg)
    s = json.loads((out / "summary.json").read_text())
    print(f"\n{out}: {s['n_episodes']} tasks  success_rate={s['success_rate']:.2f}  mean_reward={s['mean_reward']:.2f}  "
          f"tokens/task={s['tokens_per_task']:.0f} (gen {s['gen_tokens_per_task']:.0f}, select "
          f"{s['select_tokens_per_task']:.0f}, repair {s['repair_tokens_per_task']:.0f}, exec "
          f"{s['exec_tokens_per_task']:.0f})  tool_calls/task={s['tool_calls_per_task']:.1f}\n"
          f"  valid first try {s['valid_candidates']}/{s['candidates']}  repair rounds used "
          f"{s['repair_rounds_used']}  fallbacks {s['fallback_rate']:.2f}  bank {s['bank_size_before']} -> "
          f"{s['bank_size_after']}", flush=True)
    return _unfinished(s, out)


def add_jit_commands(subparsers) -> None:
    """Register ``jit`` on an argparse subparsers object."""
    p = subparsers.add_parser("jit", help="just-in-time harness inference (static or streaming; resumable)")
    p.add_argument("--suite", required=True)
    p.add_argument("--mode", choices=["static", "streaming"], default="streaming")
    p.add_argument("--generator", default="compose", help="compose | code:<backbone> | plan:<backbone>")
    p.add_argument("--backbone", default="embedded", help="backbone that runs the harnesses (and scores compose options)")
    p.add_argument("--backbone-option", action="append", metavar="KEY=VALUE", help="backend option, repeatable")
    p.add_argument("--api-base", help="OpenAI-compatible server URL for litellm backbones")
    p.add_argument("--judge-backbone", help="backbone of --selector judge (default: --backbone)")
    p.add_argument("--n-candidates", type=int, help="candidates per task (default 4 static, 1 streaming)")
    p.add_argument("--selector", choices=["validity", "logprob", "judge"], default="validity")
    p.add_argument("--k-references", type=int, default=3)
    p.add_argument("--compose-strategy", default="auto",
                   help="auto | score | sample | copy | mutate | crossover (compose only)")
    p.add_argument("--max-repair-rounds", type=int, default=2)
    p.add_argument("--smoke-steps", type=int, default=3, help="steps of the validation smoke episode")
    p.add_argument("--on-invalid", choices=["fallback", "fail"], default="fallback",
                   help="no valid candidate after repair: run the nearest reference, or record a failure")
    p.add_argument("--avoid-retries", type=int, default=3,
                   help="streaming: regenerate a candidate identical to a harness that failed on this family")
    p.add_argument("--avoid-after", type=int, default=2,
                   help="failed tasks (reward 0) before the novelty rule avoids a harness")
    p.add_argument("--split", default="dev")
    p.add_argument("--family")
    p.add_argument("--limit", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int)
    p.add_argument("--max-tokens", type=int, default=60_000, help="execution tokens per episode")
    p.add_argument("--max-wall-s", type=float, default=900.0)
    p.add_argument("--retrieval", choices=["auto", "embedding", "bm25"], default="auto")
    p.add_argument("--allow-unisolated", action="store_true", help="DANGEROUS: run harnesses without bubblewrap")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--concurrency", type=int, default=1, help="static mode: tasks solved at once")
    p.add_argument("--out")
    p.add_argument("--new-run", action="store_true", help="start over even if the config changed")
    p.add_argument("--quiet", action="store_true")
    from jitlab.cli import add_spend_arguments
    add_spend_arguments(p)
    p.set_defaults(func=cmd_jit)
