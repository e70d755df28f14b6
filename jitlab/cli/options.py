"""Command-line options generated from a config dataclass, so each default and help string is written once
(the way TRL's ``HfArgumentParser`` does it, in 80 lines over ``dataclasses.fields``).

    add_config_arguments(parser, RunConfig, required=("suite",))     # --suite, --max-steps, --no-cache, ...
    cfg = config_from_args(RunConfig, args)                           # the dataclass validates (jitlab.fields)

A field ``max_wall_s`` becomes ``--max-wall-s``; a ``bool`` field that defaults to False a flag, one that
defaults to True a ``--no-<name>`` flag; ``int`` / ``float`` / ``str`` fields take a value (``| None``
allowed); ``metadata["choices"]`` limits the values; ``metadata["metavar"]`` names the value; a count's
upper bound (``max_why``) shows as "at most N". Options the user did not give are left out of the namespace
(``argparse.SUPPRESS``), so the dataclass default applies.
``backbone_options: dict`` is the repeatable ``--backbone-option KEY=VALUE`` plus ``--api-base``.
Validation stays in the dataclass's ``__post_init__`` (ConfigError, printed by ``jitlab`` as one line).
"""
from __future__ import annotations

import argparse
import json
import sys
import typing
from dataclasses import MISSING, fields

from jitlab.errors import ConfigError
from jitlab.run_options import option_names
from jitlab.store import FINAL, load

__all__ = ["add_config_arguments", "backbone_options", "config_from_args", "key_values", "unfinished"]

_TYPES = {"int": int, "float": float, "str": str}


def _kind(annotation) -> str:
    """'bool' | 'int' | 'float' | 'str' | 'dict' from a field's annotation (``X | None`` allowed)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    return getattr(args[0], "__name__", str(args[0]))


def _default(f):
    return f.default_factory() if f.default_factory is not MISSING else f.default


def _listed(cls) -> list:
    """``cls``'s fields in the order ``--help`` lists them: its own first, then the shared episode options and run
    controls (jitlab.run_options) in their order."""
    shared = option_names()
    own = [f for f in fields(cls) if f.name not in shared]
    by_name = {f.name: f for f in fields(cls)}
    return own + [by_name[n] for n in shared if n in by_name]


def add_config_arguments(parser: argparse.ArgumentParser, cls, *, required=(), exclude=(), positional=()) -> None:
    """Add one option per field of dataclass ``cls`` (except ``exclude``); ``required`` and ``positional`` name
    fields that must be given on the command line."""
    hints = typing.get_type_hints(cls)
    for f in _listed(cls):
        if f.name in exclude:
            continue
        kind, meta, default = _kind(hints[f.name]), f.metadata, _default(f)
        text = meta.get("help", "")
        if kind == "dict":  # backbone_options: KEY=VALUE pairs plus the common --api-base
            parser.add_argument("--backbone-option", action="append", metavar="KEY=VALUE", default=argparse.SUPPRESS,
                                help=f"{text}; KEY=VALUE, value as JSON when it parses, repeatable")
            parser.add_argument("--api-base", default=argparse.SUPPRESS,
                                help="OpenAI-compatible server URL for litellm backbones (backbone option api_base)")
            continue
        if f.name in positional:
            parser.add_argument(f.name, type=_TYPES.get(kind, str), help=text)
            continue
        option = "--" + f.name.replace("_", "-")
        if kind == "bool":
            if default:
                parser.add_argument("--no-" + f.name.replace("_", "-"), dest=f.name, action="store_false",
                                    default=argparse.SUPPRESS, help=f"do not: {text}")
            else:
                parser.add_argument(option, dest=f.name, action="store_true", default=argparse.SUPPRESS, help=text)
            continue
        shown = "" if default is None or f.name in required else f" (default: {default})"
        if "max_why" in meta:  # a count's upper bound (jitlab.fields): the error says why
            shown += f" (at most {meta['max']})"
        parser.add_argument(option, dest=f.name, type=_TYPES.get(kind, str), default=argparse.SUPPRESS,
                            required=f.name in required, choices=meta.get("choices"), metavar=meta.get("metavar"),
                            help=text + shown)


def key_values(items, option: str) -> list[tuple[str, str]]:
    """``KEY=VALUE`` strings of a repeatable option as (key, value text) pairs; anything else is a ConfigError."""
    pairs = []
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option} expects KEY=VALUE, got {item!r}")
        pairs.append((key.strip(), value))
    return pairs


def backbone_options(args) -> dict:
    """``--backbone-option KEY=VALUE`` (repeatable, JSON values) plus ``--api-base`` as a dict."""
    out = {}
    for key, value in key_values(getattr(args, "backbone_option", None), "--backbone-option"):
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    if getattr(args, "api_base", None):
        out["api_base"] = args.api_base
    return out


def config_from_args(cls, args, **overrides):
    """Build ``cls`` from the options given (the others keep the dataclass defaults); it validates itself."""
    hints = typing.get_type_hints(cls)
    values = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
    for f in fields(cls):
        if _kind(hints[f.name]) == "dict":
            values[f.name] = backbone_options(args)
    return cls(**{**values, **overrides})


def unfinished(summary: dict, out) -> int:
    """1 (and why, on stderr) when some task has no finished episode after the retries, e.g. every attempt
    was an infra_error; else 0."""
    if not summary["n_tasks_unfinished"]:
        return 0
    eps = load(out)["episodes"]
    last = eps[~eps["status"].isin(FINAL)].sort_values("id").groupby("task_id").tail(1)
    counts = ", ".join(f"{n} {k}" for k, n in last["status"].value_counts().items())
    error = str(last["error"].iloc[-1] or "")[:300] if len(last) else ""
    print(f"jitlab: error: {summary['n_tasks_unfinished']} task(s) have no finished episode ({counts}); last error: "
          f"{error or '(none)'}. Fix the cause and rerun the same command: finished episodes are kept, these are "
          "retried.", file=sys.stderr)
    return 1
