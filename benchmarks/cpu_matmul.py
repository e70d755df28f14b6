"""Benchmark: what CPU PyTorch options give for the embedded model (SmolLM2-135M) on this machine.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/cpu_matmul.py                 # all variants
    PYTHONPATH=$PWD .venv/bin/python benchmarks/cpu_matmul.py --variants base,int8,threads1 --repeats 2

For each variant it loads a fresh copy of the embedded model (the hf backend's converted float32
checkpoint), then times, batch 1 and greedy: the prefill of a ~500-token ReAct-like prompt, and a
48-token decode (``min_new_tokens`` forces the full length), taking the best of ``--repeats``. It
prints tokens/s, the ratio against ``base`` and whether the greedy text equals ``base``'s (a variant
that changes outputs can only be an option recorded in the backbone id, never a silent default).

Variants: ``base`` (float32, SDPA attention, torch's thread count), ``eager`` (the plain attention
implementation), ``threads1`` (``torch.set_num_threads(1)``), ``int8`` (``torch.ao.quantization.
quantize_dynamic`` of every ``nn.Linear``), ``bf16`` (bfloat16 weights), ``compile``
(``torch.compile`` of the forward; its compile time is printed apart and excluded).

Caveats: CPU timings move with the machine's load (the load average is printed before and after);
run on a quiet machine for numbers worth quoting. ``compile`` needs a C++ compiler and takes minutes
on 2 cores.
"""
from __future__ import annotations

import argparse
import copy
import os
import time

VARIANTS = ("base", "eager", "threads1", "int8", "bf16", "compile")


def _prompt(tokenizer) -> list[int]:
    rooms = "".join(f"Action: go {d}\nObservation: You are in room {i}. Exits lead north, east and west. "
                    f"There is a lamp and a key here.\n" for i, d in enumerate(["north", "east", "west"] * 4))
    messages = [{"role": "system", "content": "You are an agent solving a task step by step. Reply with exactly two "
                 "lines:\nThought: <one short sentence>\nAction: <one command>"},
                {"role": "user", "content": rooms + "Admissible commands:\n- go north\n- go east\n- take lamp\n"
                 "What is your next Thought and Action?"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def measure(model, tokenizer, ids: list[int], new_tokens: int, repeats: int) -> dict:
    import torch
    x = torch.tensor([ids])
    best_prefill = best_decode = float("inf")
    text = ""
    with torch.inference_mode():
        model(input_ids=x[:, :16])                       # warm-up
        for _ in range(repeats):
            start = time.perf_counter()
            model(input_ids=x, use_cache=True)
            best_prefill = min(best_prefill, time.perf_counter() - start)
            start = time.perf_counter()
            out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, do_sample=False, temperature=None, top_p=None, top_k=None,
                                 pad_token_id=tokenizer.eos_token_id)
            total = time.perf_counter() - start
            best_decode = min(best_decode, max(total - best_prefill, 1e-9))
            text = tokenizer.decode(out[0, len(ids):])
    return {"prefill_tok_s": len(ids) / best_prefill, "decode_tok_s": new_tokens / best_decode, "text": text}


def build(variant: str, source):
    import torch
    model = copy.deepcopy(source)
    torch.set_num_threads(1 if variant == "threads1" else _THREADS)
    if variant == "eager":
        model.set_attn_implementation("eager")
    elif variant == "int8":
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    elif variant == "bf16":
        model = model.to(torch.bfloat16)
    elif variant == "compile":
        model.forward = torch.compile(model.forward, dynamic=True)
    return model.eval()


_THREADS = 0


def main(argv=None) -> None:
    global _THREADS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {','.join(VARIANTS)}")
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as jitlab.llm.hf does, before torch loads OpenMP
    import torch

    from jitlab.llm import get_backbone
    _THREADS = torch.get_num_threads()
    engine = get_backbone("embedded").engine
    ids = _prompt(engine.tokenizer)
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; torch {torch.__version__}, "
          f"{_THREADS} threads; prompt {len(ids)} tokens, {args.new_tokens} new tokens, best of {args.repeats}")
    results = {}
    for variant in [v.strip() for v in args.variants.split(",") if v.strip()]:
        if variant not in VARIANTS:
            raise SystemExit(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
        start = time.perf_counter()
        try:
            model = build(variant, engine.model)
            if variant == "compile":
                measure(model, engine.tokenizer, ids[:64], 4, 1)      # compile happens here
        except Exception as exc:  # noqa: BLE001 -- a variant this torch build cannot run is reported, not fatal
            print(f"{variant:9s} failed: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        setup = time.perf_counter() - start
        r = results[variant] = measure(model, engine.tokenizer, ids, args.new_tokens, args.repeats)
        base = results.get("base", r)
        print(f"{variant:9s} prefill {r['prefill_tok_s']:7.1f} tok/s ({r['prefill_tok_s'] / base['prefill_tok_s']:.2f}x)  "
              f"decode {r['decode_tok_s']:6.1f} tok/s ({r['decode_tok_s'] / base['decode_tok_s']:.2f}x)  "
              f"same greedy text as base: {r['text'] == base['text']}  (setup {setup:.1f} s)", flush=True)
        del model
    torch.set_num_threads(_THREADS)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
