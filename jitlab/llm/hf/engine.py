"""The hf batching worker: one thread per loaded model merges the pending requests of every caller into batched
``generate`` calls, reusing cached prefixes (see the package docstring, "Batching" and "Prefix reuse")."""
from __future__ import annotations

import gc
import queue
import threading
import time
from pathlib import Path

from jitlab import memory
from jitlab.errors import ConfigError, InfraError
from jitlab.llm.hf.internals import _cache_arg, _full_attention_only, _growing_cache, _last_logits_only
from jitlab.llm.hf.load import _load
from jitlab.llm.hf.prefix_cache import _PrefixCache


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
        self._closed = False                  # released (jitlab.llm.hf.release): the worker ends, nothing is served
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
        if self._closed:
            raise InfraError("local model engine was released (jitlab.llm.hf.release); make a new backbone")
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

    def close(self) -> None:
        """End the batching worker once what it holds is served, so the engine (weights, prefix cache) can be freed."""
        self._closed = True
        self._queue.put(None)                 # wakes a worker waiting on an empty queue

    def _serve(self) -> None:
        pending: list[_Request] = []
        while not (self._closed and not pending):
            pending += [r for r in self._collect(len(pending)) if r is not None]
            if not pending:                   # close()'s wake-up
                continue
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


def release(directory: str | Path) -> int:
    """Drop this process's engines loaded from ``directory`` (a model or adapter no longer used: each pipeline policy
    once evaluated). Their memory goes when no backbone holds them; the freed heap is handed back to the system.
    Returns how many were dropped."""
    with _ENGINES_LOCK:
        keys = [k for k in _ENGINES if k[0] == str(Path(directory).expanduser().resolve())]
        for key in keys:
            _ENGINES.pop(key).close()
    gc.collect()
    memory.trim()
    return len(keys)


def _engine(directory: Path, gguf_file: str | None, device: str, dtype: str, convert: bool,
            quantize: str | None = None) -> _Engine:
    key = (str(directory), gguf_file, device, dtype, quantize)
    memory.steady_heap()
    with _ENGINES_LOCK:                      # load once per process, even when threads race here
        if key not in _ENGINES:
            _ENGINES[key] = _Engine(directory, gguf_file, device, dtype, convert, quantize)
        return _ENGINES[key]
