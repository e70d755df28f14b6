"""llama.cpp backbones (optional extra ``jitlab[llamacpp]``): ``llamacpp:embedded``, ``llamacpp:gemma3-270m`` and
``llamacpp:<path.gguf>``, with the hf backend's ``chat``/``score`` interface on llama.cpp's quantized CPU kernels.

    llm = get_backbone("llamacpp:embedded", threads=2)        # id llamacpp:smollm2-135m-instruct
    llm.chat([{"role": "user", "content": "hi"}], max_new_tokens=32, stop=["\\n"])
    llm.score(messages, ["go east", "eat sword"])           # log-likelihood of each reply

Engine: one child process per (GGUF, options) per parent process, started on the first call
(``python -m jitlab.llm.llamacpp_server``: jitlab/llm/llamacpp_server.py) and fed JSON lines over its stdin/stdout.
llama.cpp never runs in the
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
import collections
import functools
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

import jitlab
from jitlab.errors import ConfigError, InfraError
from jitlab.llm import hf
from jitlab.llm.base import backend_config
from jitlab.llm.hf import _clean, _plain_prompt, check_installed
from jitlab.llm.pricing import find_price, resolve_pricing
from jitlab.paths import data_dir
from jitlab.protocol import Completion

__all__ = ["EMBEDDED_ID", "GEMMA_ID", "INSTALL", "RETYPED", "LlamaCppBackbone", "LlamaCppConfig", "render", "retyped_path"]

log = logging.getLogger(__name__)

EMBEDDED_ID = "llamacpp:smollm2-135m-instruct"
# the weight types a packaged GGUF can be re-typed to (llamacpp:embedded-q8_0): llama.cpp ftype numbers. Q8_0 and
# Q4_0 have llama.cpp's fast CPU matrix kernels (the packaged SmolLM2 file is Q4_1, which has none on x86); bf16 and
# f16 hold the de-quantized weights almost exactly. Each is other weights, so another backbone id (…-q8_0).
RETYPED = {"q8_0": 7, "q4_0": 2, "bf16": 32, "f16": 1}
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
    workers: int = field(default=1, metadata={"help": "engine processes, each with `threads` threads; calling "
                                                      "threads go to them in turn and each keeps its own, so an "
                                                      "episode finds its prefix there", "min": 1, "max": 16})
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
    packaged, _, kind = spec.partition("-")
    if packaged in ("embedded", "gemma3-270m") and (not kind or kind in RETYPED):
        check_installed(packaged)
    else:
        _resolve(spec)


def retyped_path(source: Path, kind: str) -> Path:
    """Where the ``kind`` (a RETYPED key) copy of a packaged GGUF lives: JITLAB_HOME/data/models/<stem>-<kind>.gguf,
    written by the engine process on first use (llama.cpp's own quantizer, from the packaged file)."""
    return data_dir("models") / f"{source.stem}-{kind}.gguf"


def _resolve(spec: str) -> tuple[Path, str, str | None, Path | None]:
    """(GGUF path, backbone id, id of the same weights on the hf engine for the price, the packaged GGUF a retyped
    copy is made from or None)."""
    packaged, _, kind = spec.partition("-")
    if packaged in ("embedded", "gemma3-270m") and kind in RETYPED:
        source, model_id, hf_id, _ = _resolve(packaged)
        return retyped_path(source, kind), f"{model_id}-{kind}", hf_id, source
    if spec == "embedded":
        return hf.embedded_gguf_path(), EMBEDDED_ID, hf.EMBEDDED_ID, None
    if spec == "gemma3-270m":
        return hf.gemma_gguf_path(), GEMMA_ID, hf.GEMMA_ID, None
    path = Path(spec).expanduser()
    if not path.is_file():
        raise ConfigError(f"llamacpp backbone: no GGUF file {spec!r}; use llamacpp:embedded, llamacpp:gemma3-270m "
                          f"(or either with -{'|-'.join(RETYPED)}) or llamacpp:<path to a .gguf file>")
    return path.resolve(), f"llamacpp:{path.resolve()}", None, None


class LlamaCppBackbone:
    """A GGUF model on llama.cpp: ``LlamaCppBackbone("embedded" | "gemma3-270m" | "<path.gguf>", **LlamaCppConfig)``."""

    def __init__(self, spec: str, **options):
        self.config = cfg = backend_config("llamacpp", LlamaCppConfig, options)   # checks its values too
        self.gguf, default_id, hf_id, source = _resolve(spec)
        self.id = (cfg.name or default_id) + ("+flash_attn" if cfg.flash_attn else "")
        self.price = find_price(resolve_pricing(cfg.pricing), self.id, *([hf_id] if hf_id else []))
        if self.price is None:
            log.warning("no price for backbone %s: its calls cost 0; pass pricing=<yaml> to price it", self.id)
        if find_spec("llama_cpp") is None:
            raise ConfigError(f"llamacpp backbone: llama-cpp-python is not installed; run {INSTALL}")
        self._key = (str(self.gguf), str(source or ""), int(cfg.threads), int(cfg.max_batch), int(cfg.n_ctx),
                     bool(cfg.prefix_reuse), bool(cfg.flash_attn), cfg.wait_policy)
        self._warned: set[str] = set()
        self._local = threading.local()

    def _call(self, request: dict) -> dict:
        with _ENGINES_LOCK:
            worker = getattr(self._local, "worker", None)
            if worker is None:   # a thread's first call: the workers take calling threads in turn
                worker = self._local.worker = _TURNS[self._key] % self.config.workers
                _TURNS[self._key] += 1
            engine = _ENGINES.get((*self._key, worker))
            if engine is None:
                engine = _ENGINES[(*self._key, worker)] = _Engine(*self._key)
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
        self._local.score_timing = {k: reply[k] for k in ("queue_s", "compute_s", "reused", "prompt_tokens")}
        return reply["scores"]

    def last_score_timing(self) -> dict:
        """``queue_s``, ``compute_s``, ``reused`` and ``prompt_tokens`` (the prompt's and the candidates' tokens) of
        this thread's last ``score`` call (LLMHandle records them)."""
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
        """How many steps this thread's engine worker ran with each number of sequences getting a token in them,
        since the last ``steps()`` call (for tests and benchmarks: {8: 47} means 47 steps that gave 8 sequences a
        token each)."""
        return {int(k): v for k, v in self._call({"op": "steps"})["steps"].items()}

    def close(self) -> None:
        """Stop this backbone's engine process (shared with every backbone on the same GGUF and options); a later
        call starts a new one."""
        with _ENGINES_LOCK:
            engines = [_ENGINES.pop((*self._key, w), None) for w in range(self.config.workers)]
        for engine in filter(None, engines):
            engine.close()


class _Call:
    __slots__ = ("done", "reply")

    def __init__(self):
        self.done, self.reply = threading.Event(), None


class _Engine:
    """Parent side of one engine process: writes requests, a reader thread hands each reply to its caller."""

    def __init__(self, gguf: str, source: str, threads: int, max_batch: int, n_ctx: int, prefix_reuse: bool,
                 flash_attn: bool, wait_policy: str):
        self.name = Path(gguf).name
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(jitlab.__file__).parent.parent),
                                                                           os.environ.get("PYTHONPATH")]))}
        # llama.cpp's OpenMP threads meet at hundreds of barriers per token: spinning there is fast on an idle machine
        # and collapses on a busy one (jitlab/llm/README.md), hence an option, not the caller's environment
        env["OMP_WAIT_POLICY"] = wait_policy.upper()
        self.stderr = tempfile.TemporaryFile()
        args = {"gguf": gguf, "source": source, "threads": threads, "max_batch": max_batch, "n_ctx": n_ctx, "reuse": prefix_reuse,
                "flash_attn": flash_attn, "parent": os.getpid()}
        self.proc = subprocess.Popen([sys.executable, "-m", "jitlab.llm.llamacpp_server", json.dumps(args)], env=env,
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
_TURNS: collections.Counter = collections.Counter()   # calling threads handed out per engine key (round robin)


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
