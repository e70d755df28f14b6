"""Benchmark: the embedded backbone's throughput, batched and with prefix reuse, against llama.cpp.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/backbone_throughput.py            # parts 1-3 (+ llama.cpp if installed)
    PYTHONPATH=$PWD .venv/bin/python benchmarks/backbone_throughput.py --concurrency 8 --new-tokens 48 --steps 20
    PYTHONPATH=$PWD .venv/bin/python benchmarks/backbone_throughput.py --skip-episode --mismatch 3   # part 4 only

Part 1 sends the same ``concurrency`` prompts to the embedded backbone (SmolLM2-135M-Instruct,
greedy, fixed ``--new-tokens`` cap) twice in one process: one after another (batch 1), then from
``concurrency`` threads at once (the hf backend merges them into batched ``generate`` calls). It
prints generated tokens/s for both, the batch sizes used and whether the batched texts equal batch 1's.
Prefix reuse is off here (the same prompts twice would be free the second time); part 3 measures it.
Then, for each of ``--variants`` (default ``bfloat16,int8``: the hf backend's speed options that change
logits, recorded in the backbone id), the same ``concurrency`` prompts at once again, with how many
texts equal the float32 batch-1 texts. The embedded GGUF is Q4_1: the embedded engine de-quantizes it to
float32 (4 bytes a weight, read once per decoding step), llama.cpp runs the 4-bit blocks themselves.

Part 2 runs llama.cpp (llama-cpp-python, ``pip install -e .[llamacpp]``; skipped with a message when
not importable) single stream on the same GGUF file and the same prompts, one after another, in a child process
(in this process, beside torch and jitlab's ``OMP_WAIT_POLICY=PASSIVE``, it ran far slower) with
``OMP_WAIT_POLICY=--llamacpp-wait`` (default active: llama.cpp's threads spin at their barriers, fastest on a quiet
machine; pass passive on a busy one), once with 1 thread and once with one per CPU; the faster is the baseline of
the ratios. Then the ``llamacpp:embedded`` backbone (jitlab's llama.cpp engine, its own process, the same wait
policy through its ``wait_policy`` option) gets the same ``concurrency`` prompts at once from as many threads, at
the baseline's thread count: its continuous batching decodes them together. It prints the steps' sizes and how many
texts equal llama.cpp single stream's (greedy, flash attention off in both).

Part 3 runs one real ReAct episode (seed_bank/react on the first ``--split`` task of ``--suite`` in
``--family`` (TextWorld cooking by default: 40-step tasks that run all ``--steps``), ``--steps``
steps at most, replay cache off) twice: prefix reuse off (``prefix_cache_mb=0``), then on. It prints
the prompt tokens prefilled (prompt - reused, chat calls), the prefix-hit rate and the wall time of
each, and the share of episode time spent outside backbone calls.

Part 4 (``--mismatch N``, off by default) measures how often prefix reuse changes a greedy reply:
N ReAct episodes per suite (``--mismatch-suites``, ``--mismatch-steps`` each) run with reuse on,
then every chat call is replayed with reuse off on the same messages (ReAct's own parameters:
48 new tokens, stop at ``\nObservation``) and the texts compared.

Ratios are printed against embedded batch 1 always and against llama.cpp single stream when it ran.
Caveats: CPU numbers depend on the machine and on its load (the load average is printed); every
figure of one run is measured back to back in one process, so the ratios are the meaningful output.
Model load times are excluded. Running against a llama.cpp/vLLM/Ollama server instead: start it with
its OpenAI-compatible API and use ``--backbone litellm:openai/<model>`` with ``api_base`` (see
jitlab/llm/README.md).
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


def _messages(concurrency: int) -> list[list[dict]]:
    return [[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}] for i in range(concurrency)]


def _load_embedded(new_tokens: int, **options):
    """(backbone, load seconds): the engine alone (prefix reuse off: part 3 measures it), warmed up."""
    from jitlab.llm import get_backbone
    start = time.perf_counter()
    llm = get_backbone("embedded", max_new_tokens=new_tokens, prefix_cache_mb=0, **options)
    load_s = time.perf_counter() - start
    llm.chat([{"role": "user", "content": "Hello."}], max_new_tokens=4)      # warm-up, not timed
    return llm, load_s


def _concurrent(llm, messages: list[list[dict]]) -> tuple[list, float]:
    """Every request from its own thread at once: (completions, wall seconds)."""
    if hasattr(llm, "engine"):          # the hf engine's batch sizes, read by the caller
        llm.engine.batches.clear()
    concurrency = len(messages)
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
    return together, time.perf_counter() - start


def throughput(concurrency: int, new_tokens: int) -> dict:
    llm, load_s = _load_embedded(new_tokens)
    messages = _messages(concurrency)
    start = time.perf_counter()
    alone = [llm.chat(m) for m in messages]
    alone_s = time.perf_counter() - start
    together, together_s = _concurrent(llm, messages)
    tokens_alone = sum(c.completion_tokens for c in alone)
    tokens_together = sum(c.completion_tokens for c in together)
    return {"load_s": load_s, "requests": concurrency, "tokens": tokens_alone,
            "batch1_tok_s": tokens_alone / alone_s, "batch1_wall_s": alone_s,
            "concurrent_tok_s": tokens_together / together_s, "concurrent_wall_s": together_s,
            "ratio": (tokens_together / together_s) / (tokens_alone / alone_s),
            "batches": list(llm.engine.batches),
            "same_text": sum(a.text == b.text for a, b in zip(alone, together)), "texts": [c.text for c in alone]}


VARIANTS = {"bfloat16": {"dtype": "bfloat16"}, "int8": {"quantize": "int8"}}


def variant(name: str, concurrency: int, new_tokens: int, reference: list[str]) -> dict:
    """``concurrency`` requests at once with one of the output-changing speed options (VARIANTS)."""
    llm, load_s = _load_embedded(new_tokens, **VARIANTS[name])
    together, wall = _concurrent(llm, _messages(concurrency))
    tokens = sum(c.completion_tokens for c in together)
    return {"name": name, "backbone": llm.id, "load_s": load_s, "tok_s": tokens / wall, "wall_s": wall,
            "batches": list(llm.engine.batches), "same_text": sum(c.text == r for c, r in zip(together, reference))}


def llamacpp(concurrency: int, new_tokens: int, threads: int, wait: str) -> dict | None:
    """llama.cpp single stream on the embedded GGUF, the same prompts one after another, in a child process;
    None if llama-cpp-python is not installed.

    A child process, because in this one llama.cpp ran at 23 tokens/s with 2 threads, against 37 in a child on a
    machine running at half the speed. This process has torch's OpenMP runtime loaded, and jitlab.llm.hf has set
    ``OMP_WAIT_POLICY=PASSIVE``, so llama.cpp's OpenMP threads sleep at each of the hundreds of barriers per token;
    which of the two costs more was not isolated. The child gets ``OMP_WAIT_POLICY=wait``."""
    import json
    import subprocess
    import sys
    env = {**os.environ, "OMP_WAIT_POLICY": wait.upper()}
    from jitlab.llm.hf import embedded_gguf_path
    out = subprocess.run([sys.executable, __file__, "--llamacpp-child", str(threads), "--gguf", str(embedded_gguf_path()),
                          "--concurrency", str(concurrency), "--new-tokens", str(new_tokens)],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"llama.cpp child failed (exit {out.returncode}): {out.stderr.strip()[-500:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result or None


def _llamacpp_child(gguf: str, concurrency: int, new_tokens: int, threads: int) -> dict:
    try:
        import llama_cpp
    except ImportError:
        return {}
    start = time.perf_counter()
    llm = llama_cpp.Llama(model_path=gguf, n_ctx=2048, n_threads=threads,
                          n_threads_batch=threads, seed=0, verbose=False)
    load_s = time.perf_counter() - start
    llm.create_chat_completion([{"role": "user", "content": "Hello."}], max_tokens=4, temperature=0.0)  # warm-up
    tokens, texts, start = 0, [], time.perf_counter()
    for i in range(concurrency):
        out = llm.create_chat_completion([{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                                         max_tokens=new_tokens, temperature=0.0)
        tokens += out["usage"]["completion_tokens"]
        texts.append(out["choices"][0]["message"]["content"])
    wall = time.perf_counter() - start
    return {"load_s": load_s, "tokens": tokens, "tok_s": tokens / wall, "wall_s": wall, "threads": threads,
            "version": getattr(llama_cpp, "__version__", "?"), "texts": texts}


def llamacpp_engine(concurrency: int, new_tokens: int, threads: int, wait: str, reference: list[str]) -> dict:
    """The ``llamacpp:embedded`` backbone (its engine is a process of its own), ``concurrency`` requests at once;
    prefix reuse off, as for the embedded rows."""
    from jitlab.llm import get_backbone
    start = time.perf_counter()
    llm = get_backbone("llamacpp:embedded", threads=threads, max_new_tokens=new_tokens, prefix_reuse=False,
                       wait_policy=wait)
    llm.chat([{"role": "user", "content": "Hello."}], max_new_tokens=4)      # starts the engine; warm-up, not timed
    load_s = time.perf_counter() - start
    llm.steps()
    try:
        together, wall = _concurrent(llm, _messages(concurrency))
        steps = llm.steps()
    finally:
        llm.close()
    tokens = sum(c.completion_tokens for c in together)
    return {"load_s": load_s, "tok_s": tokens / wall, "wall_s": wall, "tokens": tokens, "threads": threads,
            "steps": dict(sorted(steps.items())), "same_text": sum(c.text == r for c, r in zip(together, reference))}


def _episode(suite: str, steps: int, out: str, reuse: bool, limit: int = 1, split: str = "test",
             family: str | None = None) -> dict:
    from jitlab.runner import RunConfig, run
    from jitlab.store import load
    cfg = RunConfig(suite=suite, harness="react", backbone="embedded", split=split, family=family, limit=limit,
                    max_steps=steps,
                    cache=False, out=out, concurrency=1, quiet=True,
                    backbone_options={} if reuse else {"prefix_cache_mb": 0})
    frames = load(run(cfg))
    episodes = frames["episodes"][frames["episodes"]["final"]]
    calls = frames["calls"][frames["calls"]["episode_id"].isin(episodes["id"])]
    chat = calls[calls["kind"] == "chat"]
    prompt, reused = int(chat["prompt_tokens"].sum()), int(chat["reused_tokens"].fillna(0).sum())
    wall, in_calls = float(episodes["wall_s"].sum()), float(calls["latency_s"].sum())
    return {"episodes": len(episodes), "steps": int(episodes["steps"].sum()), "calls": len(chat),
            "prompt_tokens": prompt, "prefilled": prompt - reused, "hit": reused / prompt if prompt else 0.0,
            "wall_s": wall, "backbone_s": in_calls, "outside_share": 1 - in_calls / wall if wall else float("nan"),
            "chat": chat}


def reuse_episode(suite: str, steps: int, split: str, family: str | None) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        off = _episode(suite, steps, os.path.join(tmp, "off"), reuse=False, split=split, family=family)
        on = _episode(suite, steps, os.path.join(tmp, "on"), reuse=True, split=split, family=family)
    return off, on


# what seed_bank/react's action passes to chat() (the calls table keeps messages, not parameters)
REACT_PARAMS = {"max_new_tokens": 48, "stop": ["\nObservation"]}


def mismatch(suites: list[str], episodes: int, steps: int) -> dict:
    """Per suite: (chat calls replayed, replies that differ) between reuse on (as run) and reuse off."""
    import json

    from jitlab.llm import get_backbone
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for suite in suites:
            on = _episode(suite, steps, os.path.join(tmp, suite), reuse=True, limit=episodes)
            plain = get_backbone("embedded", prefix_cache_mb=0)
            differ = sum(plain.chat(json.loads(m), **REACT_PARAMS).text != text
                         for m, text in zip(on["chat"]["messages"], on["chat"]["text"]))
            get_backbone("embedded")          # prefix reuse back on for the next suite
            result[suite] = {"calls": len(on["chat"]), "differ": differ, "hit": on["hit"], "steps": on["steps"]}
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent requests in part 1")
    parser.add_argument("--new-tokens", type=int, default=48, help="max new tokens per request in parts 1-2")
    parser.add_argument("--suite", default="textworld", help="suite of the ReAct episode (part 3)")
    parser.add_argument("--steps", type=int, default=20, help="step cap of the ReAct episode (part 3)")
    parser.add_argument("--split", default="test", help="split whose first task part 3 runs")
    parser.add_argument("--family", default="cooking", help="task family of part 3 ('' for any): the default's 40-step "
                                                           "tasks run all --steps (easy ones end in 1-3 steps)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default); 1 is steadier "
                                                                 "on a machine loaded by other work")
    parser.add_argument("--variants", default="bfloat16,int8",
                        help="part 1: output-changing speed options also measured concurrent ('' for none)")
    parser.add_argument("--llamacpp-wait", default="active", choices=["active", "passive"],
                        help="OMP_WAIT_POLICY of both llama.cpp processes (part 2): active on a quiet machine")
    parser.add_argument("--skip-throughput", action="store_true", help="skip parts 1-2")
    parser.add_argument("--skip-episode", action="store_true", help="skip part 3")
    parser.add_argument("--mismatch", type=int, default=0, help="part 4: episodes per suite (0: skip)")
    parser.add_argument("--mismatch-suites", default="textworld,babyai,dbbench", help="suites of part 4")
    parser.add_argument("--mismatch-steps", type=int, default=10, help="step cap per episode in part 4")
    parser.add_argument("--llamacpp-child", type=int, default=0, help=argparse.SUPPRESS)  # part 2's child: threads
    parser.add_argument("--gguf", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.llamacpp_child:
        import json
        print(json.dumps(_llamacpp_child(args.gguf, args.concurrency, args.new_tokens, args.llamacpp_child)))
        return

    if args.threads:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as jitlab.llm.hf does, before torch loads OpenMP
        import torch
        torch.set_num_threads(args.threads)
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
          + (f", torch threads {args.threads}" if args.threads else ""), flush=True)
    if not args.skip_throughput:
        t = throughput(args.concurrency, args.new_tokens)
        print(f"embedded model load: {t['load_s']:.1f} s")
        print(f"embedded batch 1:      {t['batch1_tok_s']:7.2f} tokens/s  ({t['tokens']} tokens, {t['requests']} "
              f"requests one after another, {t['batch1_wall_s']:.1f} s)")
        print(f"embedded {args.concurrency} concurrent: {t['concurrent_tok_s']:7.2f} tokens/s  (batches used: "
              f"{t['batches']}, {t['concurrent_wall_s']:.1f} s)")
        print(f"  vs embedded batch 1: {t['ratio']:.2f}x   batched text == batch-1 text: {t['same_text']}/{t['requests']}",
              flush=True)
        variants = [variant(v.strip(), args.concurrency, args.new_tokens, t["texts"])
                    for v in args.variants.split(",") if v.strip()]
        for v in variants:
            print(f"embedded {args.concurrency} concurrent, {v['name']} ({v['backbone']}): {v['tok_s']:7.2f} tokens/s  "
                  f"({v['wall_s']:.1f} s, batches {v['batches']}; {v['tok_s'] / t['batch1_tok_s']:.2f}x "
                  f"embedded batch 1; text == float32 batch-1 text: {v['same_text']}/{t['requests']})", flush=True)
        from importlib.util import find_spec
        installed = find_spec("llama_cpp") is not None
        runs = [llamacpp(args.concurrency, args.new_tokens, n, args.llamacpp_wait)
                for n in sorted({1, os.cpu_count() or 1})] if installed else []
        if not runs or runs[0] is None:
            print("llama.cpp: skipped (llama_cpp not importable; `pip install -e .[llamacpp]` builds it from source, "
                  "6-15 minutes on 2 cores)")
        else:
            for r in runs:
                print(f"llama.cpp {r['version']} single stream, {r['threads']} thread(s), {args.llamacpp_wait}: "
                      f"{r['tok_s']:7.2f} tokens/s  "
                      f"({r['tokens']} tokens, {r['wall_s']:.1f} s; load {r['load_s']:.1f} s)")
            c = max(runs, key=lambda r: r["tok_s"])  # the baseline: llama.cpp at its best thread count
            print(f"  llama.cpp baseline ({c['threads']} thread(s)) vs embedded batch 1: {c['tok_s'] / t['batch1_tok_s']:.2f}x")
            print(f"  embedded batch 1 / llama.cpp: {t['batch1_tok_s'] / c['tok_s']:.2f}x   embedded {args.concurrency} "
                  f"concurrent / llama.cpp: {t['concurrent_tok_s'] / c['tok_s']:.2f}x", flush=True)
            for v in variants:
                print(f"  embedded {args.concurrency} concurrent, {v['name']} / llama.cpp: {v['tok_s'] / c['tok_s']:.2f}x")
            e = llamacpp_engine(args.concurrency, args.new_tokens, c["threads"], args.llamacpp_wait, c["texts"])
            print(f"llamacpp engine, {args.concurrency} concurrent ({c['threads']} thread(s), {args.llamacpp_wait}): "
                  f"{e['tok_s']:7.2f} tokens/s  "
                  f"({e['tokens']} tokens, {e['wall_s']:.1f} s; steps by sequences decoding: {e['steps']}; text == "
                  f"llama.cpp single stream text: {e['same_text']}/{args.concurrency})")
            print(f"  vs embedded batch 1: {e['tok_s'] / t['batch1_tok_s']:.2f}x   vs llama.cpp single stream: "
                  f"{e['tok_s'] / c['tok_s']:.2f}x", flush=True)
    if not args.skip_episode:
        off, on = reuse_episode(args.suite, args.steps, args.split, args.family or None)
        for name, e in (("reuse off", off), ("reuse on ", on)):
            print(f"ReAct on {args.suite}, {name}: {e['steps']} steps, {e['calls']} chat calls, prompt tokens "
                  f"{e['prompt_tokens']}, prefilled {e['prefilled']} (hit rate {100 * e['hit']:.0f}%), wall "
                  f"{e['wall_s']:.1f} s, outside backbone calls {100 * e['outside_share']:.1f}%")
        fresh = (on["chat"]["prompt_tokens"] - on["chat"]["reused_tokens"].fillna(0)).astype(int).tolist()
        print(f"  reuse on, prefilled tokens per call: {fresh}")
        saved = 1 - on["prefilled"] / off["prefilled"] if off["prefilled"] else float("nan")
        print(f"  prefix reuse: {100 * saved:.0f}% fewer prefilled tokens, wall {on['wall_s'] / off['wall_s']:.2f}x of "
              f"reuse off" + ("" if on["steps"] == off["steps"] else "  (the two episodes took different steps)"),
              flush=True)
    if args.mismatch:
        suites = [s.strip() for s in args.mismatch_suites.split(",") if s.strip()]
        for suite, m in mismatch(suites, args.mismatch, args.mismatch_steps).items():
            print(f"mismatch {suite}: {m['differ']}/{m['calls']} chat replies differ with reuse off "
                  f"({m['steps']} steps, hit rate {100 * m['hit']:.0f}%)", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
