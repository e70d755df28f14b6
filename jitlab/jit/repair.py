"""Validation and bounded repair of generated harnesses.

    from jitlab.jit.repair import RepairConfig, RepairLog, validate_files, validate_and_repair
    v = validate_files(files, dev_task, suite, llm, RepairConfig(), workdir)      # v.ok, v.diagnostic
    out = validate_and_repair(candidate, generator, task.public(), dev_task, suite, new_llm,
                              RepairConfig(max_rounds=2), workdir, log=RepairLog(run_dir / "repairs.jsonl"))

Before any of it, a candidate carrying an option that does not fit the task (``unfit``: the fit rule of
jitlab.jit.generate.library) is refused and goes to repair, like one the model wrote no file of (``unwritten``).
Validation, all in the sandbox (jitlab.sandbox): compile + import + interface check
(``sandbox.validate``), then one smoke episode of at most ``smoke_steps`` steps on a *dev* task
(``dev_task_for``: the same family, else the same kind of task, never the task being solved when another
exists). A smoke episode that ends ``ok`` or out of budget passes; one that raises in harness code fails with the
sandbox's typed diagnostic. The smoke run's success is never reported (selection must not see scores).

Repair: while invalid and rounds remain, ``generator.repair(candidate, diagnostic)`` proposes a
corrected file set, which is validated again. Every transition (broken files, diagnostic, fixed files,
outcome, new diagnostic) is appended to ``repairs.jsonl``: Stage II training data. One JSON object per
line, written with a single ``write`` on an ``O_APPEND`` descriptor and fsynced; a transition already
in the file (same ``id``) is not written twice, so a resumed run does not duplicate it.

An ``InfraError`` (the sandbox cannot start, the provider is down) is raised, never repaired.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import jitlab.sandbox
from jitlab.errors import BudgetExceeded, ConfigError, InfraError
from jitlab.harness import harness_sha
from jitlab.jit.generate.library import SPACE, choices_of, misfit_message, misfits
from jitlab.jit.kind import task_kind
from jitlab.plumbing import json_digest
from jitlab.runner import sandboxed_episode
from jitlab.runtime import Budget
from jitlab.status import Status

__all__ = [
    "RepairConfig",
    "RepairLog",
    "RepairOutcome",
    "Validation",
    "dev_task_for",
    "unfit",
    "validate_and_repair",
    "validate_files",
    "write_harness",
]


@dataclass
class RepairConfig:
    """Validation and repair limits."""
    max_rounds: int = field(default=2, metadata={"help": "repair rounds at most (0: validate only)"})
    smoke_steps: int = field(default=3, metadata={"help": "steps of the smoke episode on a dev task (0: no smoke run)"})
    smoke_max_tokens: int = field(default=6000, metadata={"help": "backbone tokens the smoke episode may spend"})
    smoke_wall_s: float = field(default=300.0, metadata={"help": "wall seconds of the smoke episode"})
    request_wall_s: float = field(default=60.0, metadata={"help": "sandbox wall limit per request (load, begin, "
                                                                  "decide, observe); backbone time not counted"})
    allow_unisolated: bool = field(default=False, metadata={"help": "run candidates without bubblewrap when it is "
                                                                    "unavailable (recorded loudly)"})
    seed: int = field(default=0, metadata={"help": "seed of the smoke episode"})

    def sandbox(self):
        return jitlab.sandbox.SandboxConfig(wall_s=self.request_wall_s, allow_unisolated=self.allow_unisolated)


@dataclass
class Validation:
    """Outcome of ``validate_files``: ``stage`` is where it stopped (load | smoke | passed)."""
    ok: bool
    stage: str
    sha: str
    diagnostic: dict | None = None
    wall_s: float = 0.0
    smoke: dict = field(default_factory=dict)     # status, steps, tool_calls (never success)
    isolation: str = ""

    def as_dict(self) -> dict:
        return {"ok": self.ok, "stage": self.stage, "sha": self.sha, "diagnostic": self.diagnostic,
                "wall_s": round(self.wall_s, 3), "smoke": self.smoke, "isolation": self.isolation}


@dataclass
class RepairOutcome:
    candidate: object            # jitlab.jit.generate.Candidate (the last version)
    validation: Validation
    rounds: int
    transitions: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.validation.ok


def write_harness(files: dict[str, str], dest: str | Path) -> Path:
    """Write a file set into folder ``dest`` atomically (a temp folder renamed into place), readable by
    the sandbox's uid. A ``dest`` that already holds these files is kept. Threads of one process
    (static JIT solving tasks at once) take turns, so two never race to create the same folder."""
    with _WRITE_LOCK:
        return _write_harness(files, Path(dest))


_WRITE_LOCK = threading.Lock()


def _write_harness(files: dict[str, str], dest: Path) -> Path:
    if dest.is_dir():
        try:
            if all((dest / n).read_text() == t for n, t in files.items()) and \
                    sorted(p.name for p in dest.iterdir()) == sorted(files):
                return dest
        except OSError:
            pass
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        for name, text in files.items():
            if "/" in name or name.startswith("."):
                raise ValueError(f"refusing harness file name {name!r}")
            (tmp / name).write_text(text)
            (tmp / name).chmod(0o644)
        tmp.chmod(0o755)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def dev_task_for(suite, task):
    """The dev task a candidate's smoke episode runs on: the first dev task of the same family that is not
    ``task`` itself (else one of the same suite and kind, ``jitlab.jit.kind.task_kind``: the same tools; in a mix
    the task's own suite; else one of the same kind, else of the same suite, else any dev task, else ``task``)."""
    try:
        same = suite.tasks("dev", task.family)
    except ConfigError:  # a suite without that family in dev: one of the same kind (tools), else any, will do
        same = []
    same = [t for t in same if t.id != task.id]
    if same:
        return same[0]
    others = [t for t in suite.tasks("dev") if t.id != task.id]
    kind = task_kind(task)
    return ([t for t in others if t.suite == task.suite and task_kind(t) == kind]
            or [t for t in others if task_kind(t) == kind] or [t for t in others if t.suite == task.suite] or others
            or [task])[0]


def validate_files(files: dict[str, str], dev_task, suite, llm, config: RepairConfig, workdir: str | Path) -> Validation:
    """Compile + import + interface check, then a smoke episode, all in the sandbox. Raises InfraError
    when the sandbox (or the backbone provider) fails; never returns a diagnostic for that."""
    start = time.perf_counter()
    sha = harness_sha(files)
    folder = write_harness(files, Path(workdir) / sha[:16])
    result = jitlab.sandbox.validate(folder, config.sandbox())
    if not result.ok:
        return Validation(False, "load", sha, result.diagnostic.as_dict(), time.perf_counter() - start,
                          isolation=result.isolation)
    if config.smoke_steps <= 0:
        return Validation(True, "passed", sha, None, time.perf_counter() - start, isolation=result.isolation)
    episode, agent = sandboxed_episode(suite, dev_task, folder, llm, Budget(config.smoke_steps, config.smoke_max_tokens,
                                                                          config.smoke_wall_s), config.seed, config.sandbox())
    smoke = {"status": episode.status, "steps": episode.steps, "tool_calls": episode.tool_calls,
             "wall_s": round(episode.wall_s, 3)}
    wall = time.perf_counter() - start
    if episode.status == Status.INFRA_ERROR:
        raise InfraError(f"smoke episode of {sha[:12]} hit an infrastructure failure: {episode.error}")
    if episode.status == Status.HARNESS_ERROR:
        diag = dict(episode.diagnostic)   # the child's own account when it gave one (sandboxed_episode)
        diag.setdefault("phase", "smoke")
        return Validation(False, "smoke", sha, diag, wall, smoke, agent.isolation)
    return Validation(True, "passed", sha, None, wall, smoke, agent.isolation)


class RepairLog:
    """Append-only JSONL of repair transitions (see module docstring). Thread-safe."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._ids = {r.get("id") for r in self.read()}

    def read(self) -> list[dict]:
        """Every complete transition (a torn last line from a killed process is skipped)."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def append(self, record: dict) -> bool:
        """Write one transition; False when an identical one (same id) is already there."""
        record = dict(record)
        record.setdefault("id", json_digest([record.get("task_id"), record.get("round"), record.get("broken_sha"),
                                             record.get("fixed_sha"), record.get("diagnostic")])[:20])
        record.setdefault("t", time.time())
        data = (json.dumps(record, sort_keys=True, default=str) + "\n").encode()
        with self._lock:
            if record["id"] in self._ids:
                return False
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if os.fstat(fd).st_size and not self._ends_with_newline():
                    data = b"\n" + data  # a torn line from a killed writer stays torn, on its own line
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._ids.add(record["id"])
        return True

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) == b"\n"


def unwritten(candidate) -> Validation | None:
    """A parse_error for a code candidate the model wrote none of (its reply held no file block, so
    every file is a copy of the nearest reference): that is not a generated harness, so it goes to
    repair, not to validation. None for any other candidate."""
    meta = getattr(candidate, "meta", None) or {}
    if meta.get("parsed_files") == [] and not meta.get("repair_parsed_files"):
        return Validation(False, "parse", candidate.sha, {
            "kind": "parse_error", "file": None, "line": None, "phase": "generate",
            "message": meta.get("parse_error") or "the reply held no <file name=...> block, so no file was written; "
                       "write each file as <file name=\"action.py\">...</file>"})
    return None


def unfit(candidate, task: dict) -> Validation | None:
    """A refusal of a candidate carrying an option that does not fit ``task`` (its public dict; the fit rule,
    ``jitlab.jit.generate.library.misfits``: a likelihood action where the task gives no ``act`` tool, say): an
    ``interface_mismatch`` at stage ``fit`` naming the first such role's file, so repair re-picks or rewrites it; it is
    never validated or run. None when everything fits."""
    problems = misfits(choices_of(candidate.files), task)
    if not problems:
        return None
    role = next(iter(problems))
    return Validation(False, "fit", candidate.sha, {
        "kind": "interface_mismatch", "file": SPACE[role][0] if role in SPACE else "prompt.yaml", "line": None,
        "phase": "fit", "message": f"this harness does not fit the task: {misfit_message(problems)}"})


def validate_and_repair(candidate, generator, task: dict, dev_task, suite, new_llm, config: RepairConfig,
                        workdir: str | Path, log: RepairLog | None = None, first: Validation | None = None,
                        context: dict | None = None) -> RepairOutcome:
    """Validate ``candidate`` (or take ``first``, its validation already done) and repair it for up to
    ``config.max_rounds`` rounds. ``new_llm(phase)`` returns a fresh backbone handle for a phase
    ("select" for the first validation, "repair" afterwards). ``context`` is added to each logged
    transition (e.g. run dir, stream index)."""
    validation = first or unwritten(candidate) or unfit(candidate, task) or validate_files(
        candidate.files, dev_task, suite, new_llm("select"), config, workdir)
    rounds, transitions = 0, []
    while not validation.ok and rounds < config.max_rounds:
        rounds += 1
        try:
            fixed = generator.repair(candidate, validation.diagnostic or {}, task, new_llm("repair"), round=rounds)
        except BudgetExceeded as exc:
            record = _transition(candidate, None, validation, None, rounds, "budget", task, context, str(exc))
            transitions.append(record)
            if log is not None:
                log.append(record)
            break
        if fixed.sha == candidate.sha:
            after, outcome = validation, "unchanged"
        else:
            after = unwritten(fixed) or unfit(fixed, task) or validate_files(fixed.files, dev_task, suite,
                                                                            new_llm("repair"), config, workdir)
            outcome = "fixed" if after.ok else "still_broken"
        record = _transition(candidate, fixed, validation, after, rounds, outcome, task, context)
        transitions.append(record)
        if log is not None:
            log.append(record)
        candidate, validation = fixed, after
    return RepairOutcome(candidate, validation, rounds, transitions)


def _transition(broken, fixed, before: Validation, after: Validation | None, round_: int, outcome: str, task: dict,
                context: dict | None, error: str = "") -> dict:
    return {"task_id": task.get("id"), "suite": task.get("suite"), "family": task.get("family"),
            "generator": getattr(broken, "generator", ""), "round": round_, "outcome": outcome,
            "broken_sha": broken.sha, "broken_files": broken.files, "diagnostic": before.diagnostic,
            "fixed_sha": fixed.sha if fixed else None, "fixed_files": fixed.files if fixed else None,
            "new_diagnostic": after.diagnostic if after else None, "validation": after.as_dict() if after else None,
            "repair_note": (fixed.meta.get("note") if fixed else error) or "", **(context or {})}
