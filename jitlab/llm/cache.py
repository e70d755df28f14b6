"""Content-addressed replay cache for backbone calls (SQLite).

Key = sha256 of (backbone id, messages, params, seed). A hit returns the stored completion
flagged ``cached=True`` and carrying the original call's tokens and cost, so reruns are exact
and cost curves stay comparable. Set ``JITLAB_CACHE=off`` to disable.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from dataclasses import asdict
from pathlib import Path

from jitlab.protocol import Completion

__all__ = ["ReplayCache", "cache_key", "default_cache"]


def cache_key(backbone_id: str, messages: list[dict], params: dict, seed: int | None) -> str:
    blob = json.dumps({"b": backbone_id, "m": messages, "p": params, "s": seed}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class ReplayCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, kind TEXT, value TEXT)")
        self._db.commit()

    def get(self, key: str, kind: str = "chat"):
        with self._lock:
            row = self._db.execute("SELECT value FROM calls WHERE key=? AND kind=?", (key, kind)).fetchone()
        if row is None:
            return None
        value = json.loads(row[0])
        if kind == "chat":
            return Completion(**{**value, "cached": True})
        return value

    def put(self, key: str, value, kind: str = "chat") -> None:
        payload = {**asdict(value), "cached": False} if kind == "chat" else value
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO calls VALUES (?,?,?)", (key, kind, json.dumps(payload)))
            self._db.commit()


_default: ReplayCache | None = None


def default_cache() -> ReplayCache | None:
    """The shared cache under JITLAB_HOME, or None when JITLAB_CACHE=off."""
    global _default
    if os.environ.get("JITLAB_CACHE", "on").lower() in ("off", "0", "false", "no"):
        return None
    if _default is None:
        from jitlab.paths import home
        _default = ReplayCache(home() / "replay.sqlite")
    return _default
