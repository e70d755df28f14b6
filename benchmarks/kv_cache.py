"""Benchmark: batched decoding with the hf engine's growing KV cache against transformers' DynamicCache.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/kv_cache.py                       # 16 rows x 1,000 tokens, 48 new
    PYTHONPATH=$PWD .venv/bin/python benchmarks/kv_cache.py --rows 8 --prompt-tokens 500 --repeats 2

Agents re-send long prompts (ReAct on BabyAI: about 1,150 tokens a call) and jitlab batches the calls of
concurrent episodes. transformers' ``DynamicCache`` appends each decoded token by concatenating, so every
token copies every row's whole cache; the engine's ``_growing_cache`` appends in place into spare room.
This times one left-padded greedy ``generate`` of ``--rows`` prompts (slices of README.md, ``--prompt-tokens``
each) with each cache, back to back in one process and alternating (best of ``--repeats``), checks that the
outputs are equal, and prints the ratio. Prefill is timed apart (a 1-token generate on the same batch) so
that the decoding share is shown too. The load average is printed: read the ratio, not the seconds.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=16, help="prompts in the batch")
    parser.add_argument("--prompt-tokens", type=int, default=1000, help="tokens per prompt")
    parser.add_argument("--new-tokens", type=int, default=48, help="tokens decoded per row")
    parser.add_argument("--repeats", type=int, default=1, help="timings per cache (best is kept)")
    args = parser.parse_args(argv)

    import torch

    from jitlab.llm import get_backbone
    from jitlab.llm.hf import _growing_cache
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    engine = get_backbone("embedded", prefix_cache_mb=0).engine
    text = (Path(__file__).parent.parent / "README.md").read_text()
    ids = engine.tokenizer(text)["input_ids"]
    step = max(1, (len(ids) - args.prompt_tokens) // max(1, args.rows))
    prompts = [ids[i * step:i * step + args.prompt_tokens] for i in range(args.rows)]
    batch, mask, width = engine._left_pad(prompts)

    def run(cache: str, new_tokens: int) -> tuple[float, list]:
        extra = {engine._cache_arg: _growing_cache(engine.model)} if cache == "growing" else {}
        start = time.perf_counter()
        with torch.inference_mode():
            out = engine.model.generate(input_ids=batch, attention_mask=mask, max_new_tokens=new_tokens,
                                        min_new_tokens=new_tokens, do_sample=False, temperature=None, top_p=None,
                                        top_k=None, pad_token_id=engine.pad_id, **extra)
        return time.perf_counter() - start, out[:, width:].tolist()

    best, outputs = {}, {}
    for _ in range(args.repeats):
        for cache in ("dynamic", "growing"):
            seconds, outputs[cache] = run(cache, args.new_tokens)
            prefill, _ = run(cache, 1)
            best[cache] = min(best.get(cache, (float("inf"), 0)), (seconds, prefill))
    for cache in ("dynamic", "growing"):
        seconds, prefill = best[cache]
        print(f"{cache:8s} cache: {seconds:6.1f} s for {args.rows} x {args.new_tokens} tokens after {args.rows} x "
              f"{args.prompt_tokens}-token prompts (prefill {prefill:.1f} s, decoding {seconds - prefill:.1f} s)")
    (dyn, dyn_pre), (grow, grow_pre) = best["dynamic"], best["growing"]
    print(f"growing / dynamic: {grow / dyn:.2f}x wall, {(grow - grow_pre) / max(1e-9, dyn - dyn_pre):.2f}x decoding; "
          f"outputs equal: {outputs['growing'] == outputs['dynamic']}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
