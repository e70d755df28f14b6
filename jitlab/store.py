"""Run records: ``runs/<name>/run.sqlite`` (WAL, busy timeout, one writer) plus ``summary.json``.

Tables: ``meta`` (config, fingerprint, jitlab commit, suite version), ``episodes`` (identity = harness sha256, task id, seed,
attempt; status, success, reward, steps, tokens, cost, wall time, tool calls), ``steps`` and
``calls`` (every backbone call, with tokens, cost, latency, cache flag and content hash).

A run directory whose config differs but which holds no finished episode (every attempt refused or an
infrastructure failure) does not block the corrected command: its run.sqlite is set aside (kept beside it,
as ``--new-run`` does, with a warning) and the new config starts; one with a finished episode is refused
(ConfigDrift) unless ``new_run``.

Resume: an episode row is inserted as ``running`` and turned final in one transaction, so a run
killed at any moment leaves either a finished episode or a ``running`` row; on reopen the latter
becomes ``interrupted`` and is run again as the next attempt. Finished statuses (ok, budget,
harness_error) are never rerun; ``infra_error`` and ``interrupted`` are retried.

One writer: a ``RunStore`` holds an exclusive ``fcntl.flock`` on ``run.lock`` in the run directory
for its whole life (the holder's PID is written in it); a second process opening the same directory
gets ``RunLocked`` naming that PID. The kernel drops the lock when the holder exits, even on SIGKILL.
Record files that cannot be read or written (corrupt, 0 bytes, disk full, not writable) raise
``StorageError`` naming the file and what to do; readers (``load``, ``summarize(write=False)``)
open the database through :func:`connect_readonly` and never change it: they create no ``-wal`` /
``-shm`` files and work on read-only media.

    frames = jitlab.store.load("runs/demo")   # {"episodes", "steps", "calls", "config"} DataFrames
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import sqlite3
import threading
import time
from pathlib import Path

from jitlab.compliance import compliance_summary
from jitlab.envs.base import suite_version
from jitlab.errors import ConfigDrift, ConfigError, RunLocked, StorageError
from jitlab.lockfile import open_lock_file
from jitlab.paths import jitlab_commit
from jitlab.plumbing import json_digest, set_aside  # set_aside re-exported: a run's old records set aside
from jitlab.repeats import repeat_summary
from jitlab.stats import run_intervals
from jitlab.status import FINAL, RETRY, Status  # re-exported: the episode statuses

__all__ = ["DB_NAME", "EXPORT_FORMAT", "EXPORT_MARKER", "FINAL", "LOCK_NAME", "NULL", "RETRY", "Status",
           "RunStore", "WriterLock", "connect_readonly", "fingerprint", "load", "make_dir", "prefix_reuse",
           "transaction", "recorded_spend", "set_aside", "sole_writer", "storage_error", "summarize"]

DB_NAME = "run.sqlite"
LOCK_NAME = "run.lock"
SCHEMA_VERSION = 3  # 2: calls.queue_s, compute_s, reused_tokens; 3: steps.compliance (jitlab/compliance.py)
EXPORT_MARKER = "run.json"         # a compact export of a run (jitlab/export.py) holds this instead of run.sqlite
EXPORT_FORMAT = "jitlab-export/1"
NULL = "\\N"                       # SQL NULL in an export's CSV files (an empty field is an empty string)

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
  reward REAL, done INTEGER, tokens INTEGER, trace TEXT, t REAL, compliance TEXT);
CREATE TABLE IF NOT EXISTS calls (
  episode_id INTEGER NOT NULL, step INTEGER, phase TEXT, kind TEXT, key TEXT, backbone TEXT,
  prompt_tokens INTEGER, completion_tokens INTEGER, cost REAL, latency_s REAL, cached INTEGER,
  messages TEXT, text TEXT, t REAL, queue_s REAL, compute_s REAL, reused_tokens INTEGER);
"""
# columns added after schema 1, with their types: a file written before them gets them on open (NULL in old rows)
_ADDED_CALL_COLUMNS = {"queue_s": "REAL", "compute_s": "REAL", "reused_tokens": "INTEGER"}
_ADDED_STEP_COLUMNS = {"compliance": "TEXT"}
_CALL_COLUMNS = ("episode_id", "step", "phase", "kind", "key", "backbone", "prompt_tokens", "completion_tokens", "cost",
                 "latency_s", "cached", "messages", "text", "t", *_ADDED_CALL_COLUMNS)


def _provenance(config: dict) -> dict:
    """What a new run records beside its config, outside the fingerprint: the jitlab commit and the suite version."""
    found = {"jitlab_commit": jitlab_commit(), "suite_version": suite_version(config.get("suite"))}
    return {k: v for k, v in found.items() if v is not None}


def _extra(result: dict) -> dict:
    """An episode's ``extra`` column: the result's own extra plus its time breakdown (``time``, if measured)."""
    return {**result.get("extra", {}), **({"time": result["time"]} if result.get("time") else {})}


def fingerprint(config: dict) -> str:
    return json_digest(config)[:16]


def connect_readonly(path: str | Path, timeout: float = 30, **kw) -> sqlite3.Connection:
    """A read-only connection to the SQLite file ``path`` (a run, a bank) that creates nothing beside it.

    With no ``-wal`` file beside it (or an empty one), no commit waits in a journal (the last writer to close
    merges and deletes it), so the file is opened ``immutable=1``: SQLite then takes no locks and writes no
    ``-wal``/``-shm``, which also works on read-only media. A writer that opens it meanwhile writes into its
    own WAL, which a short read never sees. With a non-empty ``-wal`` (a live writer, or one killed mid-run) it
    is opened ``mode=ro``, so the journal's committed pages are read too."""
    path = Path(path).resolve()
    wal = Path(f"{path}-wal")
    pending = wal.exists() and wal.stat().st_size > 0
    return sqlite3.connect(f"{path.as_uri()}?{'mode=ro' if pending else 'immutable=1'}", uri=True, timeout=timeout,
                           **kw)


def make_dir(path: str | Path, what: str = "--out") -> Path:
    """``mkdir -p`` with a one-line error when ``path`` is a file or cannot be created."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise ConfigError(f"{what} {path} is not a directory ({exc.filename} is a file); pass a directory path") from exc
    except NotADirectoryError as exc:
        raise ConfigError(f"{what} {path} cannot be created: a folder on its path is a file; pass a directory "
                          "path") from exc
    except OSError as exc:
        raise ConfigError(f"{what} {path} cannot be created ({exc.strerror or exc}); pass a writable directory") from exc
    return path


def _low_space(folder: Path) -> bool:
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 1 << 20


def storage_error(path: str | Path, exc: BaseException) -> StorageError:
    """The one-line error for an SQLite/OS failure on the record file ``path``: what, which file, what to do."""
    code = getattr(exc, "sqlite_errorcode", None)
    code = code & 0xFF if code is not None else None  # the primary code of an extended one (SQLITE_IOERR_WRITE...)
    text = str(exc)
    if code == sqlite3.SQLITE_FULL or getattr(exc, "errno", None) == errno.ENOSPC or "disk is full" in text or (
            code == sqlite3.SQLITE_IOERR and _low_space(Path(path).parent)):  # WAL/shm writes fail as I/O errors
        return StorageError(f"no space left on the device writing {path}; free space, then rerun the same "
                            "command to resume (finished episodes are kept)")
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or "malformed" in text or "not a database" in text:
        return StorageError(f"{path} is corrupt or not a jitlab database ({text}); restore it, or pass --new-run "
                            "to start over (the damaged file is kept beside the new one)")
    if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM) or isinstance(exc, PermissionError):
        return StorageError(f"cannot write {path} ({text}); check the permissions of {Path(path).parent} or pass "
                            "another --out")
    return StorageError(f"{path}: {type(exc).__name__}: {text}")


class WriterLock:
    """An exclusive ``fcntl.flock`` on the file ``path`` for as long as this object is open: one writer per run
    directory (or bank). The lock file is opened without following a symbolic link and must be a regular file
    (:func:`jitlab.lockfile.open_lock_file`). The holder writes its PID into the file so a second process can name
    it. The kernel drops the lock when the holder exits (even on SIGKILL); the file stays, since removing it would
    race. The descriptor is close-on-exec, so a child started by exec (bubblewrap, tw-make) never inherits the lock."""

    def __init__(self, path: str | Path, what: str):
        self.path = Path(path)
        try:  # never through a symbolic link: its target would be overwritten with the PID (jitlab/lockfile.py)
            fh = open_lock_file(self.path)  # held open for the lock's whole life, closed by release()
        except OSError as exc:
            raise storage_error(self.path, exc) from exc
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            fh.close()
            if holder == str(os.getpid()):  # e.g. a notebook still holding an unclosed RunStore
                raise RunLocked(f"{what} is already open for writing in this process (PID {holder}; lock file "
                                f"{self.path}); close the other RunStore/Bank first, or restart the Python session") from None
            raise RunLocked(f"{what} is being written by another process (PID {holder}; lock file {self.path}); "
                            "wait for it to finish or stop it, or use another --out") from None
        except OSError as exc:
            fh.close()
            raise storage_error(self.path, exc) from exc
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            self._fh.close()  # closing the descriptor drops the lock
            self._fh = None


@contextlib.contextmanager
def sole_writer(folder: str | Path, what: str, name: str = "writer.lock"):
    """Hold a WriterLock on ``folder/name`` (the folder created first) while the block writes ``folder``: a second
    process writing the same folder gets RunLocked naming the first (a training pipeline's folder, a policy's evaluation).
    A folder this call created is removed again when the block fails having written nothing else (input refused)."""
    folder = Path(folder)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    lock = WriterLock(folder / name, what)
    try:
        yield
    except BaseException:
        if created and [p.name for p in folder.iterdir()] == [name]:
            (folder / name).unlink()
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    finally:
        lock.release()


@contextlib.contextmanager
def transaction(db: sqlite3.Connection, lock, path=None):
    """One write transaction on ``db`` (opened with ``isolation_level=None``), under the caller's thread lock:
    ``BEGIN IMMEDIATE`` takes SQLite's write lock up front (waiting out the busy timeout), so two writers never
    deadlock upgrading a read; COMMIT on success, ROLLBACK on any exception. The run store and the harness bank
    both write through it. With ``path``, SQLite errors become one-line StorageErrors naming the file."""
    def fail(err):
        return storage_error(path, err) if path is not None else err
    with lock:
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.DatabaseError as err:
            raise fail(err) from err
        try:
            yield
        except BaseException as exc:
            try:
                db.execute("ROLLBACK")
            except sqlite3.DatabaseError:
                pass  # SQLite already rolled back the failed statement's transaction (e.g. disk full)
            if isinstance(exc, sqlite3.DatabaseError) and path is not None:  # a full disk or a damaged file
                raise storage_error(path, exc) from exc
            raise
        try:
            db.execute("COMMIT")
        except sqlite3.DatabaseError as err:
            raise fail(err) from err


class _Unstarted(Exception):
    """Raised inside RunStore._open: the run has another config but no finished episode."""


class RunStore:
    """The single writer of one run directory (``run.lock``, see the module docstring). Thread-safe (one
    connection behind a lock)."""

    def __init__(self, run_dir: str | Path, config: dict, new_run: bool = False, implied: dict | None = None):
        """``implied``: the value a key left out of a config stands for (a field a config leaves out when it holds
        the value runs had before the field existed, so those runs resume); a config change names it so."""
        self.implied = dict(implied or {})
        self.dir = make_dir(run_dir)
        self._writer = WriterLock(self.dir / LOCK_NAME, f"run directory {self.dir}")
        self.path = self.dir / DB_NAME
        self._lock = threading.RLock()
        self.db = None
        self.restarted: Path | None = None  # where an unstarted run with another config was set aside
        try:
            self._open(config, new_run)
        except _Unstarted:  # another config, but no finished episode to keep: start this one, set the old aside
            self.db.close()
            self.db = None
            self.restarted = set_aside(self.path)
            import warnings
            warnings.warn(f"{self.dir} was started with a different config but holds no finished episode; starting "
                          f"with this config (the old records are kept in {self.restarted})", stacklevel=2)
            try:
                self._open(config, False)
            except BaseException:
                self.close()
                raise
        except BaseException:
            self.close()
            raise

    def _open(self, config: dict, new_run: bool) -> None:
        path = self.path
        if path.is_dir():  # before --new-run too: renaming a folder aside would hide what the user put there
            raise StorageError(f"{path} is a directory, not a jitlab run database; move it away or pass another --out")
        if new_run:
            set_aside(path)
        elif path.exists() and path.stat().st_size == 0:
            raise StorageError(f"{path} is empty (0 bytes), not a jitlab run database; pass --new-run to start over "
                               "(the empty file is kept beside it) or delete it")
        try:
            if not path.exists():  # built aside, then renamed: a killed process never leaves a 0-byte run.sqlite
                tmp = path.with_name(DB_NAME + ".new")
                tmp.unlink(missing_ok=True)
                db = sqlite3.connect(tmp)  # rollback-journal mode: the schema is in the file itself once committed
                try:
                    db.executescript(_SCHEMA)
                finally:
                    db.close()
                os.replace(tmp, path)
            self.db = sqlite3.connect(path, check_same_thread=False, timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA busy_timeout=30000")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(_SCHEMA)
            self._migrate()
            self.config = config
            self._check_config(config)
            self._recover()
        except (sqlite3.DatabaseError, OSError) as exc:
            raise storage_error(path, exc) from exc

    def _migrate(self) -> None:
        """Add the calls and steps columns an older file lacks (its old rows keep NULL there)."""
        missing = []
        for table, added in (("calls", _ADDED_CALL_COLUMNS), ("steps", _ADDED_STEP_COLUMNS)):
            have = {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}
            missing += [(table, name, kind) for name, kind in added.items() if name not in have]
        if missing:
            with self._tx():
                for table, name, kind in missing:
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
                self.db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    def _check_config(self, config: dict) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key='config'").fetchone()
        if row is None:
            provenance = _provenance(config)  # outside the write transaction: it may run git
            with self._tx():
                self.db.execute("INSERT INTO meta VALUES ('config', ?)", (json.dumps(config, sort_keys=True, default=str),))
                self.db.execute("INSERT INTO meta VALUES ('fingerprint', ?)", (fingerprint(config),))
                self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                self.db.execute("INSERT INTO meta VALUES ('created', ?)", (str(time.time()),))
                for key, value in provenance.items():  # read by the harness card (jitlab/card.py)
                    self.db.execute("INSERT INTO meta VALUES (?, ?)", (key, value))
            return
        old = json.loads(row[0])
        if fingerprint(old) != fingerprint(config):
            finished = self.db.execute(f"SELECT COUNT(*) FROM episodes WHERE status IN ({','.join('?' * len(FINAL))})",
                                       FINAL).fetchone()[0]
            if not finished:  # nothing to resume: a refused first attempt must not block the corrected command
                raise _Unstarted
            def said(cfg, k):
                return repr(cfg[k]) if k in cfg else repr(self.implied[k]) if k in self.implied else "None"
            diffs = [f"{k}: {said(old, k)} -> {said(config, k)}" for k in sorted(set(old) | set(config))
                     if old.get(k) != config.get(k)]
            raise ConfigDrift(f"{self.dir} was started with a different config ({'; '.join(diffs)}). "
                              "Rerun with the original settings to resume, or pass --new-run to start over "
                              "(the old records are kept beside it).")

    def _tx(self):
        return transaction(self.db, self._lock, self.path)

    @contextlib.contextmanager
    def _read(self):
        """A read under the lock; a damaged page found mid-run is the file's problem, named as such."""
        with self._lock:
            try:
                yield
            except sqlite3.DatabaseError as exc:
                raise storage_error(self.path, exc) from exc

    def _recover(self) -> None:
        """Episodes left ``running`` by a killed process become ``interrupted`` (rerun later)."""
        with self._tx():
            self.db.execute("UPDATE episodes SET status='interrupted' WHERE status='running'")

    # -- episodes -----------------------------------------------------------------------------
    def status_of(self, harness_sha: str, task_id: str, seed: int) -> tuple[str | None, int]:
        """(latest status, attempts so far) of an episode identity."""
        with self._read():
            row = self.db.execute(
                "SELECT status, attempt FROM episodes WHERE harness_sha=? AND task_id=? AND seed=? "
                "ORDER BY attempt DESC LIMIT 1", (harness_sha, task_id, seed)).fetchone()
        return (row[0], row[1] + 1) if row else (None, 0)

    def start_episode(self, harness: str, harness_sha: str, task, seed: int, attempt: int, isolation: str) -> int:
        with self._tx():
            cur = self.db.execute(
                "INSERT INTO episodes (harness, harness_sha, task_id, family, split, seed, attempt, status, "
                "isolation, started) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (harness, harness_sha, task.id, task.family, task.split, seed, attempt, Status.RUNNING, isolation,
                 time.time()))
            return cur.lastrowid

    def log_step(self, episode_id: int, record: dict) -> None:
        with self._tx():
            self.db.execute("INSERT INTO steps VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", (
                episode_id, record["step"], record["tool"], json.dumps(record["args"], default=str),
                record.get("thought", ""), record["observation"], record.get("reward", 0.0),
                int(bool(record.get("done"))), record.get("tokens", 0), json.dumps(record.get("trace", {}), default=str),
                time.time(), json.dumps(record["compliance"]) if record.get("compliance") else None))

    def log_call(self, episode_id: int, call: dict) -> None:
        with self._tx():
            self.db.execute(f"INSERT INTO calls ({', '.join(_CALL_COLUMNS)}) VALUES ({','.join('?' * len(_CALL_COLUMNS))})", (
                episode_id, call["step"], call["phase"], call["kind"], call["key"], call["backbone"],
                call["prompt_tokens"], call["completion_tokens"], call["cost"], call["latency_s"],
                int(call["cached"]), json.dumps(call["messages"]), call["text"], time.time(), call.get("queue_s"),
                call.get("compute_s"), call.get("reused_tokens")))

    def finish_episode(self, episode_id: int, result: dict, llm) -> None:
        with self._tx():
            self.db.execute(
                "UPDATE episodes SET status=?, success=?, reward=?, steps=?, prompt_tokens=?, completion_tokens=?, "
                "cost=?, wall_s=?, tool_calls=?, llm_calls=?, cached_calls=(SELECT COUNT(*) FROM calls WHERE "
                "episode_id=? AND cached=1), error=?, diagnostic=?, extra=?, finished=? WHERE id=?",
                (result["status"], int(result["success"]), result["reward"], result["steps"], llm.prompt_tokens,
                 llm.completion_tokens, llm.cost, result["wall_s"], result["tool_calls"], llm.calls, episode_id,
                 result.get("error", ""), json.dumps(result.get("diagnostic", {})),
                 json.dumps(_extra(result)), time.time(), episode_id))

    def spend(self) -> tuple[float, int]:
        """(cost, tokens) of every recorded backbone call that reached the backbone (cache hits excluded):
        what a run-level spend cap is checked against on resume."""
        with self._lock:
            row = self.db.execute(_SPEND_SQL).fetchone()
        return float(row[0]), int(row[1])

    def final_episode(self, task_id: str, seed: int) -> dict | None:
        """The latest finished episode of a task (any harness), as a dict with ``extra`` decoded."""
        keys = ("id", "harness_sha", "status", "success", "reward", "steps", "wall_s", "tool_calls", "extra")
        with self._read():
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
            if self.db is not None:
                self.db.close()
                self.db = None
            self._writer.release()


_SPEND_SQL = ("SELECT COALESCE(SUM(cost), 0), COALESCE(SUM(prompt_tokens + completion_tokens), 0) "
              "FROM calls WHERE cached=0")


def recorded_spend(run_dir: str | Path) -> tuple[float, int]:
    """:meth:`RunStore.spend` of a run directory, read-only ((0.0, 0) when it holds no run yet)."""
    path = Path(run_dir) / DB_NAME
    if not path.is_file():
        return 0.0, 0
    db = connect_readonly(path)
    try:
        row = db.execute(_SPEND_SQL).fetchone()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{path} is not a readable jitlab run database ({exc}); move it away") from exc
    finally:
        db.close()
    return float(row[0]), int(row[1])


def load(run_dir: str | Path) -> dict:
    """Read a run directory into pandas DataFrames: episodes, steps, calls, config (one row).

    ``episodes`` holds every attempt; ``episodes[episodes.final]`` is one row per finished episode. A compact
    export (``jitlab export``, jitlab/export.py) loads the same way: episodes as stored, ``calls`` its per-call
    aggregates, ``steps`` its compact columns."""
    import pandas as pd
    path = Path(run_dir) / DB_NAME
    if not path.is_file() and (Path(run_dir) / EXPORT_MARKER).is_file():
        return _load_export(Path(run_dir))
    if path.is_dir():
        raise StorageError(f"{path} is a directory, not a jitlab run database; move it away")
    if not path.is_file():
        raise ConfigError(f"{run_dir} holds no {DB_NAME}; is it a jitlab run directory?")
    if path.stat().st_size == 0:
        raise StorageError(f"{path} is empty (0 bytes), not a jitlab run database; start the run over with the "
                           "command that wrote it plus --new-run")
    try:  # read-only: a reader never changes the records (no WAL checkpoint, no schema)
        db = connect_readonly(path)
        try:
            frames = {name: pd.read_sql_query(f"SELECT * FROM {name}", db) for name in ("episodes", "steps", "calls")}
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        finally:
            db.close()
        config = json.loads(meta.get("config", "{}"))
    except (sqlite3.DatabaseError, pd.errors.DatabaseError, json.JSONDecodeError) as exc:
        if (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM):
            raise StorageError(f"{path} cannot be opened for reading ({exc}); check the permissions of "
                               f"{path.parent}") from exc
        raise StorageError(f"{path} is corrupt or not a jitlab run database ({exc}); restore it, or start the run "
                           "over with the command that wrote it (jitlab run/jit ...) plus --new-run (the damaged file "
                           "is kept beside the new one)") from exc
    episodes = frames["episodes"]
    episodes["final"] = episodes["status"].isin(FINAL)
    episodes["tokens"] = episodes["prompt_tokens"].fillna(0) + episodes["completion_tokens"].fillna(0)
    calls = frames["calls"]
    for name in _ADDED_CALL_COLUMNS:  # a schema-1 file read without opening it for writing
        if name not in calls:
            calls[name] = pd.NA
    for name in _ADDED_STEP_COLUMNS:  # likewise a file from before steps.compliance
        if name not in frames["steps"]:
            frames["steps"][name] = None
    # prefix-hit rate: share of the call's prompt tokens taken from the KV prefix cache (NaN: not recorded)
    calls["prefix_hit"] = pd.to_numeric(calls["reused_tokens"], errors="coerce") / calls["prompt_tokens"].where(
        calls["prompt_tokens"] > 0)
    frames["config"] = pd.DataFrame([config])
    frames["meta"] = meta
    return frames


def _load_export(folder: Path) -> dict:
    """:func:`load` of a compact export: its CSV files with the column types recorded in run.json."""
    import pandas as pd
    try:
        info = json.loads((folder / EXPORT_MARKER).read_text())
        if info.get("format") != EXPORT_FORMAT:
            raise ConfigError(f"{folder / EXPORT_MARKER}: export format {info.get('format')!r}, this jitlab reads "
                              f"{EXPORT_FORMAT}; re-export the run with this version")
        frames = {}
        # floats round-trip exactly: pandas >= 3 parses them so by default, older pandas when asked
        exact = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
        for name, dtypes in info["dtypes"].items():
            text = [c for c, t in dtypes.items() if t == "object"]
            df = pd.read_csv(folder / f"{name}.csv", dtype={c: str for c in text}, keep_default_na=False,
                             na_values=[NULL], **exact)
            for c, t in dtypes.items():
                if t == "object":   # SQL NULL comes back from SQLite as None, not NaN
                    df[c] = df[c].astype(object).where(df[c].notna(), None)
                elif str(df[c].dtype) != t:
                    df[c] = df[c].astype(t)
            frames[name] = df
    except (OSError, KeyError, ValueError) as exc:
        raise StorageError(f"{folder} is not a readable jitlab export ({type(exc).__name__}: {exc}); export the run "
                           "again with `jitlab export`") from exc
    episodes = frames["episodes"]
    episodes["final"] = episodes["status"].isin(FINAL)
    episodes["tokens"] = episodes["prompt_tokens"].fillna(0) + episodes["completion_tokens"].fillna(0)
    frames["config"] = pd.DataFrame([info.get("config") or {}])
    frames["meta"] = info.get("meta") or {}
    return frames


def _intervals(done) -> dict:
    """The summary's interval keys (jitlab.stats.run_intervals): success rate (Wilson), mean reward and tokens per
    task (bootstrap over tasks)."""
    return run_intervals(done["success"].fillna(0), done["reward"].fillna(0.0), done["tokens"])


def prefix_reuse(calls, episodes) -> dict | None:
    """The prefix-reuse share of a run: prompt tokens its backbone calls took from a prefix (KV) cache over the
    prompt tokens they read, summed over the calls of its finished episodes, overall, ``by_kind`` (chat, score) and
    ``by_phase``. A score call's prompt tokens are its prompt's and candidates' tokens (jitlab.runtime.LLMHandle.score).
    Calls whose ``reused_tokens`` is NULL are not in the shares: score calls a backbone without a tokenizer counted
    in words, and calls of files from before schema 2; ``unmeasured_calls`` / ``unmeasured_prompt_tokens`` count
    them. ``calls``: the calls table of a run directory or an export's per-call aggregates (``n_calls``); None when
    the run made no call."""
    import pandas as pd
    final = set(episodes.loc[episodes["final"], "id"])
    calls = calls[calls["episode_id"].isin(final)]
    if calls.empty:
        return None
    n = calls["n_calls"] if "n_calls" in calls else pd.Series(1, index=calls.index)
    reused = pd.to_numeric(calls["reused_tokens"], errors="coerce") if "reused_tokens" in calls else \
        pd.Series(float("nan"), index=calls.index)   # an export of a run from before schema 2
    measured = reused.notna()

    def share(mask) -> dict:
        prompt, got = int(calls.loc[mask, "prompt_tokens"].sum()), int(reused[mask].sum())
        return {"share": got / prompt if prompt else None, "reused_tokens": got, "prompt_tokens": prompt,
                "calls": int(n[mask].sum())}
    return {**share(measured),
            "by_kind": {k: share(measured & (calls["kind"] == k)) for k in sorted(set(calls.loc[measured, "kind"]))},
            "by_phase": {p: share(measured & (calls["phase"] == p)) for p in sorted(set(calls.loc[measured, "phase"]))},
            "unmeasured_calls": int(n[~measured].sum()),
            "unmeasured_prompt_tokens": int(calls.loc[~measured, "prompt_tokens"].sum())}


def summarize(run_dir: str | Path, write: bool = True) -> dict:
    """Compute ``summary.json`` from the records (never from in-memory state); write it unless ``write=False``
    (read-only commands such as ``jitlab show``)."""
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
        # (task, seed) pairs with no finished episode: infra failures, interrupted (a task per seed under --repeat)
        "n_tasks_unfinished": len(set(zip(eps["task_id"], eps["seed"])) - set(zip(done["task_id"], done["seed"]))),
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
    summary.update(_intervals(done))
    compliance = compliance_summary(frames["steps"], eps)  # the steps of finished episodes
    if compliance is not None:  # per-step compliance records (parsed, admissible, realised, hooked, decided_by)
        summary["compliance"] = compliance
    # share of prompt tokens taken from the backbone's prefix cache (docs/records.md); None: no backbone call
    summary["prefix_reuse"] = prefix_reuse(frames["calls"], eps)
    repeats = repeat_summary(done)
    if repeats is not None:  # some task ran at several seeds (--repeat): pass@1 over repeats, pass^k, variance
        summary["repeats"] = repeats
    if write:
        tmp = Path(run_dir) / "summary.json.tmp"
        try:
            tmp.write_text(json.dumps(summary, indent=2))
            os.replace(tmp, Path(run_dir) / "summary.json")
        except OSError as exc:
            raise storage_error(Path(run_dir) / "summary.json", exc) from exc
    return summary
