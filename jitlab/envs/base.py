"""Environment protocol, TaskSpec and the suite registry.

A *suite* (textworld, babyai, dbbench, ...) lists tasks by split and family and builds an
``Env`` for one task. Suites register themselves by short name in ``SUITES`` (a dotted path
to a zero-argument factory), so importing this module stays cheap. A suite's ``reset_varies`` (bool) says
whether another ``reset(seed)`` plays another episode of a task: what ``--repeat`` can vary (jitlab/repeats.py).
A name ``mix:<a>+<b>...`` (or ``mix:<spec.yaml>``) builds the mixed stream of several suites (jitlab/envs/mix.py).
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from jitlab.errors import JitlabError, UnknownName
from jitlab.plumbing import load_entry
from jitlab.protocol import Capability, Observation

__all__ = ["MIX_PREFIX", "SUITES", "Env", "Score", "Suite", "TaskSpec", "check_choice", "get_suite", "interleave", "suite_names",
           "suite_version"]


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
    "toy": "jitlab.envs.toy:ToySuite",
}
MIX_PREFIX = "mix:"   # a mixed stream of several suites: built by this factory from what follows the prefix
_MIX = "jitlab.envs.mix:MixSuite"


def suite_names() -> list[str]:
    return sorted(SUITES)


def get_suite(name: str) -> Suite:
    """Build a suite by short name, ``package.module:Class`` path or ``mix:...`` (jitlab/envs/mix.py)."""
    if name.startswith(MIX_PREFIX):
        return load_entry(_MIX)(name[len(MIX_PREFIX):])
    target = SUITES.get(name, name if ":" in name else None)
    if target is None:
        raise UnknownName("suite", name, SUITES)
    return load_entry(target)()


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
