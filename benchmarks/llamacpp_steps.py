"""Benchmark: what one llama.cpp decode step costs by sequences in it, per weight type of the embedded GGUF.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/llamacpp_steps.py                 # q8_0, q4_0, bf16, packaged Q4_1
    PYTHONPATH=$PWD .venv/bin/python benchmarks/llamacpp_steps.py --types q8_0 --threads 2

A step of N sequences (one new token each, after a 20-token prompt each, logits for all) is what the `llamacpp:`
engine runs when N episodes decode together; ``ratio`` is the step's time over the 1-sequence step's, so N means
batching saved nothing and 1 means a step of N cost one token's. Also a 481-token prefill (tokens/s). llama.cpp runs
in this process (it imports llama_cpp, never torch); re-typed copies are made with ``llamacpp:embedded-<type>`` first
(jitlab/llm/llamacpp.py).
"""
from __future__ import annotations

import argparse
import os
import time


def measure(L, path: str, threads: int, sizes: list[int], repeats: int = 30) -> dict:
    model = L.llama_model_load_from_file(path.encode(), L.llama_model_default_params())
    cp = L.llama_context_default_params()
    cp.n_ctx, cp.n_seq_max, cp.n_batch, cp.n_ubatch, cp.kv_unified = 1024 * (max(sizes) + 1), max(sizes) + 1, 512, 512, False
    cp.n_threads = cp.n_threads_batch = threads
    ctx = L.llama_init_from_model(model, cp)
    mem, batch = L.llama_get_memory(ctx), L.llama_batch_init(512, 0, 1)

    def decode(rows):
        batch.n_tokens = len(rows)
        for i, (token, pos, seq, logits) in enumerate(rows):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.seq_id[i][0], batch.logits[i] = token, pos, 1, seq, logits
        if L.llama_decode(ctx, batch):
            raise RuntimeError("llama_decode failed")

    out = {}
    for n in sizes:
        L.llama_memory_clear(mem, True)
        decode([(100 + j, j, s, j == 19) for s in range(n) for j in range(20)])
        start = time.perf_counter()
        for k in range(repeats):
            decode([(200 + k, 20 + k, s, True) for s in range(n)])
        out[n] = (time.perf_counter() - start) / repeats * 1000
    L.llama_memory_clear(mem, True)
    prompt = [(300 + j % 500, j, 0, j == 480) for j in range(481)]
    start = time.perf_counter()
    decode(prompt)
    out["prefill_tok_s"] = 481 / (time.perf_counter() - start)
    L.llama_free(ctx)
    L.llama_model_free(model)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", nargs="*", default=["q8_0", "q4_0", "bf16", "packaged"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sizes", type=int, nargs="*", default=[1, 4, 8, 16])
    args = ap.parse_args()
    import llama_cpp as L

    from jitlab.llm import hf, llamacpp

    L.llama_backend_init()
    print(f"load average {os.getloadavg()}; {args.threads} thread(s); llama_cpp {L.__version__}")
    print(f"{'type':<10}" + "".join(f"{f'{n} seq ms (ratio)':>20}" for n in args.sizes) + f"{'prefill tok/s':>15}")
    for kind in args.types:
        path = hf.embedded_gguf_path() if kind == "packaged" else llamacpp.retyped_path(hf.embedded_gguf_path(), kind)
        if not path.is_file():
            print(f"{kind:<10} no {path.name}: run llamacpp:embedded-{kind} once to make it")
            continue
        ms = measure(L, str(path), args.threads, args.sizes)
        print(f"{kind:<10}" + "".join(f"{f'{ms[n]:.1f} ({ms[n] / ms[args.sizes[0]]:.1f}x)':>20}" for n in args.sizes)
              + f"{ms['prefill_tok_s']:>15.0f}")


if __name__ == "__main__":
    main()
