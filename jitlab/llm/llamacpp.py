"""llama.cpp backbones (optional extra ``jitlab[llamacpp]``): ``llamacpp:embedded``, ``llamacpp:gemma3-270m`` and
``llamacpp:<path.gguf>``, with the hf backend's ``chat``/``score`` interface on llama.cpp's quantized CPU kernels.

    llm = get_backbone("llamacpp:embedded", threads=2)        # id llamacpp:smollm2-135m-instruct
    llm.chat([{"role": "user", "content": "hi"}], max_new_tokens=32, stop=["\\n"])
    llm.score(messages, ["go east", "eat sword"])           # log-likelihood of each reply

Engine: one child process per (GGUF, options) per parent process, started on the
first call (``python -m jitlab.llm.llamacpp``) and fed JSON lines over its stdin/stdout. llama.cpp never runs in the
caller's process: beside torch's OpenMP runtime it segfaulted or ran at half speed (jitlab/llm/README.md). The child
runs continuous batching on llama-cpp-python's low-level API: each request gets a sequence id (slot) of its own,
prompts are prefilled in chunks, and every step is ONE ``llama_decode`` holding one token of each decoding sequence
(plus prompt chunks of newly admitted ones), so the episodes of concurrent caller threads share every step and a
request joins or leaves the batch at any step; no batching window, no padding. A finished slot keeps its
keys/values: a new request takes the free slot sharing the longest token prefix with its prompt and prefills only
the rest (``prefix_reuse``; an episode's next call usually finds its previous one).

Semantics follow hf.py: prompts are rendered with the GGUF's chat template by the rules of transformers'
``apply_chat_template`` (a final assistant message is continued) or, without a template, as hf's plain
``User:``/``Assistant:`` transcript; greedy decoding is the argmax of the logits; a reply ends at an
end-of-generation token, ``max_new_tokens`` or a ``stop`` string (cut from the text; the token that completed it
is counted); ``score`` sums the log-likelihood of each candidate's tokens plus the end token. ``temperature > 0``
samples (with ``top_p``) from a numpy RNG of the request's own, seeded by ``seed`` (unseeded: fresh entropy), so a
seeded sample does not depend on which requests shared its steps (hf seeds per batch).

Accounting: ``queue_s`` is the time a request waited in the child for a free slot (or behind a ``score``);
``compute_s`` runs from its admission to its last token, so, as in hf, each request is charged the steps it shared
with others. The pipe's overhead is in ``latency_s`` only.

Caveats: llama.cpp's quantized kernels give other logits than hf's de-quantized float32 weights, so this is another
backbone with its own id (the replay cache never mixes the two). Each sequence holds ``n_ctx`` tokens (prompt plus
reply; longer prompts keep their last tokens); the f16 KV cache of ``n_ctx * (max_batch + 1)`` tokens is allocated
at start (about 1.6 GB for SmolLM2 at the defaults). A crashed child fails its pending calls with InfraError and the
next call starts a new one. ``close()`` stops the child; it also exits when the parent does (its stdin closes).
"""
from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

from jitlab.errors import ConfigError, InfraError
from jitlab.llm.base import backend_config
from jitlab.llm.pricing import find_price, resolve_pricing
from jitlab.protocol import Completion

__all__ = ["EMBEDDED_ID", "GEMMA_ID", "INSTALL", "LlamaCppBackbone", "LlamaCppConfig", "render"]

log = logging.getLogger(__name__)

EMBEDDED_ID = "llamacpp:smollm2-135m-instruct"
GEMMA_ID = "llamacpp:gemma3-270m-base-q4_k_m"
INSTALL = ('pip install "jitlab[llamacpp]" (builds llama-cpp-python 0.3.36 from source: 6-15 minutes on 2 cores; if '
           'it then segfaults on prompts, rebuild it with GGML_NATIVE=OFF as jitlab/llm/README.md says)')
_PARAMS = ("max_new_tokens", "max_tokens", "temperature", "top_p", "stop", "seed")


@dataclass
class LlamaCppConfig:
    """Options of a llama.cpp backbone (``get_backbone("llamacpp:...", **options)``); only ``flash_attn`` changes outputs."""
    threads: int = field(default=2, metadata={"help": "llama.cpp CPU threads of the engine process", "min": 1})
    max_batch: int = field(default=16, metadata={"help": "most sequences decoded together in one step", "min": 1,
                                                 "max": 255})
    n_ctx: int = field(default=4096, metadata={"help": "context per sequence, prompt plus reply (capped at the model's)",
                                               "min": 1})
    max_new_tokens: int = field(default=256, metadata={"help": "default cap on generated tokens per call", "min": 1})
    temperature: float = field(default=0.0, metadata={"help": "default temperature; 0 = greedy (deterministic)", "min": 0})
    prefix_reuse: bool = field(default=True, metadata={"help": "start a prompt from a finished slot's common prefix"})
    flash_attn: bool = field(default=False, metadata={"help": "llama.cpp's flash attention: ~10-20% faster decoding on "
                                                               "CPU, other float rounding (recorded in the id: +flash_attn)"})
    wait_policy: str = field(default="passive", metadata={"help": "OMP_WAIT_POLICY of the engine process: passive (idle "
                                                                   "threads sleep; safe on a shared machine) or active "
                                                                   "(they spin: 2.7x faster single-stream decoding at 2 "
                                                                   "threads on an idle machine, collapses on a busy one)",
                                                           "choices": ["passive", "active"]})
    pricing: str | dict | None = field(default=None, metadata={"help": "pricing YAML path or dict overriding pricing.yaml"})
    name: str | None = field(default=None, metadata={"help": "backbone id to record (default llamacpp:<model or path>)"})

    def __post_init__(self):
        if self.wait_policy not in ("passive", "active"):
            raise ConfigError(f"llamacpp backbone: wait_policy={self.wait_policy!r} must be passive or active")
        if not isinstance(self.max_batch, int) or not 1 <= self.max_batch <= 255:
            raise ConfigError(f"llamacpp backbone: max_batch={self.max_batch!r} must be 1-255")


def check_spec(spec: str) -> None:
    """ConfigError unless ``llamacpp:<spec>`` names a GGUF file (llm.base.check_options, before a run writes)."""
    if spec in ("embedded", "gemma3-270m"):
        from jitlab.llm.hf import check_installed
        check_installed(spec)
    else:
        _resolve(spec)


def _resolve(spec: str) -> tuple[Path, str, str | None]:
    """(GGUF path, backbone id, id of the same weights on the hf engine, for the price)."""
    from jitlab.llm import hf
    if spec == "embedded":
        return hf.embedded_gguf_path(), EMBEDDED_ID, hf.EMBEDDED_ID
    if spec == "gemma3-270m":
        return hf.gemma_gguf_path(), GEMMA_ID, hf.GEMMA_ID
    path = Path(spec).expanduser()
    if not path.is_file():
        raise ConfigError(f"llamacpp backbone: no GGUF file {spec!r}; use llamacpp:embedded, llamacpp:gemma3-270m or "
                          "llamacpp:<path to a .gguf file>")
    return path.resolve(), f"llamacpp:{path.resolve()}", None


class LlamaCppBackbone:
    """A GGUF model on llama.cpp: ``LlamaCppBackbone("embedded" | "gemma3-270m" | "<path.gguf>", **LlamaCppConfig)``."""

    def __init__(self, spec: str, **options):
        self.config = cfg = backend_config("llamacpp", LlamaCppConfig, options)   # checks its values too
        self.gguf, default_id, hf_id = _resolve(spec)
        self.id = (cfg.name or default_id) + ("+flash_attn" if cfg.flash_attn else "")
        self.price = find_price(resolve_pricing(cfg.pricing), self.id, *([hf_id] if hf_id else []))
        if self.price is None:
            log.warning("no price for backbone %s: its calls cost 0; pass pricing=<yaml> to price it", self.id)
        if find_spec("llama_cpp") is None:
            raise ConfigError(f"llamacpp backbone: llama-cpp-python is not installed; run {INSTALL}")
        self._key = (str(self.gguf), int(cfg.threads), int(cfg.max_batch), int(cfg.n_ctx), bool(cfg.prefix_reuse),
                     bool(cfg.flash_attn), cfg.wait_policy)
        self._warned: set[str] = set()
        self._local = threading.local()

    def _call(self, request: dict) -> dict:
        with _ENGINES_LOCK:
            engine = _ENGINES.get(self._key)
            if engine is None:
                engine = _ENGINES[self._key] = _Engine(*self._key)
        return engine.call(request)

    def chat(self, messages: list[dict], **params) -> Completion:
        start = time.perf_counter()
        for name in set(params) - set(_PARAMS) - self._warned:
            log.warning("llamacpp backbone ignores chat parameter %r (understood: %s)", name, ", ".join(_PARAMS))
            self._warned.add(name)
        stop = params.get("stop") or ()
        temperature = float(params.get("temperature", self.config.temperature) or 0.0)
        reply = self._call({"op": "chat", "messages": _clean(messages), "temperature": temperature,
                            "max_new": int(params.get("max_new_tokens", params.get("max_tokens", self.config.max_new_tokens))),
                            "stop": [stop] if isinstance(stop, str) else [str(s) for s in stop],
                            "top_p": params.get("top_p"), "seed": params.get("seed") if temperature else None})
        prompt, generated = reply["prompt_tokens"], reply["completion_tokens"]
        return Completion(text=reply["text"], prompt_tokens=prompt, completion_tokens=generated,
                          cost=self.price.cost(prompt, generated) if self.price else 0.0,
                          latency_s=time.perf_counter() - start, queue_s=reply["queue_s"], compute_s=reply["compute_s"],
                          reused_tokens=reply["reused"])

    def score(self, messages: list[dict], candidates: list[str]) -> list[float]:
        """Sum log-likelihood of each candidate as the complete assistant reply (its tokens plus the end token), as
        in hf.py: the prompt is prefilled once, each candidate is then one decode on top of it."""
        if not candidates:
            return []
        reply = self._call({"op": "score", "messages": _clean(messages), "candidates": [str(c) for c in candidates]})
        self._local.score_timing = {k: reply[k] for k in ("queue_s", "compute_s", "reused")}
        return reply["scores"]

    def last_score_timing(self) -> dict:
        """``queue_s``, ``compute_s`` and ``reused`` of this thread's last ``score`` call (LLMHandle records them)."""
        return dict(getattr(self._local, "score_timing", {}))

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        """The token ids a chat prompt is rendered to (for checks against hf's rendering)."""
        return self._call({"op": "tokenize", "messages": _clean(messages)})["ids"]

    def reply_ids(self, text: str) -> list[int]:
        """The token ids ``score`` gives a candidate reply: its tokens plus the end token."""
        return self._call({"op": "tokenize", "text": str(text)})["ids"]

    def token_logprobs(self, ids: list[int]) -> list[float]:
        """log p(ids[j] | ids[:j]) for j >= 1 from ONE plain forward pass over ``ids`` (a reference for ``score``)."""
        return self._call({"op": "logprobs", "ids": [int(i) for i in ids]})["logprobs"]

    def steps(self) -> dict[int, int]:
        """How many steps the engine ran with each number of sequences getting a token in them, since the last
        ``steps()`` call (for tests and benchmarks: {8: 47} means 47 steps that gave 8 sequences a token each)."""
        return {int(k): v for k, v in self._call({"op": "steps"})["steps"].items()}

    def close(self) -> None:
        """Stop this backbone's engine process (shared with every backbone on the same GGUF and options); a later
        call starts a new one."""
        with _ENGINES_LOCK:
            engine = _ENGINES.pop(self._key, None)
        if engine is not None:
            engine.close()


def _clean(messages: list[dict]) -> list[dict]:
    from jitlab.llm.hf import _clean as clean
    return clean(messages)


class _Call:
    __slots__ = ("done", "reply")

    def __init__(self):
        self.done, self.reply = threading.Event(), None


class _Engine:
    """Parent side of one engine process: writes requests, a reader thread hands each reply to its caller."""

    def __init__(self, gguf: str, threads: int, max_batch: int, n_ctx: int, prefix_reuse: bool, flash_attn: bool,
                 wait_policy: str):
        import jitlab
        self.name = Path(gguf).name
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(jitlab.__file__).parent.parent),
                                                                           os.environ.get("PYTHONPATH")]))}
        # llama.cpp's OpenMP threads meet at hundreds of barriers per token: spinning there is fast on an idle machine
        # and collapses on a busy one (jitlab/llm/README.md), hence an option, not the caller's environment
        env["OMP_WAIT_POLICY"] = wait_policy.upper()
        self.stderr = tempfile.TemporaryFile()
        args = {"gguf": gguf, "threads": threads, "max_batch": max_batch, "n_ctx": n_ctx, "reuse": prefix_reuse,
                "flash_attn": flash_attn, "parent": os.getpid()}
        self.proc = subprocess.Popen([sys.executable, "-m", "jitlab.llm.llamacpp", json.dumps(args)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        self.lock = threading.Lock()
        self.calls: dict[int, _Call] = {}
        self.next, self.dead = 0, None
        hello = self.proc.stdout.readline()
        if not hello:
            self.close()
            raise InfraError(self._exit_message())
        hello = json.loads(hello)
        if "error" in hello:
            self.close()
            raise ConfigError(hello["error"])
        self.info = hello["ready"]
        threading.Thread(target=self._read, name=f"jitlab-llamacpp-{self.proc.pid}", daemon=True).start()

    def _exit_message(self) -> str:
        code = self.proc.wait()
        self.stderr.seek(0)
        lines = [x for x in self.stderr.read().decode(errors="replace").splitlines() if x.strip()]
        return (f"llamacpp engine process for {self.name} exited with code {code}"
                + (f": {lines[-1].strip()[:300]}" if lines else "") + "; the next call starts a new one")

    def _read(self) -> None:
        for line in self.proc.stdout:
            reply = json.loads(line)
            with self.lock:
                call = self.calls.pop(reply["id"], None)
            if call is not None:
                call.reply = reply
                call.done.set()
        with self.lock:
            self.dead = self._exit_message()
            calls, self.calls = list(self.calls.values()), {}
        with _ENGINES_LOCK:   # a crashed engine is forgotten: the next call starts a new one
            for key, engine in list(_ENGINES.items()):
                if engine is self:
                    del _ENGINES[key]
        for call in calls:
            call.done.set()

    def call(self, request: dict) -> dict:
        call = _Call()
        with self.lock:
            if self.dead:
                raise InfraError(self.dead)
            self.next += 1
            self.calls[self.next] = call
            try:
                self.proc.stdin.write(json.dumps({"id": self.next, **request}).encode() + b"\n")
                self.proc.stdin.flush()
            except OSError:          # the reader thread will fail this call with the exit code
                pass
        call.done.wait()
        reply = call.reply
        if reply is None:
            raise InfraError(self.dead)
        if "error" in reply:
            raise (ConfigError if reply.get("kind") == "config" else InfraError)(reply["error"])
        return reply

    def close(self) -> None:
        try:
            self.proc.stdin.close()          # the child exits at end of input
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


_ENGINES: dict[tuple, _Engine] = {}
_ENGINES_LOCK = threading.Lock()


@atexit.register
def _close_all() -> None:
    for engine in list(_ENGINES.values()):
        engine.close()


@functools.cache
def _compile(template: str):
    """The template in transformers' sandboxed Jinja environment (trim_blocks, lstrip_blocks, its globals)."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals.update(raise_exception=raise_exception, strftime_now=lambda f: time.strftime(f))
    return env.from_string(template)


def render(template: str | None, messages: list[dict], bos: str = "", eos: str = "") -> str:
    """A chat prompt as transformers' ``apply_chat_template(tokenize=False)`` renders it: the generation prompt added,
    or a final assistant message continued; without a template, hf's plain-text transcript."""
    from jitlab.llm.hf import _plain_prompt
    if not template:
        return _plain_prompt(messages)
    tag = "CONTINUE_FINAL_MESSAGE_TAG "      # transformers' marker for continue_final_message
    cont = messages[-1]["role"] == "assistant"
    if cont:
        messages = [*messages[:-1], {**messages[-1], "content": messages[-1]["content"] + tag}]
    text = _compile(template).render(messages=messages, add_generation_prompt=not cont, bos_token=bos,
                                            eos_token=eos, tools=None, documents=None)
    if cont:
        at = text.rindex(tag.strip())
        text = text[:at] if text[at:at + len(tag)] == tag else text[:at].rstrip()
    return text


# ---- the engine process ---------------------------------------------------------------------------------------------

class _Request:
    def __init__(self, rid: int, ids: list[int], spec: dict, received: float, np):
        self.id, self.ids, self.received = rid, ids, received
        self.max_new, self.stop = max(1, int(spec["max_new"])), [s for s in spec["stop"] if s]
        self.temperature, self.top_p = float(spec["temperature"] or 0.0), spec.get("top_p")
        self.rng = np.random.default_rng(spec.get("seed"))
        self.out: list[int] = []
        self.text = b""
        self.todo: list[int] = []
        self.admitted, self.reused = 0.0, 0


class _Server:
    """The child's engine: model, context, slots and the continuous-batching loop."""

    def __init__(self, L, np, gguf: str, threads: int, max_batch: int, n_ctx: int, reuse: bool, flash_attn: bool,
                 send):
        import ctypes
        self.L, self.np, self.ct, self.send, self.reuse = L, np, ctypes, send, reuse
        L.llama_backend_init()
        self.model = L.llama_model_load_from_file(gguf.encode(), L.llama_model_default_params())
        if not self.model:
            raise ConfigError(f"llamacpp backbone: llama.cpp could not load {gguf} (not a GGUF file, or a model "
                              "architecture this llama.cpp build does not know)")
        n_seq = max_batch + 1                 # the last slot is score's
        cp = L.llama_context_default_params()
        cp.n_ctx = min(n_ctx, L.llama_model_n_ctx_train(self.model) or n_ctx) * n_seq
        # a KV stream per sequence, each attending over its own tokens only (a unified cache was faster for short
        # prompts but attends over every sequence's tokens: slower from a few hundred tokens a prompt on)
        cp.n_seq_max, cp.n_batch, cp.n_ubatch, cp.kv_unified = n_seq, 512, 512, False
        cp.n_threads = cp.n_threads_batch = threads
        cp.flash_attn_type = 1 if flash_attn else 0   # off by default, as in llama-cpp-python's Llama
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise InfraError(f"llamacpp backbone: could not create a llama.cpp context of {cp.n_ctx} tokens for {gguf}")
        self.mem, self.vocab = L.llama_get_memory(self.ctx), L.llama_model_get_vocab(self.model)
        self.n_vocab, self.n_ctx, self.n_batch = L.llama_vocab_n_tokens(self.vocab), L.llama_n_ctx_seq(self.ctx), 512
        self.batch = L.llama_batch_init(self.n_batch, 0, 1)
        self.template = self._meta("tokenizer.chat_template")
        bos, eos = L.llama_vocab_bos(self.vocab), L.llama_vocab_eos(self.vocab)
        self.bos, self.eos = (self._piece(t, True).decode(errors="replace") if t >= 0 else "" for t in (bos, eos))
        self.end_id, self.extra_end = eos, None
        if not self.template:   # hf's plain transcript: a blank line ends a reply (see hf._Engine)
            blank = self.tokenize("\n\n", False)
            if len(blank) == 1:
                self.end_id = self.extra_end = blank[0]
        self.slots: list[dict] = [{"seq": s, "cached": [], "req": None, "used": 0.0} for s in range(n_seq)]
        self.waiting: list[_Request] = []
        self.sizes: dict[int, int] = {}       # sequences decoding in a step -> steps (the "steps" request)

    def _meta(self, key: str) -> str | None:
        buf = self.ct.create_string_buffer(1 << 17)
        return buf.value.decode(errors="replace") if self.L.llama_model_meta_val_str(self.model, key.encode(), buf,
                                                                                    len(buf)) >= 0 else None

    def tokenize(self, text: str, add_special: bool) -> list[int]:
        data = text.encode()
        size = len(data) + 8
        while True:
            buf = (self.L.llama_token * size)()
            n = self.L.llama_tokenize(self.vocab, data, len(data), buf, size, add_special, True)
            if n >= 0:
                return list(buf[:n])
            size = -n

    def _piece(self, token: int, special: bool = False) -> bytes:
        buf = self.ct.create_string_buffer(256)
        n = self.L.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        return buf.raw[:max(n, 0)]

    def _is_end(self, token: int) -> bool:
        return bool(self.L.llama_vocab_is_eog(self.vocab, token)) or token == self.extra_end

    def prompt(self, messages: list[dict], limit_new: int) -> list[int]:
        """Rendered and tokenized as hf's ``prompt_ids``; a prompt too long for the slot keeps its last tokens."""
        ids = self.tokenize(render(self.template, messages, self.bos, self.eos), not self.template)
        limit = max(16, self.n_ctx - limit_new)
        return ids[-limit:]

    def _decode(self, rows: list[tuple[int, int, int, bool]]) -> None:
        """One llama_decode of (token, position, sequence, wants logits) rows."""
        b = self.batch
        for i, (token, pos, seq, logits) in enumerate(rows):
            b.token[i], b.pos[i], b.n_seq_id[i], b.seq_id[i][0], b.logits[i] = token, pos, 1, seq, logits
        b.n_tokens = len(rows)
        if rc := self.L.llama_decode(self.ctx, b):
            raise InfraError(f"llama_decode failed (code {rc}) on a batch of {len(rows)} tokens")

    def _logprobs(self, i: int):
        np = self.np
        x = np.ctypeslib.as_array(self.L.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,)).astype(np.float64)
        return x - x.max() - np.log(np.exp(x - x.max()).sum())

    def _take(self, slot: dict, ids: list[int]) -> int:
        """Point ``slot`` at ``ids``: keep its cached common prefix (always feeding at least the last token), drop
        the rest. Returns the tokens kept."""
        keep = min(len(os.path.commonprefix([slot["cached"], ids])), len(ids) - 1) if self.reuse else 0
        if not self.L.llama_memory_seq_rm(self.mem, slot["seq"], keep, -1):   # partial removal refused (SWA layers)
            self.L.llama_memory_seq_rm(self.mem, slot["seq"], -1, -1)
            keep = 0
        slot["cached"] = slot["cached"][:keep]
        return keep

    def _prefill_alone(self, slot: dict, ids: list[int], all_logits: bool = False) -> list:
        """Feed ``ids`` (after the kept prefix) to ``slot`` by themselves; log-probs of each fed position when
        ``all_logits``, else of the last one only."""
        keep = self._take(slot, ids)
        out = []
        for at in range(keep, len(ids), self.n_batch):
            chunk = ids[at:at + self.n_batch]
            self._decode([(t, at + j, slot["seq"], all_logits or at + j == len(ids) - 1) for j, t in enumerate(chunk)])
            out += [self._logprobs(j) for j in range(len(chunk)) if all_logits or at + j == len(ids) - 1]
        slot["cached"] = list(ids)
        return out

    # -- requests --------------------------------------------------------------------------------------------------
    def receive(self, msg: dict) -> None:
        received = time.monotonic()
        op = msg["op"]
        if op == "chat":
            req = _Request(msg["id"], [], msg, received, self.np)
            req.ids = self.prompt(msg["messages"], req.max_new)
            self.waiting.append(req)
        elif op == "tokenize":
            ids = self.prompt(msg["messages"], 0) if "messages" in msg else self.tokenize(msg["text"], False) + [self.end_id]
            self.send({"id": msg["id"], "ids": ids})
        elif op == "steps":
            self.send({"id": msg["id"], "steps": self.sizes})
            self.sizes = {}
        elif op == "logprobs":
            self.send({"id": msg["id"], "logprobs": self._plain_logprobs(msg["ids"])})
        elif op == "score":
            self.score(msg, received)

    def _plain_logprobs(self, ids: list[int]) -> list[float]:
        slot = self.slots[-1]
        self.L.llama_memory_seq_rm(self.mem, slot["seq"], -1, -1)
        slot["cached"] = []
        rows = self._prefill_alone(slot, ids, all_logits=True)
        return [float(rows[j - 1][t]) for j, t in enumerate(ids) if j]

    def score(self, msg: dict, received: float) -> None:
        started = time.monotonic()
        conts = [self.tokenize(c, False) + [self.end_id] for c in msg["candidates"]]
        prompt = self.prompt(msg["messages"], max(len(c) for c in conts))
        slot, at = self.slots[-1], len(prompt)
        reused = min(len(os.path.commonprefix([slot["cached"], prompt])), at - 1) if self.reuse else 0
        first = self._prefill_alone(slot, prompt)[-1]
        scores = []
        for cont in conts:        # one decode per candidate on top of the prompt, then its tokens are dropped
            total = float(first[cont[0]])
            if len(cont) > 1:
                self._decode([(t, at + j, slot["seq"], True) for j, t in enumerate(cont[:-1])])
                total += sum(float(self._logprobs(j)[t]) for j, t in enumerate(cont[1:]))
                self.L.llama_memory_seq_rm(self.mem, slot["seq"], at, -1)
            scores.append(total)
        self.send({"id": msg["id"], "scores": scores, "queue_s": started - received,
                   "compute_s": time.monotonic() - started, "reused": reused})

    def admit(self) -> None:
        free = [s for s in self.slots[:-1] if s["req"] is None]
        while self.waiting and free:
            req = self.waiting.pop(0)
            # the longest common prefix wins; among equals the slot idle longest, so recent episodes keep theirs
            slot = max(free, key=lambda s: (len(os.path.commonprefix([s["cached"], req.ids])), -s["used"]))
            free.remove(slot)
            req.reused = self._take(slot, req.ids)
            req.todo, req.admitted, slot["req"] = req.ids[req.reused:], time.monotonic(), req

    def step(self) -> None:
        """One llama_decode: the pending token of each decoding sequence, then prompt chunks up to n_batch tokens."""
        rows, fed, wants = [], [], []
        for slot in self.slots[:-1]:
            req = slot["req"]
            if req is not None and not req.todo:
                wants.append((slot, len(rows)))
                fed.append((slot, [req.out[-1]]))
                rows.append((req.out[-1], len(slot["cached"]), slot["seq"], True))
        for slot in self.slots[:-1]:
            req = slot["req"]
            room = self.n_batch - len(rows)
            if req is None or not req.todo or room <= 0:
                continue
            chunk, req.todo = req.todo[:room], req.todo[room:]
            rows += [(t, len(slot["cached"]) + j, slot["seq"], not req.todo and j == len(chunk) - 1)
                     for j, t in enumerate(chunk)]
            fed.append((slot, chunk))
            if not req.todo:
                wants.append((slot, len(rows) - 1))
        try:
            self._decode(rows)
        except InfraError as exc:
            for slot, _ in fed:
                self._finish(slot, error=str(exc))
            return
        for slot, tokens in fed:
            slot["cached"] += tokens
        self.sizes[len(wants)] = self.sizes.get(len(wants), 0) + 1
        for slot, i in wants:
            self._advance(slot, self._choose(slot["req"], i))

    def _choose(self, req: _Request, i: int) -> int:
        np = self.np
        logits = np.ctypeslib.as_array(self.L.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,))
        if req.temperature <= 0:
            return int(np.argmax(logits))
        x = logits.astype(np.float64) / req.temperature
        p = np.exp(x - x.max())
        p /= p.sum()
        if req.top_p and req.top_p < 1.0:         # nucleus: the most likely tokens holding top_p of the mass
            order = np.argsort(-p)
            keep = order[:int(np.searchsorted(np.cumsum(p[order]), req.top_p)) + 1]
            p = np.zeros_like(p)
            p[keep] = 1.0
            p *= np.exp(x - x.max())
            p /= p.sum()
        return int(req.rng.choice(self.n_vocab, p=p))

    def _advance(self, slot: dict, token: int) -> None:
        req = slot["req"]
        req.out.append(token)
        if self._is_end(token):
            return self._finish(slot)
        req.text += self._piece(token)
        text = req.text.decode(errors="replace")
        hits = [text.find(s) for s in req.stop if s in text]
        if hits:
            return self._finish(slot, text=text[:min(hits)])
        if len(req.out) >= req.max_new or len(slot["cached"]) + 1 >= self.n_ctx:
            self._finish(slot)

    def _finish(self, slot: dict, text: str | None = None, error: str | None = None) -> None:
        req, slot["req"], slot["used"] = slot["req"], None, time.monotonic()
        if error is not None:
            self.L.llama_memory_seq_rm(self.mem, slot["seq"], -1, -1)
            slot["cached"] = []
            return self.send({"id": req.id, "error": error})
        self.send({"id": req.id, "text": req.text.decode(errors="replace") if text is None else text,
                   "prompt_tokens": len(req.ids), "completion_tokens": len(req.out), "reused": req.reused,
                   "queue_s": req.admitted - req.received, "compute_s": time.monotonic() - req.admitted})

    def run(self, fd: int, parent: int) -> None:
        buf = b""
        while True:
            busy = self.waiting or any(s["req"] is not None for s in self.slots)
            if select.select([fd], [], [], 0 if busy else 1.0)[0]:
                data = os.read(fd, 1 << 20)
                if not data:
                    return                        # the parent closed our input (close() or its exit)
                *lines, buf = (buf + data).split(b"\n")
                for line in lines:
                    msg = json.loads(line)
                    try:
                        self.receive(msg)
                    except Exception as exc:      # a bad request fails alone, never the engine
                        kind = "config" if isinstance(exc, ConfigError) or "jinja2" in type(exc).__module__ else "infra"
                        self.send({"id": msg["id"], "error": f"llamacpp backbone: {type(exc).__name__}: {exc}",
                                   "kind": kind})
            elif os.getppid() != parent:
                return                            # the parent died and we were re-parented
            self.admit()
            if any(s["req"] is not None for s in self.slots[:-1]):
                self.step()


def _child(args: dict) -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)   # the reply channel; fd 1 goes to stderr so C prints cannot corrupt it
    os.dup2(2, 1)

    def send(msg: dict) -> None:
        out.write(json.dumps(msg) + "\n")

    try:
        import llama_cpp
        import numpy
        llama_cpp._logger.set_verbose(False)
    except (ImportError, OSError) as exc:
        return send({"error": f"llamacpp backbone: llama_cpp cannot be imported ({type(exc).__name__}: {exc}); "
                              f"run {INSTALL}"})
    try:
        server = _Server(llama_cpp, numpy, args["gguf"], args["threads"], args["max_batch"], args["n_ctx"], args["reuse"],
                         args["flash_attn"], send)
    except ConfigError as exc:
        return send({"error": str(exc)})
    send({"ready": {"n_ctx": server.n_ctx, "n_vocab": server.n_vocab, "chat_template": server.template is not None}})
    server.run(sys.stdin.fileno(), args["parent"])


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
