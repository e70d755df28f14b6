"""Mixed streams: the tasks of several suites as one suite.

    get_suite("mix:textworld+babyai+dbbench")     # every task of each part's split, interleaved
    get_suite("mix:textworld+babyai+dbbench@1")   # the same tasks in an order shuffled with seed 1
    get_suite("mix:benchmarks/mix.yaml")          # a spec file: counts per part and split, a seeded order

A part is a registered suite name or a ``package.module:Class`` path. Each task keeps its own suite's environment,
tools, budget and scorer (``make_env`` hands it to its part, which sees the task as in a run of its own). In the mix
a task's ``suite`` is its part's name and its ``family`` is ``<suite>/<family>`` (:func:`family_label`), so every
record, export and table keys a family by (suite, family): DBBench's ``other`` is not another suite's ``other``.

Order: the parts' tasks interleaved in proportion to their counts (task i of a part with n sits at (i + 0.5) / n,
ties in the order the parts are named). Each part's list is already stratified by family, so the first N tasks of
a mix (``--limit N``) are a stratified slice, as for one suite. A shuffle seed (``@N``, ``shuffle: N``) puts the same
tasks in a seeded random order: the order sensitivity of a stream. ``--repeat`` keeps its meaning (other reset and
sampling seeds, jitlab/repeats.py); runs of the same mix in other orders pair task by task (``jitlab compare``).

A spec file (YAML)::

    parts:                 # part -> {split: count} (the first `count` tasks); a split not named takes all its tasks
      textworld: {test: 9}
      babyai: {test: 12}
      dbbench: {test: 9, holdout: {from: test, offset: 50, count: 50}}
    shuffle: 1             # optional: a seeded order (absent: the interleaving above)

A split may also map to a slice of one of the part's own splits, ``{from: <split>, offset: N, count: N}`` (``from``
defaults to the split's own name, ``offset`` to 0, ``count`` to the rest): a part without a split the others have (DBBench
has no ``holdout``) can serve it from tasks no other run of that split touches. The tasks keep their part's split (the
part sees each as in a run of its own).

Refused when the mix is built (before a run writes anything), each in one line: an unknown part, a part named twice,
a spec file that is missing or malformed, a count or slice beyond the tasks a part's split has, a task id in two parts.
"""
from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import yaml

from jitlab.envs.base import MIX_PREFIX, TaskSpec, check_choice, get_suite
from jitlab.errors import ConfigError, UnknownName

__all__ = ["MixSuite", "family_label", "source_of"]

_SPEC_KEYS = {"parts", "shuffle"}
_SLICE_KEYS = {"from", "offset", "count"}


def _slice(split: str, want) -> tuple[str, int, int | None] | None:
    """``(source split, offset, count or None)`` of a spec's ``split: want`` (a count, or a ``{from, offset, count}``
    mapping); None when ``want`` is neither."""
    def whole(n, least):
        return isinstance(n, int) and not isinstance(n, bool) and n >= least
    if whole(want, 1):
        return split, 0, want
    if not isinstance(want, dict) or not want or set(want) - _SLICE_KEYS:
        return None
    source, offset, count = want.get("from", split), want.get("offset", 0), want.get("count")
    if not isinstance(source, str) or not whole(offset, 0) or not (count is None or whole(count, 1)):
        return None
    return source, offset, count


def family_label(suite: str, family: str) -> str:
    """The family of a task in a mix: ``<suite>/<family>``."""
    return f"{suite}/{family}"


def source_of(family: str, suite: str | None = None) -> tuple[str | None, str]:
    """``(source suite, family)`` of a recorded family: a mix's ``<suite>/<family>`` split in two, any other family
    with ``suite`` (the run's)."""
    head, sep, tail = str(family).partition("/")
    return (head, tail) if sep else (suite, str(family))


def _parse(text: str) -> tuple[dict, int | None]:
    """``({part: {split: count}}, shuffle seed or None)`` of what follows ``mix:``."""
    if text.endswith((".yaml", ".yml")) or "/" in text:
        return _read_spec(Path(text))
    body, _, seed = text.partition("@")
    parts = [p.strip() for p in body.split("+")]
    if len(parts) < 2 or not all(parts):
        raise ConfigError(f"suite {MIX_PREFIX}{text}: name two or more suites joined by '+', e.g. "
                          f"{MIX_PREFIX}textworld+babyai+dbbench, or a spec file ({MIX_PREFIX}mix.yaml)")
    if seed and not seed.isdigit():
        raise ConfigError(f"suite {MIX_PREFIX}{text}: the shuffle seed after '@' must be a whole number, got {seed!r}")
    if len(set(parts)) != len(parts):
        name = next(p for p in parts if parts.count(p) > 1)
        raise ConfigError(f"suite {MIX_PREFIX}{text}: part {name!r} is named twice; name each suite once")
    return {p: {} for p in parts}, int(seed) if seed else None


def _read_spec(path: Path) -> tuple[dict, int | None]:
    where = f"mix spec {path}"
    try:
        spec = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it ({exc.strerror or exc}); check the path") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML ({str(exc).splitlines()[0]})") from exc
    if not isinstance(spec, dict) or not isinstance(spec.get("parts"), dict) or len(spec["parts"]) < 2:
        raise ConfigError(f"{where}: expected a mapping with 'parts' (two or more suites, each mapped to "
                          "{split: count} or nothing) and optionally 'shuffle' (a seed)")
    if extra := sorted(set(spec) - _SPEC_KEYS):
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, extra))}; allowed: parts, shuffle")
    shuffle = spec.get("shuffle")
    if shuffle is not None and (isinstance(shuffle, bool) or not isinstance(shuffle, int) or shuffle < 0):
        raise ConfigError(f"{where}: shuffle must be a whole number >= 0 (a seed), got {shuffle!r}")
    parts = {}
    for name, counts in spec["parts"].items():
        counts = {} if counts is None else counts
        slices = {s: _slice(s, n) for s, n in counts.items() if isinstance(s, str)} if isinstance(counts, dict) else {}
        if not isinstance(counts, dict) or len(slices) != len(counts) or None in slices.values():
            raise ConfigError(f"{where}: part {name!r} must map each split to a count >= 1 (e.g. {{test: 9}}) or to "
                              f"a slice {{from: test, offset: 50, count: 50}}, or be empty, got {counts!r}")
        parts[str(name)] = slices
    return parts, shuffle


def _proportional(columns: list[list]) -> list:
    """The items of ``columns`` interleaved in proportion to their lengths (see the module docstring)."""
    keyed = [((i + 0.5) / len(col), c, item) for c, col in enumerate(columns) for i, item in enumerate(col)]
    return [item for *_, item in sorted(keyed, key=lambda k: k[:2])]


class MixSuite:
    """Several suites as one (see the module docstring); built by ``get_suite("mix:...")``."""

    def __init__(self, text: str):
        self.name = MIX_PREFIX + text
        counts, self.shuffle = _parse(text)
        self.parts, self.counts = {}, {}
        for given, want in counts.items():
            if given.startswith(MIX_PREFIX):
                raise ConfigError(f"suite {self.name}: part {given!r} is itself a mix; name its suites instead")
            try:
                part = get_suite(given)
            except UnknownName as exc:
                raise ConfigError(f"suite {self.name}: {exc}") from exc
            if part.name in self.parts:
                raise ConfigError(f"suite {self.name}: parts {given!r} and another are both suite {part.name!r}")
            self.parts[part.name], self.counts[part.name] = part, want
        self.families = [family_label(n, f) for n, p in self.parts.items() for f in p.families]
        named = [s for p in self.parts.values() for s in p.splits] + [s for want in self.counts.values() for s in want]
        self.splits = [s for s in dict.fromkeys(named)
                       if all(s in p.splits or s in self.counts[n] for n, p in self.parts.items())]
        self.version = "+".join(f"{n}={getattr(p, 'version', '?')}" for n, p in self.parts.items())
        self.reset_varies = any(getattr(p, "reset_varies", False) for p in self.parts.values())
        self._tasks: dict[str, list[TaskSpec]] = {}
        for name, want in self.counts.items():   # every split a count names, checked now
            for split, (source, _, _) in want.items():
                if source not in self.parts[name].splits:
                    raise ConfigError(f"suite {self.name}: part {name} takes {split} tasks from split {source!r}; "
                                      f"it has {', '.join(self.parts[name].splits)}")
                if split not in self.splits:
                    lacks = next(n for n, p in self.parts.items() if split not in p.splits and split not in self.counts[n])
                    raise ConfigError(f"suite {self.name}: part {name} names split {split!r}, which part {lacks} has "
                                      f"not; give {lacks} a slice of one of its splits ({', '.join(self.parts[lacks].splits)}) "
                                      f"for it, e.g. {split}: {{from: test, offset: 50, count: 50}}")
        for split in sorted({s for want in self.counts.values() for s in want}):
            self.tasks(split)

    @property
    def oracle(self):
        """The oracle of each task's part (present only when every part has one, as ``jitlab run --harness oracle``
        checks)."""
        if not all(hasattr(p, "oracle") for p in self.parts.values()):
            raise AttributeError("oracle")
        return lambda env: self.parts[env.spec.suite].oracle(env)

    def tasks(self, split: str = "dev", family: str | None = None) -> list[TaskSpec]:
        check_choice("split", split, self.splits)
        check_choice("family", family, self.families)
        if split not in self._tasks:
            self._tasks[split] = self._build(split)
        return [t for t in self._tasks[split] if family is None or t.family == family]

    def _build(self, split: str) -> list[TaskSpec]:
        columns, owner = [], {}
        for name, part in self.parts.items():
            source, offset, n = self.counts[name].get(split, (split, 0, None))
            every = part.tasks(source)
            if offset + (n or 0) > len(every) or offset >= len(every) > 0:
                asked = f"{n} {source} tasks" + (f" from task {offset}" if offset else "")
                raise ConfigError(f"suite {self.name}: {asked} of {name} asked, it has {len(every)}")
            column = []
            for spec in every[offset:None if n is None else offset + n]:
                if spec.id in owner:
                    raise ConfigError(f"suite {self.name}: task id {spec.id!r} is in both {owner[spec.id]} and {name}; "
                                      "a mix needs distinct task ids")
                owner[spec.id] = name
                column.append(dataclasses.replace(spec, suite=name, family=family_label(name, spec.family)))
            columns.append(column)
        order = _proportional(columns)
        if self.shuffle is not None:
            random.Random(self.shuffle).shuffle(order)
        return order

    def make_env(self, spec: TaskSpec):
        """The task's own suite's environment, holding the task as that suite lists it (its own family)."""
        if spec.suite not in self.parts:
            raise ConfigError(f"task {spec.id} is of suite {spec.suite!r}, not a part of {self.name}")
        return self.parts[spec.suite].make_env(dataclasses.replace(spec, family=source_of(spec.family)[1]))
