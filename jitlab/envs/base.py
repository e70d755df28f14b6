"""Environment protocol, TaskSpec and the suite registry.

A *suite* (textworld, babyai, dbbench, ...) lists tasks by split and family and builds an
``Env`` for one task. Suites register themselves by short name in ``SUITES`` (a dotted path
to a zero-argument factory), so importing this module stays cheap. A suite's ``reset_varies`` (bool) says
whether another ``reset(seed)`` plays another episode of a task: what ``--repeat`` can vary (jitlab/repeats.py).
A name ``mix:<a>+<b>...`` (or ``mix:<spec.yaml>``) builds the mixed stream of several suites (jitlab/envs/mix.py).

A user suite is named by its dotted path (``--suite mypkg.suites:MySuite``, the package on ``PYTHONPATH``):
:func:`get_suite` says in one line when the module cannot be imported, lacks the name, the factory raises or
what it returns has no ``tasks`` / ``make_env``; :func:`checked_tasks` (what every command that runs tasks
lists them with) refuses a ``tasks()`` that raises or returns anything but a list of TaskSpec with distinct ids
(the id is part of the episode identity: a second task of the same id would be skipped as done) and a step
budget of at least 1. Both come before a run directory is written.
"""
from __future__ import annotations

import dataclasses
import importlib
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from jitlab.errors import ConfigError, InfraError, JitlabError, UnknownName
from jitlab.plumbing import load_entry
from jitlab.protocol import Capability, Observation

__all__ = ["MIX_PREFIX", "SUITES", "Env", "Score", "Suite", "TaskSpec", "check_choice", "checked_tasks", "get_suite",
           "interleave", "make_env", "suite_label", "suite_names", "suite_version"]


@dataclass
class TaskSpec:
    """One task. ``description`` is written for a harness generator: what the task is, what tools
    exist, what success means, the budgets (the step budget as "Budget: [at most] <max_steps> ...", which
    :meth:`with_max_steps` rewrites). ``data`` holds what the suite needs to build the env (never shown to the
    harness: it may hold answers)."""
    id: str
    suite: str
    family: str
    split: str
    description: str
    tools: list[Capability] = field(default_factory=list)
    max_steps: int = 30
    data: dict = field(default_factory=dict, repr=False)

    def with_max_steps(self, max_steps: int | None) -> TaskSpec:
        """The task as an episode with a lower step cap (``--max-steps``) presents it: ``max_steps`` and the
        description's budget sentence say the cap. A cap of None or at least the task's own changes nothing."""
        if max_steps is None or max_steps >= self.max_steps:
            return self
        text = re.sub(rf"(Budget: (?:at most )?){self.max_steps}\b", rf"\g<1>{max_steps}", self.description)
        return dataclasses.replace(self, max_steps=max_steps, description=text)

    def public(self) -> dict:
        """The part a harness may see (no ``data``)."""
        return {"id": self.id, "suite": self.suite, "family": self.family, "split": self.split,
                "description": self.description, "max_steps": self.max_steps,
                "tools": [{"name": c.name, "description": c.description, "args": c.args} for c in self.tools]}


@dataclass
class Score:
    success: bool
    reward: float
    info: dict = field(default_factory=dict)


@runtime_checkable
class Env(Protocol):
    spec: TaskSpec

    def reset(self, seed: int = 0) -> Observation: ...
    def step(self, tool: str, args: dict) -> Observation: ...
    def score(self) -> Score: ...
    def close(self) -> None: ...


@runtime_checkable
class Suite(Protocol):
    name: str
    version: str  # bumped when tasks, actions or scoring change; recorded in each run (its harness card)
    families: list[str]
    splits: list[str]

    def tasks(self, split: str = "dev", family: str | None = None) -> list[TaskSpec]: ...
    def make_env(self, spec: TaskSpec) -> Env: ...


SUITES: dict[str, str] = {
    "textworld": "jitlab.envs.textworld:TextWorldSuite",
    "babyai": "jitlab.envs.babyai:BabyAISuite",
    "dbbench": "jitlab.envs.dbbench:DBBenchSuite",
    "twx": "jitlab.envs.twx:TwxSuite",
    "toy": "jitlab.envs.toy:ToySuite",
}
MIX_PREFIX = "mix:"   # a mixed stream of several suites: built by this factory from what follows the prefix
_MIX = "jitlab.envs.mix:MixSuite"


def suite_names() -> list[str]:
    return sorted(SUITES)


def get_suite(name: str) -> Suite:
    """Build a suite by short name, ``package.module:Class`` path or ``mix:...`` (jitlab/envs/mix.py); ConfigError
    (one line) when a dotted path cannot be imported, lacks the name, its factory raises or returns no suite (no
    ``tasks``/``make_env``)."""
    if name.startswith(MIX_PREFIX):
        return load_entry(_MIX)(name[len(MIX_PREFIX):])
    target = SUITES.get(name, name if ":" in name else None)
    if target is None:
        raise UnknownName("suite", name, SUITES)
    module, _, attr = target.partition(":")
    if name in SUITES:
        return load_entry(target)()
    where = f"--suite {name}"
    try:
        factory = getattr(importlib.import_module(module), attr, None)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"{where}: no module {exc.name!r} to import; check the dotted path (package.module:Class) "
                          "and that its folder is on PYTHONPATH") from exc
    except Exception as exc:
        raise ConfigError(f"{where}: importing {module} failed ({type(exc).__name__}: {exc}); fix that module") from exc
    if factory is None:
        raise ConfigError(f"{where}: module {module} has no {attr!r}; name the suite class or factory it defines")
    try:
        suite = factory()
    except JitlabError:
        raise
    except Exception as exc:
        raise ConfigError(f"{where}: {attr}() raised {type(exc).__name__}: {exc}; fix the suite's constructor") from exc
    missing = [m for m in ("tasks", "make_env") if not callable(getattr(suite, m, None))]
    if missing:
        raise ConfigError(f"{where}: {attr}() returned a {type(suite).__name__}, not a suite (no {' or '.join(missing)}"
                          " method); a suite has name, splits, families, tasks(split, family) and make_env(spec)")
    return suite


def suite_label(suite) -> str:
    """How messages name a suite: its ``name`` for jitlab's own, ``module:Class`` for a user suite."""
    cls = type(suite)
    own = cls.__module__.startswith("jitlab.")
    return str(getattr(suite, "name", cls.__name__)) if own else f"{cls.__module__}:{cls.__qualname__}"


def checked_tasks(suite, split: str = "dev", family: str | None = None) -> list[TaskSpec]:
    """``suite.tasks(split, family)``, checked: a list of TaskSpec with distinct ids and ``max_steps`` of at least 1.
    ConfigError (one line naming the suite, split and tasks) otherwise, and when ``tasks`` raises."""
    where = f"suite {suite_label(suite)} split {split}"
    try:
        tasks = suite.tasks(split, family)
    except JitlabError:
        raise
    except Exception as exc:
        raise ConfigError(f"{where}: tasks() raised {type(exc).__name__}: {exc}; fix the suite") from exc
    if not isinstance(tasks, list | tuple):
        raise ConfigError(f"{where}: tasks() returned {type(tasks).__name__}, not a list of TaskSpec; fix the suite")
    bad = [f"item {i} ({type(t).__name__})" for i, t in enumerate(tasks) if not isinstance(t, TaskSpec)]
    if bad:
        raise ConfigError(f"{where}: tasks() returned {', '.join(bad[:3])}{' and more' if len(bad) > 3 else ''}, "
                          "not TaskSpec (jitlab.envs.base.TaskSpec); fix the suite")
    dup = [f"{i!r} ({n}x)" for i, n in Counter(t.id for t in tasks).items() if n > 1]
    if dup:
        raise ConfigError(f"{where}: duplicate task ids {', '.join(dup[:5])}{' and more' if len(dup) > 5 else ''}; "
                          "each task needs its own id (an episode is identified by it: a repeated id would be "
                          "skipped as done)")
    short = [f"{t.id} ({t.max_steps!r})" for t in tasks
             if isinstance(t.max_steps, bool) or not isinstance(t.max_steps, int) or t.max_steps < 1]
    if short:
        raise ConfigError(f"{where}: max_steps must be an integer >= 1, got {', '.join(short[:3])}"
                          f"{' and more' if len(short) > 3 else ''}; give every task a step budget")
    return list(tasks)


def make_env(suite, spec: TaskSpec) -> Env:
    """``suite.make_env(spec)``; an exception other than jitlab's own (an InfraError, a ConfigError for the user) is
    the suite's failure on this task, raised as an InfraError naming it: the episode fails with it (retried as
    infrastructure) and the run goes on."""
    try:
        return suite.make_env(spec)
    except JitlabError:
        raise
    except Exception as exc:
        raise InfraError(f"suite {suite_label(suite)}: make_env({spec.id}) failed: {type(exc).__name__}: {exc}") from exc


def suite_version(name: str | None) -> str | None:
    """The ``version`` of suite ``name`` without building it (None: unknown suite or no version declared); a mix is
    built (its version is its parts')."""
    if name and name.startswith(MIX_PREFIX):
        try:
            return get_suite(name).version
        except (JitlabError, ImportError, OSError):
            return None
    target = SUITES.get(name or "", name if name and ":" in name else None)
    if target is None:
        return None
    try:
        return getattr(load_entry(target), "version", None)
    except (ImportError, AttributeError):
        return None


def interleave(specs: list[TaskSpec], key=lambda spec: spec.family) -> list[TaskSpec]:
    """Round-robin over groups (default: families), keeping order inside each group, so that the
    first N tasks of a split (``--limit N``) are a stratified slice rather than one family."""
    groups: dict = {}
    for spec in specs:
        groups.setdefault(key(spec), []).append(spec)
    columns = list(groups.values())
    return [col[i] for i in range(max(map(len, columns), default=0)) for col in columns if i < len(col)]


def check_choice(kind: str, value: str | None, allowed) -> None:
    """Raise UnknownName when ``value`` is set and not in ``allowed``."""
    if value is not None and value not in allowed:
        raise UnknownName(kind, value, allowed)
