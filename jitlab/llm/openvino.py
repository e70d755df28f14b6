"""OpenVINO backbones: ``openvino:embedded`` (the default backbone, llm.base.DEFAULT_BACKBONE) and
``openvino:embedded-q8_0``, SmolLM2-135M-Instruct on OpenVINO's CPU kernels with the hf backend's ``chat``/``score``.
openvino-genai is a dependency of jitlab (pyproject.toml).

    llm = get_backbone("openvino:embedded")                 # id openvino:smollm2-135m-instruct
    llm.chat([{"role": "user", "content": "hi"}], max_new_tokens=32, stop=["\\n"])
    llm.score(messages, ["go east", "eat sword"])           # log-likelihood of each reply

Weights: the packaged Q4_1 GGUF's weights de-quantized and stored as float16 (``embedded``, near-exact) or
re-quantized to Q8_0 (``embedded-q8_0``), converted once to OpenVINO IR (jitlab/llm/openvino_model.py). Compute is
bfloat16 by default (``precision=bf16``; AVX512-BF16 or AMX) with a float16 KV cache; ``precision=f32`` computes in
float32 (slower, closer to the hf reference; recorded in the id as ``+f32``).

Engine (jitlab/llm/openvino_engine.py): in the caller's process, one per model and options; continuous batching
across caller threads with prefix caching for chat, a pass per prompt (on a kept prompt prefix's keys/values) plus
one batched pass over the candidates for score. Semantics follow hf: the same chat-template rendering and tokens,
greedy by default, a reply ends at an end token, ``max_new_tokens`` or a ``stop`` string (cut from the text; the
token that completed it counted); ``score`` sums the log-likelihood of each candidate's tokens plus the end token.
``temperature > 0`` samples with the request's own seed.

Accounting: ``queue_s`` is the wait before the request joined the pipeline; ``compute_s`` runs from then to its
last token (shared steps charged to every request in them, as in hf and llamacpp). ``reused_tokens`` of a chat call
is None (not measured: the pipeline's prefix cache does not report its hits); a score call reports the prompt
tokens it took from a kept prompt.

Caveats: other kernels and bfloat16 arithmetic give other logits than hf's float32, so this is another backbone
with its own id; the replay cache never mixes the two, and results on it are not results on ``embedded``. How far
its replies and likelihood choices agree with ``embedded`` is measured in benchmarks/README.md.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from importlib.util import find_spec

from jitlab import memory
from jitlab.errors import ConfigError
from jitlab.llm import hf
from jitlab.llm.base import backend_config
from jitlab.llm.hf import _clean, chat_params, check_installed, keep_last
from jitlab.llm.openvino_engine import _Engine
from jitlab.llm.openvino_model import WEIGHTS, model_folder
from jitlab.llm.pricing import find_price, resolve_pricing
from jitlab.protocol import Completion

__all__ = ["EMBEDDED_ID", "INSTALL", "OpenVINOBackbone", "OpenVINOConfig"]

EMBEDDED_ID = "openvino:smollm2-135m-instruct"
INSTALL = "make setup (or pip install -e .)"


@dataclass
class OpenVINOConfig:
    """Options of an OpenVINO backbone (``get_backbone("openvino:...", **options)``); only ``precision`` changes outputs."""
    precision: str = field(default="bf16", metadata={"help": "compute precision: bf16 (fast; KV cache f16) or f32 "
                                                             "(closer to hf's float32; recorded in the id: +f32)",
                                                     "choices": ["bf16", "f32"]})
    threads: int | None = field(default=None, metadata={"help": "OpenVINO CPU threads; default: all cores", "min": 1})
    pin_threads: bool = field(default=False, metadata={"help": "pin OpenVINO's threads to cores (its own default): "
                                                               "faster alone, slower beside other work"})
    max_batch: int = field(default=16, metadata={"help": "most sequences in one pipeline step", "min": 1})
    kv_cache_gb: int = field(default=1, metadata={"help": "paged KV cache of the chat pipeline (GB)", "min": 1})
    step_tokens: int = field(default=2048, metadata={"help": "most tokens (prompt chunks plus decoding tokens) in one "
                                                             "step", "min": 64})
    prefix_reuse: bool = field(default=True, metadata={"help": "the pipeline's prefix caching across requests"})
    max_new_tokens: int = field(default=256, metadata={"help": "default cap on generated tokens per call", "min": 1})
    temperature: float = field(default=0.0, metadata={"help": "default temperature; 0 = greedy (deterministic)", "min": 0})
    pricing: str | dict | None = field(default=None, metadata={"help": "pricing YAML path or dict overriding pricing.yaml"})
    name: str | None = field(default=None, metadata={"help": "backbone id to record (default openvino:<model>)"})

    def __post_init__(self):
        if self.precision not in ("bf16", "f32"):
            raise ConfigError(f"openvino backbone: precision={self.precision!r} must be bf16 or f32")


def _resolve(spec: str) -> str:
    """The weights (a WEIGHTS key) that ``openvino:<spec>`` names; ConfigError for anything else."""
    packaged, _, weights = spec.partition("-")
    if packaged != "embedded" or (weights and weights not in WEIGHTS[1:]):
        raise ConfigError(f"openvino backbone: unknown model {spec!r}; use openvino:embedded or "
                          f"openvino:embedded-{'|-'.join(WEIGHTS[1:])}")
    return weights or WEIGHTS[0]


def check_spec(spec: str) -> None:
    """ConfigError unless ``openvino:<spec>`` names a known model and openvino-genai is installed
    (llm.base.check_options, before a run writes)."""
    _resolve(spec)
    check_installed("embedded")
    if find_spec("openvino_genai") is None:
        raise ConfigError(f"openvino backbone: openvino-genai (a jitlab dependency) is not installed; run {INSTALL}")


class OpenVINOBackbone:
    """SmolLM2 on OpenVINO: ``OpenVINOBackbone("embedded" | "embedded-q8_0", **OpenVINOConfig fields)``."""

    def __init__(self, spec: str, **options):
        self.config = cfg = backend_config("openvino", OpenVINOConfig, options)
        weights = _resolve(spec)
        self.id = (cfg.name or EMBEDDED_ID + ("" if weights == WEIGHTS[0] else f"-{weights}")) + \
            ("+f32" if cfg.precision == "f32" else "")
        self.price = find_price(resolve_pricing(cfg.pricing), self.id, hf.EMBEDDED_ID)   # the same model's price
        key = (weights, cfg.precision, cfg.threads, cfg.pin_threads, cfg.max_batch, cfg.kv_cache_gb, cfg.step_tokens,
               cfg.prefix_reuse)
        memory.steady_heap()
        with _ENGINES_LOCK:
            if key not in _ENGINES:
                gguf = hf.embedded_gguf_path()
                _ENGINES[key] = _Engine(model_folder(gguf, weights), gguf, *key[1:])
            self.engine = _ENGINES[key]
        self._warned: set[str] = set()
        self._local = threading.local()

    def chat(self, messages: list[dict], **params) -> Completion:
        start = time.perf_counter()
        gen = chat_params("openvino", params, self.config, self._warned)
        stop = tuple(s for s in gen["stop"] if s)
        max_new = gen["max_new_tokens"]
        engine = self.engine
        ids = self._truncate(engine.prompt_ids(_clean(messages)), max_new)
        request = engine.generate(ids, engine.config(max_new, gen["temperature"], gen["top_p"], stop, gen["seed"]))
        text, generated = engine.finish(request.tokens[:max_new], stop)
        return Completion(text=text, prompt_tokens=len(ids), completion_tokens=generated,
                          cost=self.price.cost(len(ids), generated) if self.price else 0.0,
                          latency_s=time.perf_counter() - start, queue_s=request.queue_s,
                          compute_s=request.compute_s, reused_tokens=None)

    def score(self, messages: list[dict], candidates: list[str]) -> list[float]:
        """Sum log-likelihood of each candidate as the complete assistant reply (its tokens plus the end token), as
        in hf: the prompt is prefilled once, the candidates are rows of one pass on top of it."""
        if not candidates:
            return []
        engine = self.engine
        conts = [list(engine.tokenizer(str(c), add_special_tokens=False)["input_ids"]) + [engine.end_id]
                 for c in candidates]
        prompt = self._truncate(engine.prompt_ids(_clean(messages)), max(len(c) for c in conts))
        info: dict = {}
        scores = engine.score(prompt, conts, info)
        info["prompt_tokens"] = len(prompt) + sum(len(c) for c in conts)
        self._local.score_timing = info
        return scores

    def last_score_timing(self) -> dict:
        """``queue_s``, ``compute_s``, ``reused`` and ``prompt_tokens`` of this thread's last ``score`` call."""
        return dict(getattr(self._local, "score_timing", {}))

    def _truncate(self, ids: list[int], max_new: int) -> list[int]:
        return keep_last(ids, max(16, self.engine.context - max_new))


_ENGINES: dict[tuple, _Engine] = {}
_ENGINES_LOCK = threading.Lock()
