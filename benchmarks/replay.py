"""Benchmark: recorded backbone call streams of real runs, replayed through engines at their recorded concurrency.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/replay.py                                  # every stream, default engines
    PYTHONPATH=$PWD .venv/bin/python benchmarks/replay.py --streams tw-react --engines embedded llamacpp:embedded-q8_0
    PYTHONPATH=$PWD .venv/bin/python benchmarks/replay.py --max-calls 20                   # a quick look (labelled)
    PYTHONPATH=$PWD .venv/bin/python benchmarks/replay.py --record                         # record the streams anew

The streams (``benchmarks/streams/<name>.jsonl.gz``) were recorded with ``JITLAB_RECORD_CALLS`` (jitlab/llm/record.py)
from the runs ``--record`` makes (RECORDINGS below, on the reference engine ``embedded``): each line one call that
reached the model, chat (messages, max_new_tokens, stop, the reply) or score (messages, candidates, the scores), with
the calling thread (an episode) and its start time. A replay gives every recorded thread a thread of its own that
sends that thread's calls in their recorded order, each after the previous one's reply (closed loop, no think time:
the harness's and the environment's time is not replayed), so the engine sees the recorded concurrency and order.

Per stream and engine it prints: wall time; prompt tokens prefilled (prompt minus those a prefix cache reused) and
completion tokens, each per second of wall time; the busy share of each CPU over the replay (/proc/stat); and how
many greedy replies and likelihood choices (the argmax of each score call) equal the reference engine's in this run
(the first of ``--engines``), and the reference's against the recording. Ratios are against the reference's wall
time in the same run. The first engine is the baseline; the load average and the CPU's AVX-512/AMX flags are printed.

Caveats: an engine's model load is excluded (each engine gets a warm-up call first). Replies of an engine other than
the reference may differ, so its later prompts would differ in a live run; a replay sends the recorded prompts
whatever it replies. CPU shares include whatever else the machine runs: run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

STREAMS = Path(__file__).parent / "streams"
# name -> the command whose backbone calls make the stream (dev tasks; full suite budgets; replay cache off)
RECORDINGS = {
    "tw-react": "run --suite textworld --split dev --harness react --offset 10 --limit 8 --concurrency 8",
    "tw-explorer": "run --suite textworld --split dev --harness small_model/explorer_margin --offset 10 --limit 12 "
                   "--concurrency 4",
    "ba-navigator": "run --suite babyai --split dev --harness small_model/navigator --offset 10 --limit 4 --concurrency 4",
    "db-sql": "run --suite dbbench --split dev --harness small_model/sql --offset 10 --limit 16 --concurrency 4",
    "tw-jit": "jit --suite textworld --split dev --limit 3 --mode streaming --generator compose",
}


def record(names: list[str], backbone: str, work: Path) -> None:
    """Run each recording on ``backbone`` with JITLAB_RECORD_CALLS set, and store its stream gzipped."""
    STREAMS.mkdir(exist_ok=True)
    for name in names:
        raw = work / f"{name}.jsonl"
        raw.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "jitlab.cli", *RECORDINGS[name].split(), "--backbone", backbone, "--no-cache",
               "--quiet", "--out", str(work / "runs" / name)]
        start = time.perf_counter()
        subprocess.run(cmd, check=True, env={**os.environ, "JITLAB_RECORD_CALLS": str(raw)})
        calls = raw.read_text().splitlines()
        with gzip.open(STREAMS / f"{name}.jsonl.gz", "wt") as out:
            out.write("\n".join(calls) + "\n")
        print(f"recorded {name}: {len(calls)} calls in {time.perf_counter() - start:.0f} s")


def load_stream(name: str, max_calls: int | None) -> dict[str, list[dict]]:
    """The stream's calls by recorded thread, each thread's in start order (the first ``max_calls`` overall)."""
    calls = [json.loads(x) for x in gzip.open(STREAMS / f"{name}.jsonl.gz", "rt") if x.strip()]
    calls.sort(key=lambda c: c["t0"])
    threads: dict[str, list[dict]] = {}
    for call in calls[:max_calls]:
        threads.setdefault(call["thread"], []).append(call)
    return threads


def cpu_times() -> list[tuple[int, int]]:
    """(busy, total) jiffies of each CPU from /proc/stat."""
    out = []
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu") and line[3].isdigit():
            v = [int(x) for x in line.split()[1:]]
            idle = v[3] + v[4]
            out.append((sum(v) - idle, sum(v)))
    return out


def replay(llm, threads: dict[str, list[dict]]) -> dict:
    """Send every thread's calls through ``llm`` at once; the replies, the tokens and the time."""
    replies: dict[int, object] = {}
    totals = {"prompt": 0, "reused": 0, "completion": 0, "chat": 0, "score": 0}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(calls: list[dict]) -> None:
        try:
            for call in calls:
                if call["op"] == "chat":
                    c = llm.chat(call["messages"], **call["params"])
                    got, prompt, reused, completion = c.text, c.prompt_tokens, c.reused_tokens or 0, c.completion_tokens
                else:
                    got = llm.score(call["messages"], call["candidates"])
                    timing = llm.last_score_timing() if hasattr(llm, "last_score_timing") else {}
                    prompt, reused, completion = timing.get("prompt_tokens", 0), timing.get("reused", 0) or 0, 0
                with lock:
                    replies[id(call)] = got
                    totals[call["op"]] += 1
                    totals["prompt"] += prompt
                    totals["reused"] += reused
                    totals["completion"] += completion
        except BaseException as exc:   # reported after the replay
            errors.append(exc)

    before, start = cpu_times(), time.perf_counter()
    pool = [threading.Thread(target=worker, args=(calls,)) for calls in threads.values()]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall, after = time.perf_counter() - start, cpu_times()
    if errors:
        raise errors[0]
    busy = [(b1 - b0) / max(1, t1 - t0) for (b0, t0), (b1, t1) in zip(before, after)]
    return {"wall": wall, "replies": replies, "busy": busy, **totals}


def agreement(threads: dict[str, list[dict]], got: dict, want) -> tuple[str, str]:
    """'equal/total' of greedy replies and of likelihood choices (argmax) between ``got`` and ``want(call)``."""
    chat = [c for calls in threads.values() for c in calls if c["op"] == "chat"]
    score = [c for calls in threads.values() for c in calls if c["op"] == "score" and len(c["candidates"]) > 1]

    def pick(scores):
        return max(range(len(scores)), key=lambda i: scores[i])

    same_chat = sum(got[id(c)] == want(c) for c in chat)
    same_score = sum(pick(got[id(c)]) == pick(want(c)) for c in score)
    return f"{same_chat}/{len(chat)}", f"{same_score}/{len(score)}"


def ceilings(llm, n: int = 16) -> dict:
    """Prefill and batched-decode tokens/s on synthetic requests, ``n`` at once: prompts of ~500 distinct tokens
    answered with 1 token (prefill), then short prompts asking for a long story, answered with up to 64 tokens, no
    stop (decode); and one such request alone (single-stream decode)."""
    words = "north south east west door key box ball red green blue purple open close take drop".split()

    def at_once(prompts, max_new):
        got, pool = [], []

        def one(text):
            got.append(llm.chat([{"role": "user", "content": text}], max_new_tokens=max_new))
        start = time.perf_counter()
        for text in prompts:
            pool.append(threading.Thread(target=one, args=(text,)))
            pool[-1].start()
        for t in pool:
            t.join()
        return got, time.perf_counter() - start

    long = [" ".join(words[(i * 7 + j * (i + 3)) % len(words)] for j in range(420)) + f" ({i})" for i in range(n)]
    got, wall = at_once(long, 1)
    prefill = sum(c.prompt_tokens - (c.reused_tokens or 0) for c in got) / wall
    got, wall = at_once([f"Write a long story about a dragon named D{i}." for i in range(n)], 64)
    one, one_wall = at_once(["Write a long story about a dragon named D7."], 64)
    return {"prefill_tok_s": round(prefill, 1), "decode_tok_s": round(sum(c.completion_tokens for c in got) / wall, 1),
            "decode_concurrent": n, "single_decode_tok_s": round(one[0].completion_tokens / one_wall, 1)}


def warm(llm) -> None:
    llm.chat([{"role": "user", "content": "Say hi."}], max_new_tokens=4)
    if hasattr(llm, "score"):
        llm.score([{"role": "user", "content": "Say hi."}], ["hi", "hello"])


def cpu_flags() -> list[str]:
    """This CPU's AVX-512 and AMX flags (recorded with every speed figure)."""
    return [f for f in Path("/proc/cpuinfo").read_text().split("flags")[1].splitlines()[0].split()
            if f.startswith(("avx512", "amx"))]


def engine(spec: str):
    """The backbone of an engine spec ``name@key=value,...`` (numbers and true/false parsed as JSON)."""
    from jitlab.llm import get_backbone
    name, _, opts = spec.partition("@")
    options = {k: json.loads(v) if v[:1].isdigit() or v in ("true", "false") else v
               for k, v in (o.split("=", 1) for o in opts.split(",") if o)}
    return get_backbone(name, **options)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", nargs="*", default=list(RECORDINGS), help="stream names (benchmarks/streams/)")
    ap.add_argument("--engines", nargs="*", default=["embedded", "llamacpp:embedded-q8_0"],
                    help="backbone names; the first is the reference (options as name@key=value,key=value)")
    ap.add_argument("--max-calls", type=int, default=None, help="replay only each stream's first N calls (a smoke check)")
    ap.add_argument("--record", action="store_true", help="record the streams anew (RECORDINGS) and stop")
    ap.add_argument("--record-backbone", default="embedded")
    ap.add_argument("--work", default="runs/replay-record", help="where --record keeps its runs")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    ap.add_argument("--ceilings", action="store_true", help="also synthetic prefill and decode tokens/s, 16 at once")
    args = ap.parse_args()
    if args.record:
        return record(args.streams, args.record_backbone, Path(args.work))

    print(f"load average {os.getloadavg()}; {os.cpu_count()} CPUs; flags: {' '.join(cpu_flags())}"
          + (f"; first {args.max_calls} calls per stream (smoke check)" if args.max_calls else ""))
    engines = []
    for spec in args.engines:
        llm = engine(spec)
        warm(llm)
        engines.append((spec, llm))
    rows = []
    if args.ceilings:
        print("\nsynthetic: 16 requests at once")
        for spec, llm in engines:
            row = {"stream": "synthetic", "engine": spec, **ceilings(llm), "load": os.getloadavg()[0]}
            rows.append(row)
            print(f"  {spec:<36} prefill {row['prefill_tok_s']:7.0f} tok/s  decode {row['decode_tok_s']:6.1f} tok/s "
                  f"(16 concurrent; {row['decode_tok_s'] / row['single_decode_tok_s']:.2f}x its single stream "
                  f"{row['single_decode_tok_s']:.1f})")
    for stream in args.streams:
        threads = load_stream(stream, args.max_calls)
        n_calls = sum(len(c) for c in threads.values())
        print(f"\n{stream}: {n_calls} calls from {len(threads)} threads")
        ref = None
        for spec, llm in engines:
            r = replay(llm, threads)
            if ref is None:
                ref = r
                same = agreement(threads, r["replies"], lambda c: c.get("text", c.get("scores")))
                vs = "vs recording"
            else:
                same = agreement(threads, r["replies"], lambda c, ref=ref: ref["replies"][id(c)])
                vs = "vs reference"
            row = {"stream": stream, "engine": spec, "wall_s": round(r["wall"], 2),
                   "speedup": round(ref["wall"] / r["wall"], 2),
                   "prefill_tok_s": round((r["prompt"] - r["reused"]) / r["wall"], 1),
                   "decode_tok_s": round(r["completion"] / r["wall"], 1),
                   "reused_share": round(r["reused"] / max(1, r["prompt"]), 2),
                   "cpu_busy": [round(b, 2) for b in r["busy"]], "chat_equal": same[0], "choice_equal": same[1],
                   "calls": n_calls, "load": os.getloadavg()[0]}
            rows.append(row)
            print(f"  {spec:<36} wall {row['wall_s']:7.1f}s  x{row['speedup']:<5} prefill {row['prefill_tok_s']:7.0f} "
                  f"tok/s  decode {row['decode_tok_s']:6.1f} tok/s  reused {row['reused_share']:.2f}  cpu "
                  f"{'/'.join(f'{b:.2f}' for b in row['cpu_busy'])}  replies {same[0]}  choices {same[1]} ({vs})")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    for _, llm in engines:
        if hasattr(llm, "close"):
            llm.close()


if __name__ == "__main__":
    main()
