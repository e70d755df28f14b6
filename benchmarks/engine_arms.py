"""Benchmark: engines side by side in one process, interleaved in rounds: prefill tok/s and batched decode tok/s.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/engine_arms.py --engines embedded openvino:embedded "embedded@quantize=int8"
    PYTHONPATH=$PWD .venv/bin/python benchmarks/engine_arms.py --rounds 2 --batches 1 8 16 --new-tokens 64

Each round runs every engine in turn (so load drifts hit them alike): ``--prompts`` requests of ~450 distinct tokens
at once answered with 1 token (prefill tok/s: prompt tokens minus those a prefix cache reused, per second), then for
each of ``--batches`` that many "write a long story" requests at once with up to ``--new-tokens`` tokens and no stop
(decode tok/s: completion tokens per second of wall time). It prints the load average and the CPU's AVX-512/AMX flags
first, each row's load average, ratios against the first engine in the same round, and how many greedy replies equal
the first engine's. Engine options as ``name@key=value,...``; each engine gets a warm-up call first.
"""
from __future__ import annotations

import argparse
import os
import threading
import time

from replay import cpu_flags, engine  # benchmarks/ (this script's folder) is on sys.path

WORDS = "north south east west door key box ball red green blue purple open close take drop".split()


def at_once(llm, prompts: list[str], max_new: int):
    got: list = [None] * len(prompts)

    def one(i: int) -> None:
        got[i] = llm.chat([{"role": "user", "content": prompts[i]}], max_new_tokens=max_new)
    pool = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    start = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return got, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", nargs="*", default=["embedded", "openvino:embedded"])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=16, help="prefill requests at once")
    ap.add_argument("--batches", type=int, nargs="*", default=[1, 8, 16], help="decode requests at once")
    ap.add_argument("--new-tokens", type=int, default=64)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}; {os.cpu_count()} CPUs; flags: {' '.join(cpu_flags())}", flush=True)
    engines = []
    for spec in args.engines:
        llm = engine(spec)
        llm.chat([{"role": "user", "content": "Say hi."}], max_new_tokens=4)
        engines.append((spec, llm))
    for rnd in range(args.rounds):
        base: dict = {}
        for spec, llm in engines:
            long = [" ".join(WORDS[(i * 7 + j * (i + 3 + rnd)) % len(WORDS)] for j in range(420)) + f" ({rnd}.{i})"
                    for i in range(args.prompts)]
            got, wall = at_once(llm, long, 1)
            row = {"prefill": sum(c.prompt_tokens - (c.reused_tokens or 0) for c in got) / wall}
            texts = {}
            for n in args.batches:
                got, wall = at_once(llm, [f"Write a long story about a dragon named R{rnd}D{i}." for i in range(n)],
                                    args.new_tokens)
                row[f"decode@{n}"] = sum(c.completion_tokens for c in got) / wall
                texts[n] = [c.text for c in got]
            base = base or {"row": row, "texts": texts}
            cells = "  ".join(f"{k} {v:6.1f} tok/s ({v / base['row'][k]:.2f}x)" for k, v in row.items())
            same = " ".join(f"{sum(a == b for a, b in zip(texts[n], base['texts'][n]))}/{n}" for n in args.batches)
            print(f"round {rnd} {spec:<32} {cells}  replies equal to the first engine's {same}  load "
                  f"{os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
