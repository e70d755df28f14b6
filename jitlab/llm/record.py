"""Recording a run's backbone call stream, for replaying it through any engine (benchmarks/replay.py).

    JITLAB_RECORD_CALLS=calls.jsonl jitlab run --suite textworld --harness react --backbone embedded ...

With ``JITLAB_RECORD_CALLS`` set, every LazyBackbone of the process appends one JSON line per call that reaches
the model (replay-cache hits never do): ``op`` (chat or score), ``thread`` (the calling thread: one episode or JIT
worker), ``t0``/``t1`` (seconds since the recorder opened), ``messages``, and for chat ``params`` (max_new_tokens,
stop, temperature, ...) and the reply ``text``, for score the ``candidates`` and their ``scores``. The order of
lines is the order calls finished; a replay orders each thread's calls by ``t0``.

Caveats: a recording holds every prompt in full (task text, observations): record only what may be shared.
The file is appended to, never truncated; lines of concurrent calls are written whole under one lock.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

__all__ = ["ENV", "Recorder", "from_env"]

ENV = "JITLAB_RECORD_CALLS"


class Recorder:
    """Appends call records to one JSON-lines file (thread-safe)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._t = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._t

    def write(self, op: str, t0: float, messages: list[dict], **fields) -> None:
        line = json.dumps({"op": op, "thread": threading.current_thread().name, "t0": round(t0, 4),
                           "t1": round(self.now(), 4), "messages": messages, **fields}, default=str)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()


_RECORDERS: dict[str, Recorder] = {}
_LOCK = threading.Lock()


def from_env() -> Recorder | None:
    """The process's recorder for ``$JITLAB_RECORD_CALLS`` (one per path), or None when it is unset."""
    path = os.environ.get(ENV)
    if not path:
        return None
    with _LOCK:
        if path not in _RECORDERS:
            _RECORDERS[path] = Recorder(path)
        return _RECORDERS[path]
