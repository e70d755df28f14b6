"""Run records: ``runs/<name>/run.sqlite`` (WAL, busy timeout, one writer) plus ``summary.json``.

Tables: ``meta`` (config, fingerprint), ``episodes`` (identity = harness sha256, task id, seed,
attempt; status, success, reward, steps, tokens, cost, wall time, tool calls), ``steps`` and
``calls`` (every backbone call, with tokens, cost, latency, cache flag and content hash).

Resume: an episode row is inserted as ``running`` and turned final in one transaction, so a run
killed at any moment leaves either a finished episode or a ``running`` row; on reopen the latter
becomes ``interrupted`` and is run again as the next attempt. Finished statuses (ok, budget,
harness_error) are never rerun; ``infra_error`` and ``interrupted`` are retried.

    frames = jitlab.store.load("runs/demo")   # {"episodes", "steps", "calls", "config"} DataFrames
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path

from jitlab.errors import ConfigDrift, ConfigError

__all__ = ["DB_NAME", "FINAL", "RETRY", "RunStore", "fingerprint", "load", "recorded_spend", "set_aside", "summarize"]

DB_NAME = "run.sqlite"
FINAL = ("ok", "budget", "harness_error")
RETRY = ("infra_error", "interrupted")
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
  id INTEGER PRIMARY KEY, harness TEXT, harness_sha TEXT NOT NULL, task_id TEXT NOT NULL, family TEXT,
  split TEXT, seed INTEGER NOT NULL, attempt INTEGER NOT NULL, status TEXT NOT NULL, success INTEGER,
  reward REAL, steps INTEGER, prompt_tokens INTEGER, completion_tokens INTEGER, cost REAL, wall_s REAL,
  tool_calls INTEGER, llm_calls INTEGER, cached_calls INTEGER, error TEXT, diagnostic TEXT,
  isolation TEXT, extra TEXT, started REAL, finished REAL,
  UNIQUE (harness_sha, task_id, seed, attempt));
CREATE TABLE IF NOT EXISTS steps (
  episode_id INTEGER NOT NULL, step INTEGER NOT NULL, tool TEXT, args TEXT, thought TEXT, observation TEXT,
  reward REAL, done INTEGER, tokens INTEGER, trace TEXT, t REAL);
CREATE TABLE IF NOT EXISTS calls (
  episode_id INTEGER NOT NULL, step INTEGER, phase TEXT, kind TEXT, key TEXT, backbone TEXT,
  prompt_tokens INTEGER, completion_tokens INTEGER, cost REAL, latency_s REAL, cached INTEGER,
  messages TEXT, text TEXT, t REAL);
"""


def fingerprint(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def set_aside(path: str | Path) -> Path | None:
    """Rename ``dir/name.ext`` (and its SQLite -wal/-shm files) to ``dir/name.<timestamp>.ext`` so a new
    run starts empty and the old records stay beside it. Returns the new path, None if nothing was there."""
    path = Path(path)
    if not path.exists():
        return None
    target = path.with_name(f"{path.stem}.{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}")
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            os.replace(f"{path}{suffix}", f"{target}{suffix}")
    return target


class RunStore:
    """The single writer of one run directory. Thread-safe (one connection behind a lock)."""

    def __init__(self, run_dir: str | Path, config: dict, new_run: bool = False):
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / DB_NAME
        if new_run:
            set_aside(path)
        self._lock = threading.RLock()
        self.db = sqlite3.connect(path, check_same_thread=False, timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA busy_timeout=30000")
        self.db.execute("PRAGMA synchronous=NORMAL")
        try:
            self.db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{path} is not a jitlab run database ({exc}); move it away or use --new-run") from exc
        self.config = config
        self._check_config(config)
        self._recover()

    def _check_config(self, config: dict) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key='config'").fetchone()
        if row is None:
            with self._tx():
                self.db.execute("INSERT INTO meta VALUES ('config', ?)", (json.dumps(config, sort_keys=True, default=str),))
                self.db.execute("INSERT INTO meta VALUES ('fingerprint', ?)", (fingerprint(config),))
                self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                self.db.execute("INSERT INTO meta VALUES ('created', ?)", (str(time.time()),))
            return
        old = json.loads(row[0])
        if fingerprint(old) != fingerprint(config):
            diffs = [f"{k}: {old.get(k)!r} -> {config.get(k)!r}" for k in sorted(set(old) | set(config))
                     if old.get(k) != config.get(k)]
            raise ConfigDrift(f"{self.dir} was started with a different config ({'; '.join(diffs)}). "
                              "Rerun with the original settings to resume, or pass --new-run to start over "
                              "(the old records are kept beside it).")

    def _tx(self):
        store = self

        class _Tx:
            def __enter__(self):
                store._lock.acquire()
                store.db.execute("BEGIN IMMEDIATE")

            def __exit__(self, kind, exc, tb):
                try:
                    store.db.execute("COMMIT" if kind is None else "ROLLBACK")
                finally:
                    store._lock.release()
        return _Tx()

    def _recover(self) -> None:
        """Episodes left ``running`` by a killed process become ``interrupted`` (rerun later)."""
        with self._tx():
            self.db.execute("UPDATE episodes SET status='interrupted' WHERE status='running'")

    # -- episodes -----------------------------------------------------------------------------
    def status_of(self, harness_sha: str, task_id: str, seed: int) -> tuple[str | None, int]:
        """(latest status, attempts so far) of an episode identity."""
        with self._lock:
            row = self.db.execute(
                "SELECT status, attempt FROM episodes WHERE harness_sha=? AND task_id=? AND seed=? "
                "ORDER BY attempt DESC LIMIT 1", (harness_sha, task_id, seed)).fetchone()
        return (row[0], row[1] + 1) if row else (None, 0)

    def start_episode(self, harness: str, harness_sha: str, task, seed: int, attempt: int, isolation: str) -> int:
        with self._tx():
            cur = self.db.execute(
                "INSERT INTO episodes (harness, harness_sha, task_id, family, split, seed, attempt, status, "
                "isolation, started) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (harness, harness_sha, task.id, task.family, task.split, seed, attempt, "running", isolation,
                 time.time()))
            return cur.lastrowid

    def log_step(self, episode_id: int, record: dict) -> None:
        with self._tx():
            self.db.execute("INSERT INTO steps VALUES (?,?,?,?,?,?,?,?,?,?,?)", (
                episode_id, record["step"], record["tool"], json.dumps(record["args"], default=str),
                record.get("thought", ""), record["observation"], record.get("reward", 0.0),
                int(bool(record.get("done"))), record.get("tokens", 0), json.dumps(record.get("trace", {}), default=str),
                time.time()))

    def log_call(self, episode_id: int, call: dict) -> None:
        with self._tx():
            self.db.execute("INSERT INTO calls VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (
                episode_id, call["step"], call["phase"], call["kind"], call["key"], call["backbone"],
                call["prompt_tokens"], call["completion_tokens"], call["cost"], call["latency_s"],
                int(call["cached"]), json.dumps(call["messages"]), call["text"], time.time()))

    def finish_episode(self, episode_id: int, result: dict, llm) -> None:
        with self._tx():
            self.db.execute(
                "UPDATE episodes SET status=?, success=?, reward=?, steps=?, prompt_tokens=?, completion_tokens=?, "
                "cost=?, wall_s=?, tool_calls=?, llm_calls=?, cached_calls=(SELECT COUNT(*) FROM calls WHERE "
                "episode_id=? AND cached=1), error=?, diagnostic=?, extra=?, finished=? WHERE id=?",
                (result["status"], int(result["success"]), result["reward"], result["steps"], llm.prompt_tokens,
                 llm.completion_tokens, llm.cost, result["wall_s"], result["tool_calls"], llm.calls, episode_id,
                 result.get("error", ""), json.dumps(result.get("diagnostic", {})),
                 json.dumps(result.get("extra", {})), time.time(), episode_id))

    def spend(self) -> tuple[float, int]:
        """(cost, tokens) of every recorded backbone call that reached the backbone (cache hits excluded):
        what a run-level spend cap is checked against on resume."""
        with self._lock:
            row = self.db.execute(_SPEND_SQL).fetchone()
        return float(row[0]), int(row[1])

    def final_episode(self, task_id: str, seed: int) -> dict | None:
        """The latest finished episode of a task (any harness), as a dict with ``extra`` decoded."""
        keys = ("id", "harness_sha", "status", "success", "reward", "steps", "wall_s", "tool_calls", "extra")
        with self._lock:
            row = self.db.execute(
                f"SELECT {', '.join(keys)} FROM episodes WHERE task_id=? AND seed=? AND status IN "
                f"({','.join('?' * len(FINAL))}) ORDER BY id DESC LIMIT 1", (task_id, seed, *FINAL)).fetchone()
        if row is None:
            return None
        record = dict(zip(keys, row))
        record["extra"] = json.loads(record["extra"] or "{}")
        return record

    def update_extra(self, episode_id: int, patch: dict) -> None:
        """Merge ``patch`` into an episode's ``extra`` JSON (one transaction)."""
        with self._tx():
            row = self.db.execute("SELECT extra FROM episodes WHERE id=?", (episode_id,)).fetchone()
            extra = {**json.loads(row[0] or "{}"), **patch}
            self.db.execute("UPDATE episodes SET extra=? WHERE id=?", (json.dumps(extra, default=str), episode_id))

    def close(self) -> None:
        with self._lock:
            self.db.close()


_SPEND_SQL = ("SELECT COALESCE(SUM(cost), 0), COALESCE(SUM(prompt_tokens + completion_tokens), 0) "
              "FROM calls WHERE cached=0")


def recorded_spend(run_dir: str | Path) -> tuple[float, int]:
    """:meth:`RunStore.spend` of a run directory, read-only ((0.0, 0) when it holds no run yet)."""
    path = Path(run_dir) / DB_NAME
    if not path.is_file():
        return 0.0, 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        row = db.execute(_SPEND_SQL).fetchone()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{path} is not a readable jitlab run database ({exc}); move it away") from exc
    finally:
        db.close()
    return float(row[0]), int(row[1])


def load(run_dir: str | Path) -> dict:
    """Read a run directory into pandas DataFrames: episodes, steps, calls, config (one row).

    ``episodes`` holds every attempt; ``episodes[episodes.final]`` is one row per finished episode."""
    import pandas as pd
    path = Path(run_dir) / DB_NAME
    if not path.exists():
        raise ConfigError(f"{run_dir} holds no {DB_NAME}; is it a jitlab run directory?")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        frames = {name: pd.read_sql_query(f"SELECT * FROM {name}", db) for name in ("episodes", "steps", "calls")}
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    finally:
        db.close()
    episodes = frames["episodes"]
    episodes["final"] = episodes["status"].isin(FINAL)
    episodes["tokens"] = episodes["prompt_tokens"].fillna(0) + episodes["completion_tokens"].fillna(0)
    frames["config"] = pd.DataFrame([json.loads(meta.get("config", "{}"))])
    frames["meta"] = meta
    return frames


def summarize(run_dir: str | Path) -> dict:
    """Compute and write ``summary.json`` from the records (never from in-memory state)."""
    frames = load(run_dir)
    config = frames["config"].iloc[0].to_dict() if len(frames["config"]) else {}
    eps = frames["episodes"]
    done = eps[eps["final"]]
    n = len(done)

    def per_task(col):
        return float(done[col].sum() / n) if n else 0.0
    summary = {
        "suite": config.get("suite"), "split": config.get("split"), "harness": config.get("harness"),
        "harness_sha": done["harness_sha"].iloc[0] if n else None, "backbone": config.get("backbone"),
        "n_episodes": n,
        "n_tasks_unfinished": len(set(eps["task_id"]) - set(done["task_id"])),  # infra failures, interrupted
        "success_rate": float(done["success"].mean()) if n else 0.0,
        "mean_reward": float(done["reward"].mean()) if n else 0.0,
        "tokens_per_task": per_task("tokens"),
        "prompt_tokens_per_task": per_task("prompt_tokens"),
        "completion_tokens_per_task": per_task("completion_tokens"),
        "cost_per_task": per_task("cost"), "tool_calls_per_task": per_task("tool_calls"),
        "llm_calls_per_task": per_task("llm_calls"), "steps_per_task": per_task("steps"),
        "wall_s_per_task": per_task("wall_s"),
        "status_counts": {k: int(v) for k, v in done["status"].value_counts().items()},
        "isolation": sorted(set(done["isolation"].dropna())),
        "fingerprint": frames["meta"].get("fingerprint"),
    }
    tmp = Path(run_dir) / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2))
    os.replace(tmp, Path(run_dir) / "summary.json")
    return summary
