"""Validation of config dataclasses from their field metadata: one rule per field, shared by the CLI,
notebooks and the Python API.

A field opts in with metadata next to its ``help``::

    limit: int | None = field(default=None, metadata={"help": "first N tasks", "min": 1})
    max_wall_s: float = field(default=900.0, metadata={"help": "wall seconds", "min_exclusive": 0})
    out: str | None = field(default=None, metadata={"help": "run directory", "nonempty": True})

Keys: ``min`` / ``max`` (inclusive), ``max_why`` (why the upper bound: said in the error and, as "at most N",
in the option's help), ``min_exclusive``, ``nonempty`` (a string that is not blank), ``choices`` (the values
allowed; the CLI lists them in ``--help``, this check enforces them everywhere) and ``option`` (the name in
messages; default ``--<field-name>`` with dashes). A count that allocates per unit (threads, candidates, rounds,
sampled replies, tensor rows) takes one of the bounds below, ``metadata={"help": ..., "min": 1, **WORKERS_MAX}``.
Numbers are type-checked from the annotation: an ``int`` field takes an int (not a bool, not 2.0), a ``float``
field a finite int or float; ``None`` is accepted only where the annotation allows it. Errors are
:class:`jitlab.errors.ConfigError` naming the option: ``--max-steps must be >= 1, got 0``.

    from jitlab.fields import check_fields
    def __post_init__(self): check_fields(self)

Options that are not command-line options (a backbone's, ``--backbone-option KEY=VALUE``) pass ``prefix``
for their name in messages and ``typed=True``, so that every ``int`` / ``float`` / ``bool`` / ``str`` field is
type-checked from its annotation even without bounds (their values arrive as parsed JSON, not from argparse):
``check_fields(cfg, prefix="--backbone-option ", typed=True)`` -> ``--backbone-option temperature must be a
finite number, got nan``.
"""
from __future__ import annotations

import math
from dataclasses import fields

from jitlab.errors import ConfigError

__all__ = ["CANDIDATES_MAX", "REFERENCES_MAX", "REPEATS_MAX", "RETRIES_MAX", "ROUNDS_MAX", "SEED_MAX", "STEPS_MAX", "WORKERS_MAX",
           "check_fields", "check_number"]

# seeds are stored in SQLite INTEGER columns (signed 64-bit) and hashed into cache keys
SEED_MAX = 2 ** 63 - 1

# Upper bounds of counts that allocate per unit: each is far above what an experiment here uses (4 candidates,
# 2 repair rounds, 6 workers) and low enough that a typo (an extra zero, 10**9) fails at once, in one line, instead
# of a process that grows until the machine kills it.
WORKERS_MAX = {"max": 256, "max_why": "each runs its own episode, thread and records at once"}
CANDIDATES_MAX = {"max": 64, "max_why": "each is generated, validated in its own sandbox and held until one is "
                                        "picked"}
ROUNDS_MAX = {"max": 20, "max_why": "each round is a backbone call set and a sandboxed run"}
REFERENCES_MAX = {"max": 32, "max_why": "each reference's files go into one generation prompt"}
RETRIES_MAX = {"max": 20, "max_why": "each retry reruns an episode from its start"}
STEPS_MAX = {"max": 10_000, "max_why": "each step is a backbone call and a recorded row"}
REPEATS_MAX = {"max": 100, "max_why": "each repeat reruns every task of the run"}


def _option(name: str, meta, prefix: str | None) -> str:
    if prefix is not None:
        return prefix + name
    return meta.get("option") or "--" + name.replace("_", "-")


def _kinds(annotation: str) -> set[str]:
    """The simple types an annotation string names: {'int', 'None'} for ``int | None``."""
    return {part.strip() for part in annotation.replace("Optional[", "").rstrip("]").split("|")}


def check_number(option: str, value, kind: str = "int", *, optional: bool = False, min=None, max=None,
                 min_exclusive=None, why: str = "") -> None:
    """Raise ConfigError unless ``value`` is a number of ``kind`` ('int' or 'float') within the bounds
    (``why`` says why ``max`` is the bound)."""
    if value is None:
        if optional:
            return
        raise ConfigError(f"{option} must be set, got None")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind == "int" and not isinstance(value, int)):
        raise ConfigError(f"{option} must be {'an integer' if kind == 'int' else 'a number'}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{option} must be a finite number, got {value!r}")
    if min is not None and value < min:
        raise ConfigError(f"{option} must be >= {min}, got {value!r}")
    if min_exclusive is not None and value <= min_exclusive:
        raise ConfigError(f"{option} must be > {min_exclusive}, got {value!r}")
    if max is not None and value > max:
        raise ConfigError(f"{option} must be <= {max}{f' ({why})' if why else ''}, got {value!r}")


def check_fields(obj, prefix: str | None = None, typed: bool = False) -> None:
    """Check every field of dataclass ``obj`` that carries bounds, ``choices`` or ``nonempty`` in its metadata
    (with ``typed``, also the type of every plain int/float/bool/str field; ``prefix`` names the options)."""
    for f in fields(obj):
        meta, value = f.metadata, getattr(obj, f.name)
        option = _option(f.name, meta, prefix)
        annotation = str(f.type)
        optional = "None" in annotation or "Optional" in annotation
        if value is None and optional:
            continue
        if "choices" in meta and value not in meta["choices"]:
            *rest, last = map(str, meta["choices"])
            raise ConfigError(f"{option} must be {', '.join(rest) + ' or ' if rest else ''}{last}, got {value!r}")
        kinds = _kinds(annotation) - {"None"}
        if typed and kinds == {"bool"} and not isinstance(value, bool):
            raise ConfigError(f"{option} must be true or false, got {value!r}")
        if typed and kinds == {"str"} and not isinstance(value, str):
            raise ConfigError(f"{option} must be a string, got {value!r}")
        if meta.get("nonempty"):
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{option} must be a non-empty string, got {value!r}")
        if any(k in meta for k in ("min", "max", "min_exclusive")) or (typed and kinds in ({"int"}, {"float"})):
            kind = "int" if "int" in annotation and "float" not in annotation else "float"
            check_number(option, value, kind, optional=optional, min=meta.get("min"), max=meta.get("max"),
                         min_exclusive=meta.get("min_exclusive"), why=meta.get("max_why", ""))
