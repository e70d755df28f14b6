"""Where the hf engine reaches into transformers internals, fenced in one file: the cache argument's name, the
check that a model's cache layers are plain full-attention ones, a DynamicCache whose layers grow in place, and
last-position-only logits. ``INTERNALS_TESTED`` names the transformers versions the subclass of ``DynamicLayer``
was written against; outside them ``_growing_cache`` is the stock DynamicCache (the same values, slower decoding)
and prefix reuse is off.
"""
from __future__ import annotations

import functools
import logging

log = logging.getLogger("jitlab.llm.hf")

INTERNALS_TESTED = (5, 5)   # transformers major versions (lowest, highest) whose DynamicLayer GrowingLayer extends


@functools.cache
def internals_supported() -> bool:
    """Whether the installed transformers is one ``GrowingLayer`` and the cache-layer check were written against."""
    import transformers
    major = int(transformers.__version__.split(".")[0])
    ok = INTERNALS_TESTED[0] <= major <= INTERNALS_TESTED[1]
    if not ok:
        log.warning("transformers %s is outside the versions jitlab.llm.hf's cache code was written for (%s.x-%s.x): "
                    "decoding uses the stock DynamicCache and no prefix reuse", transformers.__version__,
                    *INTERNALS_TESTED)
    return ok


def _cache_arg(model) -> str:
    """transformers >= 5.x renamed forward(past_key_values=) / generate(past_key_values=) to ``cache=``."""
    import inspect
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _full_attention_only(model) -> bool:
    """Prefix reuse slices and pads plain per-layer caches; sliding-window or linear-attention layers (some
    Qwen, Gemma, Mamba hybrids) keep other state, so such models run without it."""
    if not internals_supported():
        return False
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
    if not internals_supported():
        return cache
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
