"""Validation of config dataclasses from their field metadata: one rule per field, shared by the CLI,
notebooks and the Python API.

A field opts in with metadata next to its ``help``::

    limit: int | None = field(default=None, metadata={"help": "first N tasks", "min": 1})
    max_wall_s: float = field(default=900.0, metadata={"help": "wall seconds", "min_exclusive": 0})
    out: str | None = field(default=None, metadata={"help": "run directory", "nonempty": True})

Keys: ``min`` / ``max`` (inclusive), ``min_exclusive``, ``nonempty`` (a string that is not blank) and
``option`` (the name in messages; default ``--<field-name>`` with dashes). Numbers are type-checked
from the annotation: an ``int`` field takes an int (not a bool, not 2.0), a ``float`` field a finite
int or float; ``None`` is accepted only where the annotation allows it. Errors are
:class:`jitlab.errors.ConfigError` naming the option: ``--max-steps must be >= 1, got 0``.

    from jitlab.fields import check_fields
    def __post_init__(self): check_fields(self)
"""
from __future__ import annotations

import math
from dataclasses import fields

from jitlab.errors import ConfigError

__all__ = ["SEED_MAX", "check_fields", "check_number"]

# seeds are stored in SQLite INTEGER columns (signed 64-bit) and hashed into cache keys
SEED_MAX = 2 ** 63 - 1


def _option(name: str, meta) -> str:
    return meta.get("option") or "--" + name.replace("_", "-")


def check_number(option: str, value, kind: str = "int", *, optional: bool = False, min=None, max=None,
                 min_exclusive=None) -> None:
    """Raise ConfigError unless ``value`` is a number of ``kind`` ('int' or 'float') within the bounds."""
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
        raise ConfigError(f"{option} must be <= {max}, got {value!r}")


def check_fields(obj) -> None:
    """Check every field of dataclass ``obj`` that carries bounds or ``nonempty`` in its metadata."""
    for f in fields(obj):
        meta, value = f.metadata, getattr(obj, f.name)
        option = _option(f.name, meta)
        annotation = str(f.type)
        optional = "None" in annotation or "Optional" in annotation
        if meta.get("nonempty"):
            if value is None and optional:
                continue
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{option} must be a non-empty string, got {value!r}")
        if any(k in meta for k in ("min", "max", "min_exclusive")):
            kind = "int" if "int" in annotation and "float" not in annotation else "float"
            check_number(option, value, kind, optional=optional, min=meta.get("min"), max=meta.get("max"),
                         min_exclusive=meta.get("min_exclusive"))
