"""A backbone built on first use: runs that never call it (oracle, random, a resumed run with every episode
done) load no model. The runtime's handle (jitlab.runtime.LLMHandle) and every JIT phase hold one.

    bb = LazyBackbone("embedded", {})          # checks the name and options now, loads the model on the first chat()
    bb.chat(messages, max_new_tokens=48)

``id`` is the configured name plus its options, which keys the replay cache (``cache_id``: with an adapter
folder's weights hash, jitlab.llm.adapters.weights_tag). A backbone that fails to load
is an InfraError (infrastructure), never a harness failure. A ``BackbonePool`` hands out one LazyBackbone per name
and options, so the runs of a loop share one loaded model; its owner passes it to whatever runs them.
"""
from __future__ import annotations

import json
import threading

from jitlab.errors import ConfigError, InfraError
from jitlab.llm import base, record
from jitlab.llm.adapters import weights_tag

__all__ = ["BackbonePool", "LazyBackbone"]

_LOAD_LOCK = threading.RLock()


class LazyBackbone:
    """Builds the real backbone on first use, so oracle/random runs never load a model.
    ``id`` is the configured name, which keys the replay cache."""

    def __init__(self, name: str, options: dict):
        base.check_options(name, options)   # names and options a load would refuse, before a run writes anything
        self.name, self.options = name, dict(options)
        self.id = name + (json.dumps(options, sort_keys=True) if options else "")
        # the replay cache's key: an adapter folder trained again holds other weights under the same name
        self.cache_id = self.id + (weights_tag(folder) if (folder := base.hf_folder(name)) else "")
        self._backbone = None
        self._recorder = record.from_env()   # JITLAB_RECORD_CALLS: the call stream, for benchmarks/replay.py

    def get(self):
        with _LOAD_LOCK:  # one load at a time: concurrent first imports of transformers can fail
            if self._backbone is None:
                try:
                    self._backbone = base.get_backbone(self.name, **self.options)
                except (ConfigError, InfraError):
                    raise
                except Exception as exc:  # a backbone that fails to load is infrastructure, not the harness
                    raise InfraError(f"backbone {self.name} failed to load: {type(exc).__name__}: {exc}") from exc
        return self._backbone

    @property
    def price(self):
        """The loaded backbone's price (None if it has none), for calls it does not price itself (score)."""
        return getattr(self.get(), "price", None)

    def chat(self, messages, **params):
        if self._recorder is None:
            return self.get().chat(messages, **params)
        t0 = self._recorder.now()
        completion = self.get().chat(messages, **params)
        self._recorder.write("chat", t0, messages, params=params, text=completion.text,
                             prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens)
        return completion

    def score(self, messages, candidates):
        scorer = getattr(self.get(), "score", None)
        if scorer is None:
            raise NotImplementedError(f"backbone {self.name} has no score()")
        if self._recorder is None:
            return scorer(messages, candidates)
        t0 = self._recorder.now()
        scores = scorer(messages, candidates)
        self._recorder.write("score", t0, messages, candidates=list(candidates), scores=list(scores))
        return scores

    def last_score_timing(self) -> dict:
        """The loaded backbone's timing of this thread's last ``score`` call (queue_s, compute_s, reused prefix
        tokens), so the runtime records a scoring pass's prefix reuse as it does a chat's; {} when it has none."""
        timing = getattr(self.get(), "last_score_timing", None)
        return timing() if callable(timing) else {}


class BackbonePool:
    """One LazyBackbone per (name, options), loaded once however many runs use it (thread-safe)."""

    def __init__(self):
        self._backbones: dict = {}
        self._lock = threading.Lock()

    def get(self, name: str, options: dict | None = None) -> LazyBackbone:
        key = (name, json.dumps(options or {}, sort_keys=True, default=str))
        with self._lock:
            if key not in self._backbones:
                self._backbones[key] = LazyBackbone(name, dict(options or {}))
            return self._backbones[key]
