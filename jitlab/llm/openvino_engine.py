"""The ``openvino:`` backbone's engine (jitlab/llm/openvino.py): one per model folder and options in a process.

Chat: an OpenVINO GenAI ``ContinuousBatchingPipeline`` driven by one worker thread. Callers hand it token ids; it
adds them to the pipeline and runs ``step()`` while any request is unfinished, so requests of concurrent caller
threads share every step and join or leave at any step (paged KV cache, prompt chunks and decoding tokens in one
step, prefix caching across requests). Score: the same IR compiled a second time as a stateless model whose
keys/values are inputs and outputs (``scoring_model``: its head cut to the last ``keep`` positions): the prompt is
prefilled once, on the keys/values of the longest prefix kept of one of the last ``_KEEP`` scored prompts, then every
candidate is one row of a single batched pass on the prompt's keys/values (``beam_idx`` copies them into each row).
One step or one scoring pass runs at a time (``lock``).
Prompt rendering and reply cutting (stop strings, end tokens) are the hf engine's own methods.
"""
from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

from jitlab.errors import InfraError
from jitlab.llm.hf import materialize_gguf
from jitlab.llm.hf.engine import _Engine as _HFEngine
from jitlab.llm.openvino_model import scoring_model

_KEEP = 8   # scored prompts whose keys/values are kept for the next score call's prefix


class _Request:
    __slots__ = ("compute_s", "done", "error", "handle", "ids", "config", "queue_s", "started", "submitted", "tokens")

    def __init__(self, ids: list[int], config):
        self.ids, self.config, self.done = ids, config, threading.Event()
        self.handle = self.error = self.tokens = None
        self.submitted, self.started, self.queue_s, self.compute_s = time.monotonic(), 0.0, 0.0, 0.0


class _Engine:
    prompt_ids = _HFEngine.prompt_ids   # the hf engine's chat-template rendering, so prompts are the same tokens
    finish = _HFEngine.finish           # and its reply cutting: end tokens, stop strings

    def __init__(self, folder: Path, gguf: Path, precision: str, threads: int | None, pin: bool, max_batch: int,
                 kv_cache_gb: int, step_tokens: int, prefix_reuse: bool):
        import numpy as np
        import openvino as ov
        import openvino_genai as genai
        from transformers import AutoConfig, AutoTokenizer, GenerationConfig
        hf_folder = materialize_gguf(gguf)      # the tokenizer, end tokens and context the hf engine uses
        self.tokenizer = AutoTokenizer.from_pretrained(hf_folder, local_files_only=True)
        eos = GenerationConfig.from_pretrained(hf_folder, local_files_only=True).eos_token_id
        self.eos_ids = sorted({*(eos if isinstance(eos, list) else [eos] if eos is not None else []),
                               self.tokenizer.eos_token_id} - {None})
        self.end_id = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else self.eos_ids[0]
        self.prompt_format = "chat_template" if getattr(self.tokenizer, "chat_template", None) else "plain"
        self.context = int(getattr(AutoConfig.from_pretrained(hf_folder), "max_position_embeddings", 2048) or 2048)
        props = {"INFERENCE_PRECISION_HINT": precision, "KV_CACHE_PRECISION": "f32" if precision == "f32" else "f16",
                 "ENABLE_CPU_PINNING": pin}
        if threads:
            props["INFERENCE_NUM_THREADS"] = int(threads)
        sched = genai.SchedulerConfig()
        sched.cache_size, sched.max_num_seqs, sched.max_num_batched_tokens = kv_cache_gb, max_batch, step_tokens
        sched.enable_prefix_caching, sched.dynamic_split_fuse = prefix_reuse, True
        self.pipe = genai.ContinuousBatchingPipeline(str(folder), sched, "CPU", props)
        self.scorer = ov.Core().compile_model(scoring_model(folder / "openvino_model.xml"), "CPU", props)
        self.score_request = self.scorer.create_infer_request()
        self.no_past = {p.any_name: np.zeros((1, p.partial_shape[1].get_length(), 0, p.partial_shape[3].get_length()),
                                             np.float32) for p in self.scorer.inputs if p.any_name.startswith("past.")}
        self.kept: list[tuple[list[int], dict]] = []      # scored prompts' keys/values (past.<i>), most recent last
        self.genai, self.ov, self.np = genai, ov, np
        self.lock = threading.Lock()          # one pipeline step or one scoring pass at a time
        self.cv = threading.Condition()
        self.pending: list[_Request] = []
        self.ids = itertools.count()
        self.steps = 0
        threading.Thread(target=self._serve, name="jitlab-openvino", daemon=True).start()

    # -- chat: continuous batching ----------------------------------------------------------------
    def config(self, max_new: int, temperature: float, top_p, stop: tuple, seed):
        c = self.genai.GenerationConfig()
        c.max_new_tokens, c.stop_token_ids, c.eos_token_id = int(max_new), set(self.eos_ids), self.end_id
        if stop:
            c.stop_strings, c.include_stop_str_in_output = set(stop), True   # the text is cut by finish()
        if temperature > 0:
            c.do_sample, c.temperature, c.top_p = True, float(temperature), float(top_p or 1.0)
            if seed is not None:
                c.rng_seed = int(seed)
        return c

    def generate(self, ids: list[int], config) -> _Request:
        request = _Request(ids, config)
        with self.cv:
            self.pending.append(request)
            self.cv.notify()
        request.done.wait()
        if request.error is not None:
            raise request.error
        return request

    def _serve(self) -> None:
        live: list[_Request] = []
        running = self.genai.py_openvino_genai.GenerationStatus.RUNNING
        while True:
            with self.cv:
                while not self.pending and not live:
                    self.cv.wait()
                new, self.pending = self.pending, []
            try:
                with self.lock:
                    for r in new:
                        r.started = time.monotonic()
                        r.queue_s = r.started - r.submitted
                        r.handle = self.pipe.add_request(next(self.ids), self.ov.Tensor(self.np.array([r.ids])), r.config)
                        live.append(r)
                    self.pipe.step()
                    self.steps += 1
                finished = [r for r in live if r.handle.get_status() != running]
                for r in finished:
                    outputs = r.handle.read_all()
                    if outputs:
                        r.tokens = list(outputs[0].generated_ids)
                    else:   # the pipeline dropped it (IGNORED: a prompt larger than the whole KV cache)
                        r.error = InfraError(f"openvino pipeline dropped a request of {len(r.ids)} prompt tokens "
                                             f"({r.handle.get_status()}); raise kv_cache_gb")
            except Exception as exc:   # a failed step fails its requests, never the worker
                error = InfraError(f"openvino generate failed: {type(exc).__name__}: {exc}")
                error.__cause__ = exc
                for r in live + [r for r in new if r not in live]:
                    r.error = error
                finished = live + [r for r in new if r not in live]
            for r in finished:
                r.compute_s = time.monotonic() - r.started
                r.done.set()
            live = [r for r in live if r not in finished]

    # -- score: a pass over the prompt on a kept prefix's keys/values, then all candidates in one batch --------------
    def score(self, prompt: list[int], continuations: list[list[int]], info: dict) -> list[float]:
        np, n, length = self.np, len(continuations), max(len(c) for c in continuations)
        asked = time.monotonic()
        with self.lock:
            started = time.monotonic()
            req = self.score_request
            reused, past = self._prefix(prompt)
            out = req.infer({"input_ids": np.array([prompt[reused:]]), "attention_mask": np.ones((1, len(prompt)), np.int64),
                             "position_ids": np.arange(reused, len(prompt))[None], "beam_idx": np.zeros(1, np.int32),
                             "keep": np.array([1]), **past}, share_inputs=True)   # outputs copied: kept below
            head = out["logits"][0, -1]
            present = {name: out["present." + name[5:]] for name in self.no_past}
            self.kept = [k for k in self.kept if k[0] != prompt][-(_KEEP - 1):] + [(list(prompt), present)]
            ids = np.zeros((n, length), np.int64)
            mask = np.zeros((n, len(prompt) + length), np.int64)
            mask[:, :len(prompt)] = 1
            for row, cont in enumerate(continuations):
                ids[row, :len(cont)], mask[row, len(prompt):len(prompt) + len(cont)] = cont, 1
            tail = None
            if length > 1:   # candidates' tokens after the first, all rows in one pass on the prompt's keys/values
                tail = req.infer({"input_ids": ids, "attention_mask": mask, "beam_idx": np.zeros(n, np.int32),
                                  "position_ids": np.tile(np.arange(len(prompt), len(prompt) + length), (n, 1)),
                                  "keep": np.array([length]), **present},
                                 share_inputs=True, share_outputs=True)["logits"].copy()
            info.update(queue_s=started - asked, compute_s=time.monotonic() - started, reused=reused)
        first = _log_softmax(np, head)
        scores = []
        for row, cont in enumerate(continuations):
            total = float(first[cont[0]])
            if len(cont) > 1:
                logp = _log_softmax(np, tail[row, :len(cont) - 1])
                total += float(sum(logp[j - 1, cont[j]] for j in range(1, len(cont))))
            scores.append(total)
        return scores

    def _prefix(self, prompt: list[int]) -> tuple[int, dict]:
        """The longest kept prefix of ``prompt`` (at most all but its last token): its length and keys/values."""
        best, entry = 0, None
        for kept in self.kept:
            ids = kept[0]
            n = next((i for i, (a, b) in enumerate(zip(ids, prompt[:-1])) if a != b), min(len(ids), len(prompt) - 1))
            if n > best:
                best, entry = n, kept
        if entry is None:
            return 0, self.no_past
        return best, {name: self.np.ascontiguousarray(saved[:, :, :best]) for name, saved in entry[1].items()}


def _log_softmax(np, logits):
    x = logits.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))
