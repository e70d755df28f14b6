"""Content-addressed replay cache for backbone calls (SQLite).

Key = sha256 of (backbone id, messages, params, seed); the id of a model whose weights can change in place (an
adapter folder trained again) carries its weights' hash (``cache_id``). A hit returns the stored completion
flagged ``cached=True`` and carrying the original call's tokens and cost, so reruns are exact
and cost curves stay comparable. Set ``JITLAB_CACHE=off`` to disable.

The cache is infrastructure: its failures never reach the harness. A cache file that is not SQLite
or is damaged ("file is not a database", "database disk image is malformed") is quarantined: moved
to ``replay.corrupt-<timestamp>.sqlite`` beside it, with one ``CacheQuarantined`` warning naming both
paths, and a fresh cache takes its place. A lock held by a sibling process (several runs or notebooks
sharing ``$JITLAB_HOME``) is neither: the cache waits for it, retrying with backoff for up to
``BUSY_WAIT_S`` (SQLite's busy timeout does not cover every case: switching a fresh file to WAL while another
connection sets it up fails at once); a call that still finds it locked skips the cache, with one warning,
and the cache stays on (later calls then try once, under SQLite's own 30 s busy timeout, until one gets
through). Any other cache failure (disk full, no permission, or the fresh cache failing too) turns the
cache off for the rest of the process, with one warning; calls then simply go to the backbone. Caveat:
only the pages a lookup touches are checked, so damage is found when it is read, not when the file is
opened.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
from dataclasses import asdict
from pathlib import Path

from jitlab.paths import home
from jitlab.plumbing import set_aside
from jitlab.protocol import Completion

__all__ = ["BUSY_WAIT_S", "CacheQuarantined", "ReplayCache", "cache_id", "cache_key", "default_cache"]

_DAMAGED = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
BUSY_WAIT_S = 60.0   # how long one cache call waits out a lock held elsewhere before it skips the cache


class CacheQuarantined(UserWarning):
    """The replay cache file was damaged and moved aside, or the cache was turned off after a failure."""


def cache_id(backbone) -> str:
    """What the key names a backbone by: its ``cache_id`` where it has one (a model whose weights can change under
    the same id, e.g. a retrained adapter folder: jitlab.llm.hf), else its ``id``."""
    return getattr(backbone, "cache_id", None) or backbone.id


def cache_key(backbone_id: str, messages: list[dict], params: dict, seed: int | None) -> str:
    blob = json.dumps({"b": backbone_id, "m": messages, "p": params, "s": seed}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _damaged(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code in _DAMAGED or "malformed" in str(exc) or "not a database" in str(exc)


def _busy(exc: BaseException) -> bool:
    """The database is locked by another connection (SQLITE_BUSY / SQLITE_LOCKED and their extended codes)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.OperationalError) and (
        (code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)) or "is locked" in str(exc))


class ReplayCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._inode: int | None = None
        self.quarantined: Path | None = None   # where a damaged file was moved, if it was
        self.disabled: str | None = None       # why the cache is off for this process, if it is
        self.skipped = 0                       # calls that found the file locked for BUSY_WAIT_S and went without
        self._stuck = False                    # the last call was skipped: the next tries once
        with self._lock:
            self._guard(lambda: None)

    def _connect(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        try:
            self._inode = self.path.stat().st_ino  # which file we opened (another process may replace it)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, kind TEXT, value TEXT)")
            db.commit()
        except BaseException:
            db.close()
            raise
        self._db = db

    def _patiently(self, op):
        """``op()`` on an open connection, waiting out a lock held by another connection (module docstring)."""
        deadline, delay = time.monotonic() + (0.0 if self._stuck else BUSY_WAIT_S), 0.01
        while True:
            try:
                if self._db is None:
                    self._connect()
                result = op()
                self._stuck = False
                return result
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
                if self._db is not None and self._db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.rollback()   # a stale read snapshot cannot become a write: start over
            time.sleep(delay)
            delay = min(2 * delay, 0.5)

    def _guard(self, op, default=None):
        """Run ``op()`` (connecting first if needed); a lock held elsewhere is waited out, and a call that still
        finds it locked returns ``default`` with the cache left on; a damaged file is quarantined and ``op``
        retried once on a fresh cache; any other failure turns the cache off. Returns ``default`` when the cache
        is (or goes) off. Call under the lock."""
        for attempt in range(2):
            if self.disabled:
                return default
            try:
                return self._patiently(op)
            except (sqlite3.Error, OSError) as exc:
                if _busy(exc):
                    self._skip(exc)
                    return default
                if attempt == 0 and isinstance(exc, sqlite3.Error) and _damaged(exc) and self.quarantined is None:
                    try:
                        self._quarantine(exc)
                        continue
                    except (sqlite3.Error, OSError) as again:  # cannot move it or start afresh: go without
                        exc = again
                self._disable(exc)
        return default

    def _close(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass  # closing a damaged connection may fail; the file is set aside or ignored either way
            self._db = None

    def _quarantine(self, exc: Exception) -> None:
        self._close()
        with contextlib.suppress(FileNotFoundError):
            if self.path.stat().st_ino != self._inode:  # another process already moved it aside: use its fresh one
                return
        target = set_aside(self.path, "{stem}.corrupt-{stamp}{suffix}")
        self.quarantined = target
        warnings.warn(f"replay cache {self.path} is damaged ({exc}); it was moved to {target} and a fresh cache is "
                      "used (no episode is affected; delete the old file when you no longer need it)",
                      CacheQuarantined, stacklevel=4)   # the retry connects to a fresh file

    def _skip(self, exc: Exception) -> None:
        self.skipped, self._stuck = self.skipped + 1, True
        if self.skipped == 1:
            warnings.warn(f"replay cache {self.path} stayed locked by another process for {BUSY_WAIT_S:.0f} s "
                          f"({type(exc).__name__}: {exc}); this call went without the cache, which stays on (said "
                          "once per process; `ReplayCache.skipped` counts such calls)", CacheQuarantined, stacklevel=4)

    def _disable(self, exc: Exception) -> None:
        self._close()
        self.disabled = f"{type(exc).__name__}: {exc}"
        warnings.warn(f"replay cache {self.path} failed ({self.disabled}); continuing without the cache for this "
                      "process (free space or fix its permissions, or set JITLAB_CACHE=off)", CacheQuarantined,
                      stacklevel=4)

    def get(self, key: str, kind: str = "chat"):
        with self._lock:
            row = self._guard(lambda: self._db.execute(
                "SELECT value FROM calls WHERE key=? AND kind=?", (key, kind)).fetchone())
        if row is None:
            return None
        value = json.loads(row[0])
        if kind == "chat":
            return Completion(**{**value, "cached": True})
        return value

    def put(self, key: str, value, kind: str = "chat") -> None:
        payload = {**asdict(value), "cached": False} if kind == "chat" else value

        def write():
            self._db.execute("INSERT OR REPLACE INTO calls VALUES (?,?,?)", (key, kind, json.dumps(payload)))
            self._db.commit()
        with self._lock:
            self._guard(write)


_default: ReplayCache | None = None
_default_lock = threading.Lock()


def default_cache() -> ReplayCache | None:
    """The shared cache under JITLAB_HOME, or None when JITLAB_CACHE=off; one per process, even when several
    threads (a grid's workers) ask for it at once."""
    global _default
    if os.environ.get("JITLAB_CACHE", "on").lower() in ("off", "0", "false", "no"):
        return None
    with _default_lock:
        if _default is None:
            _default = ReplayCache(home() / "replay.sqlite")
    return _default
