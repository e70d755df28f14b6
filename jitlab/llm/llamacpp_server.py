"""The llamacpp backbone's engine process (``python -m jitlab.llm.llamacpp_server ARGS``, started by
jitlab.llm.llamacpp): it loads the GGUF with llama-cpp-python, reads JSON-line requests on stdin, decodes every
admitted request together (continuous batching over sequence slots, prefix reuse per slot) and writes JSON-line
replies on a duplicate of stdout (fd 1 itself goes to stderr, so C prints cannot corrupt the channel). It exits
when its parent does. See jitlab.llm.llamacpp's docstring for the semantics.
"""
from __future__ import annotations

import ctypes
import json
import os
import select
import sys
import time

from jitlab.errors import ConfigError, InfraError
from jitlab.llm.llamacpp import INSTALL, RETYPED, render

SCORE_SEQS = 32    # sequences of a scoring context: the prompt's, then up to 31 candidates decoded together ...
SCORE_ROOM = 2048  # ... holding at most this many tokens (the context's room beyond one prompt)
SCORE_CONTEXTS = 8  # scoring contexts (made as needed), each keeping its last prompt: episodes scoring in turn keep theirs


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
        # score's own contexts, their KV cache unified: a prompt's cells are given to every candidate's sequence at
        # no cost (llama_memory_seq_cp only adds sequence ids to cells), so all candidates decode in one batch; one
        # prompt per context (a unified cache attends over all its cells), made when a prompt finds no prefix kept
        sp = self.sparams = L.llama_context_default_params()
        sp.n_ctx, sp.n_seq_max, sp.kv_unified = cp.n_ctx // n_seq + SCORE_ROOM, SCORE_SEQS, True
        sp.n_batch = sp.n_ubatch = 512
        sp.n_threads = sp.n_threads_batch = threads
        sp.flash_attn_type = cp.flash_attn_type
        self.gguf, self.scorers = gguf, []
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

    def _decode(self, rows: list[tuple[int, int, int, bool]], ctx=None) -> None:
        """One llama_decode of (token, position, sequence, wants logits) rows in ``ctx`` (default: the chat context)."""
        b = self.batch
        for i, (token, pos, seq, logits) in enumerate(rows):
            b.token[i], b.pos[i], b.n_seq_id[i], b.seq_id[i][0], b.logits[i] = token, pos, 1, seq, logits
        b.n_tokens = len(rows)
        if rc := self.L.llama_decode(ctx or self.ctx, b):
            raise InfraError(f"llama_decode failed (code {rc}) on a batch of {len(rows)} tokens")

    def _logits(self, i: int, ctx=None):
        return self.np.ctypeslib.as_array(self.L.llama_get_logits_ith(ctx or self.ctx, i),
                                          shape=(self.n_vocab,)).astype(self.np.float64)

    def _logprobs(self, i: int, ctx=None):
        x = self._logits(i, ctx)
        top = x.max()
        return x - top - self.np.log(self.np.exp(x - top).sum())

    def _logprob(self, i: int, token: int, ctx=None) -> float:
        """``_logprobs(i, ctx)[token]``, the same float, without the whole vocabulary's log-probabilities (score's
        candidate tokens: one wanted per row)."""
        x = self._logits(i, ctx)
        top = x.max()
        return float(x[token] - top - self.np.log(self.np.exp(x - top).sum()))

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

    def _scorer(self, prompt: list[int]) -> tuple[dict, int]:
        """The scoring context for ``prompt`` and how many of its tokens it keeps: the one keeping the longest
        prefix (the least recently used among equals); a new one while fewer than SCORE_CONTEXTS exist and none
        keeps half the prompt."""
        kept = [(min(len(os.path.commonprefix([s["cached"], prompt])), len(prompt) - 1) if self.reuse else 0, -s["used"],
                 i) for i, s in enumerate(self.scorers)]
        keep, _, i = max(kept, default=(0, 0, -1))
        if i < 0 or (2 * keep < len(prompt) and len(self.scorers) < SCORE_CONTEXTS):
            ctx = self.L.llama_init_from_model(self.model, self.sparams)
            if not ctx:
                raise InfraError(f"llamacpp backbone: could not create llama.cpp's scoring context for {self.gguf}")
            self.scorers.append({"ctx": ctx, "mem": self.L.llama_get_memory(ctx), "cached": [], "used": 0.0})
            keep, i = 0, len(self.scorers) - 1
        return self.scorers[i], keep

    def score(self, msg: dict, received: float) -> None:
        """Each candidate's summed log-likelihood after the prompt (its tokens plus the end token), in a scoring
        context (``_scorer``): the prompt is prefilled once as sequence 0 (from the common prefix the context kept of
        its last prompt), then every candidate, a sequence of its own sharing the prompt's cells, in one decode per
        SCORE_SEQS - 1."""
        started = time.monotonic()
        L = self.L
        conts = [self.tokenize(c, False) + [self.end_id] for c in msg["candidates"]]
        prompt = self.prompt(msg["messages"], max(len(c) for c in conts))
        at = len(prompt)
        scorer, keep = self._scorer(prompt)
        sctx, smem = scorer["ctx"], scorer["mem"]
        L.llama_memory_seq_rm(smem, 0, keep, -1)
        scorer["cached"] = []                  # until the prompt is in (a failed decode leaves it unknown)
        for chunk_at in range(keep, at, self.n_batch):
            chunk = prompt[chunk_at:chunk_at + self.n_batch]
            self._decode([(t, chunk_at + j, 0, chunk_at + j == at - 1) for j, t in enumerate(chunk)], sctx)
        scorer["cached"], scorer["used"] = list(prompt), time.monotonic()
        first = self._logprobs(self.batch.n_tokens - 1, sctx)
        scores = [float(first[c[0]]) for c in conts]
        groups: list[list[int]] = []       # candidates decoded together: < SCORE_SEQS of them, SCORE_ROOM tokens
        for i, c in enumerate(conts):
            if len(c) > 1:
                if not groups or len(groups[-1]) == SCORE_SEQS - 1 or sum(len(conts[j]) for j in groups[-1]) + len(
                        c) > SCORE_ROOM:
                    groups.append([])
                groups[-1].append(i)
        for group in groups:
            rows, where = [], []
            for seq, i in enumerate(group, start=1):
                L.llama_memory_seq_cp(smem, 0, seq, 0, at)
                for j, t in enumerate(conts[i][:-1]):
                    where.append((i, conts[i][j + 1], len(rows)))
                    rows.append((t, at + j, seq, True))
            for r in range(0, len(rows), self.n_batch):
                part = rows[r:r + self.n_batch]
                self._decode(part, sctx)
                for i, token, row in where:
                    if r <= row < r + len(part):
                        scores[i] += self._logprob(row - r, token, sctx)
            for seq in range(1, len(group) + 1):
                L.llama_memory_seq_rm(smem, seq, -1, -1)
        self.send({"id": msg["id"], "scores": scores, "queue_s": started - received,
                   "compute_s": time.monotonic() - started, "reused": keep,
                   "prompt_tokens": at + sum(len(c) for c in conts)})

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


def retype(L, source: str, target: str) -> None:
    """Write ``target`` (its name ends in -<RETYPED key>.gguf) from the packaged GGUF ``source`` with llama.cpp's own
    quantizer (de-quantized to float, then the new type); written beside it and renamed, so a reader never sees half a
    file and two engines making it at once both end with a whole one."""
    kind = os.path.basename(target)[:-len(".gguf")].rsplit("-", 1)[1]
    params = L.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = RETYPED[kind], True, os.cpu_count() or 1
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = f"{target}.{os.getpid()}.tmp"
    try:
        if L.llama_model_quantize(source.encode(), tmp.encode(), ctypes.byref(params)) != 0:
            raise ConfigError(f"llamacpp backbone: llama.cpp could not write a {kind} copy of {source}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


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
        if args.get("source") and not os.path.isfile(args["gguf"]):
            retype(llama_cpp, args["source"], args["gguf"])
        server = _Server(llama_cpp, numpy, args["gguf"], args["threads"], args["max_batch"], args["n_ctx"], args["reuse"],
                         args["flash_attn"], send)
    except ConfigError as exc:
        return send({"error": str(exc)})
    send({"ready": {"n_ctx": server.n_ctx, "n_vocab": server.n_vocab, "chat_template": server.template is not None}})
    server.run(sys.stdin.fileno(), args["parent"])


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
