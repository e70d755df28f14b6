"""Benchmark: a process's memory along recorded call streams, with jitlab's heap settings against glibc's defaults.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/engine_memory.py                        # every stream, 3 rounds
    PYTHONPATH=$PWD .venv/bin/python benchmarks/engine_memory.py --engine embedded --rounds 2 --max-calls 40

Each arm is a fresh process that replays the recorded streams (benchmarks/streams/, as benchmarks/replay.py does: every
recorded thread a thread of its own, at the recorded concurrency) through one engine, ``--rounds`` times over, and
reads its resident memory (VmRSS) after each stream and its peak (VmHWM) at the end:

- ``glibc defaults``, the baseline: jitlab.memory's settings switched off;
- ``trim``: ``malloc_trim`` after each recorded thread's calls, glibc's threshold kept;
- ``jitlab``: as a run has them (jitlab/memory.py): the fixed mmap threshold the engines set, and ``malloc_trim``
  after each recorded thread's calls, as after each episode.

Printed: RSS after each round and the peak, with each arm's ratio to the baseline, and each arm's wall time with its ratio
(the settings' cost). The load average and the CPU's AVX-512 flags are printed: read the ratios, not the absolute
numbers. A stream's replies are not checked here (benchmarks/replay.py does that).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from replay import RECORDINGS, cpu_flags, engine, load_stream, warm  # noqa: E402

ARMS = {"baseline": "glibc defaults", "trim": "trim per episode only",
        "jitlab": "jitlab (mmap threshold 1 MiB, trim per episode)"}


def rss_mb(key: str = "VmRSS") -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) // 1024
    return 0


def run_arm(arm: str, spec: str, streams: list[str], rounds: int, max_calls: int | None) -> dict:
    """One arm in this process: the replays and the memory after each stream."""
    from jitlab import memory
    if arm != "jitlab":     # before any engine exists, so its steady_heap() call does nothing
        memory.steady_heap = lambda: False
    if arm == "baseline":
        memory.trim = lambda: False
    llm = engine(spec)
    warm(llm)
    after, start = [], time.perf_counter()
    for r in range(rounds):
        for name in streams:
            threads = load_stream(name, max_calls)

            def episode(calls: list[dict]) -> None:
                for call in calls:
                    if call["op"] == "chat":
                        llm.chat(call["messages"], **call["params"])
                    else:
                        llm.score(call["messages"], call["candidates"])
                memory.trim()   # as drive_episode does after each episode (a no-op in the baseline)
            pool = [threading.Thread(target=episode, args=(calls,)) for calls in threads.values()]
            for t in pool:
                t.start()
            for t in pool:
                t.join()
            after.append({"round": r + 1, "stream": name, "rss_mb": rss_mb()})
    return {"arm": arm, "wall_s": time.perf_counter() - start, "after": after, "peak_mb": rss_mb("VmHWM")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", default="openvino:embedded", help="engine spec, as benchmarks/replay.py's --engines")
    ap.add_argument("--streams", nargs="*", default=list(RECORDINGS), help="stream names (benchmarks/streams/)")
    ap.add_argument("--rounds", type=int, default=3, help="times each arm replays all the streams")
    ap.add_argument("--max-calls", type=int, default=None, help="each stream's first N calls (a quick look)")
    ap.add_argument("--arm", choices=list(ARMS), help=argparse.SUPPRESS)   # the child process's own arm
    args = ap.parse_args()
    if args.arm:
        print(json.dumps(run_arm(args.arm, args.engine, args.streams, args.rounds, args.max_calls)))
        return
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; flags {' '.join(cpu_flags())}")
    print(f"engine {args.engine}; streams {', '.join(args.streams)}; {args.rounds} rounds"
          + (f"; first {args.max_calls} calls of each (a quick look)" if args.max_calls else ""), flush=True)
    results = {}
    for arm in ARMS:
        cmd = [sys.executable, __file__, "--arm", arm, "--engine", args.engine, "--rounds", str(args.rounds),
               "--streams", *args.streams] + (["--max-calls", str(args.max_calls)] if args.max_calls else [])
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        results[arm] = json.loads(out.strip().splitlines()[-1])
        print(f"{ARMS[arm]}: {results[arm]['wall_s']:.0f} s", flush=True)
    base, others = results["baseline"], [a for a in ARMS if a != "baseline"]
    print("\n| after | glibc defaults | " + " | ".join(f"{a} (ratio)" for a in others) + " |")
    print("|---" * (len(others) + 2) + "|")
    last = len(args.streams)

    def row(label: str, b: float, got: list, unit: str) -> None:
        print(f"| {label} | {b:.0f} {unit} | " + " | ".join(f"{g:.0f} {unit} ({g / b:.2f}x)" for g in got) + " |")
    for i in range(last - 1, len(base["after"]), last):   # the end of each round
        row(f"round {base['after'][i]['round']} RSS", base["after"][i]["rss_mb"],
            [results[a]["after"][i]["rss_mb"] for a in others], "MB")
    row("peak (VmHWM)", base["peak_mb"], [results[a]["peak_mb"] for a in others], "MB")
    row("wall", base["wall_s"], [results[a]["wall_s"] for a in others], "s")


if __name__ == "__main__":
    main()
