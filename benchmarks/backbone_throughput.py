"""Benchmark: embedded backbone throughput (batch 1 vs concurrent, batched) and where episode time goes.

    .venv/bin/python benchmarks/backbone_throughput.py                  # defaults below
    .venv/bin/python benchmarks/backbone_throughput.py --concurrency 8 --new-tokens 48 --suite textworld --limit 1

Part 1 sends the same ``concurrency`` prompts to the embedded backbone (SmolLM2-135M-Instruct,
greedy, fixed ``--new-tokens`` cap) twice in one process: one after another (batch 1), then from
``concurrency`` threads at once (the hf backend merges them into batched ``generate`` calls). It
prints generated tokens/s for both, their ratio, the batch sizes actually used, and whether the
batched texts equal the batch-1 texts.

Part 2 runs a ReAct episode (seed_bank/react, replay cache off so every call is real) through
``jitlab.runner`` and reads the records back with ``jitlab.store.load``: the share of episode wall
time spent outside backbone calls = 1 - sum(calls.latency_s) / sum(episodes.wall_s).

Caveats: CPU numbers depend on the machine and on what else runs on it (the load average is
printed); both measurements of part 1 run back to back in one process so their ratio is the
meaningful figure. The model load time is excluded from both parts.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "List three fruits and their colours.",
    "You are in a kitchen. There is a fridge and a door to the east. What do you do next? Answer with one command.",
    "Explain what a neural network is in one sentence.",
    "What is 12 plus 7? Explain your reasoning.",
    "Name a famous painter and one of their works.",
    "Give me a short motivational quote about learning.",
    "Describe a cat in two sentences.",
    "What should I pack for a weekend hike?",
    "Translate 'good morning' into French and Spanish.",
    "Why is the sky blue? Answer briefly.",
    "Suggest a name for a small bakery.",
    "What are the three states of matter?",
    "Write one sentence about the moon.",
    "How do I boil an egg?",
]


def throughput(concurrency: int, new_tokens: int) -> dict:
    from jitlab.llm import get_backbone
    start = time.perf_counter()
    llm = get_backbone("embedded", max_new_tokens=new_tokens)
    load_s = time.perf_counter() - start
    messages = [[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}] for i in range(concurrency)]
    llm.chat([{"role": "user", "content": "Hello."}], max_new_tokens=4)      # warm-up, not timed

    start = time.perf_counter()
    alone = [llm.chat(m) for m in messages]
    alone_s = time.perf_counter() - start

    llm.engine.batches.clear()
    together: list = [None] * concurrency
    barrier = threading.Barrier(concurrency)

    def call(i: int) -> None:
        barrier.wait()
        together[i] = llm.chat(messages[i])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    together_s = time.perf_counter() - start
    tokens_alone = sum(c.completion_tokens for c in alone)
    tokens_together = sum(c.completion_tokens for c in together)
    return {"load_s": load_s, "requests": concurrency, "tokens": tokens_alone,
            "batch1_tok_s": tokens_alone / alone_s, "batch1_wall_s": alone_s,
            "concurrent_tok_s": tokens_together / together_s, "concurrent_wall_s": together_s,
            "ratio": (tokens_together / together_s) / (tokens_alone / alone_s),
            "batches": list(llm.engine.batches),
            "same_text": sum(a.text == b.text for a, b in zip(alone, together))}


def episode_share(suite: str, limit: int, max_steps: int | None) -> dict:
    from jitlab.runner import RunConfig, run
    from jitlab.store import load
    with tempfile.TemporaryDirectory() as out:
        cfg = RunConfig(suite=suite, harness="react", backbone="embedded", limit=limit, max_steps=max_steps,
                        cache=False, out=os.path.join(out, "run"), concurrency=1, quiet=True)
        run_dir = run(cfg)
        frames = load(run_dir)
    episodes = frames["episodes"][frames["episodes"]["final"]]
    calls = frames["calls"][frames["calls"]["episode_id"].isin(episodes["id"])]
    wall, in_calls = float(episodes["wall_s"].sum()), float(calls["latency_s"].sum())
    return {"episodes": len(episodes), "steps": int(episodes["steps"].sum()), "calls": len(calls),
            "wall_s": wall, "backbone_s": in_calls, "outside_share": 1 - in_calls / wall if wall else float("nan"),
            "success": float(episodes["success"].mean()) if len(episodes) else float("nan")}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent requests in part 1")
    parser.add_argument("--new-tokens", type=int, default=48, help="max new tokens per request in part 1")
    parser.add_argument("--suite", default="textworld", help="suite for the ReAct episode (part 2)")
    parser.add_argument("--limit", type=int, default=1, help="episodes in part 2")
    parser.add_argument("--max-steps", type=int, default=5, help="step cap per episode in part 2 (0 = task's own)")
    parser.add_argument("--skip-episode", action="store_true", help="only part 1")
    args = parser.parse_args(argv)

    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    t = throughput(args.concurrency, args.new_tokens)
    print(f"embedded model load: {t['load_s']:.1f} s")
    print(f"batch 1:            {t['batch1_tok_s']:7.2f} tokens/s  ({t['tokens']} tokens, {t['requests']} requests "
          f"one after another, {t['batch1_wall_s']:.1f} s)")
    print(f"{args.concurrency} concurrent:       {t['concurrent_tok_s']:7.2f} tokens/s  (batches used: {t['batches']}, "
          f"{t['concurrent_wall_s']:.1f} s)")
    print(f"speed-up vs batch 1: {t['ratio']:.2f}x   batched text == batch-1 text: {t['same_text']}/{t['requests']}")
    if not args.skip_episode:
        e = episode_share(args.suite, args.limit, args.max_steps or None)
        print(f"ReAct on {args.suite}: {e['episodes']} episode(s), {e['steps']} steps, {e['calls']} backbone calls, "
              f"wall {e['wall_s']:.1f} s, in backbone calls {e['backbone_s']:.1f} s")
        print(f"share of episode wall time outside backbone calls: {100 * e['outside_share']:.1f}%")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
