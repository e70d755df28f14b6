"""Small system helpers every layer shares, each written once: a free local port, a file (with its SQLite side
files) moved aside, an object named by a dotted registry path, the content hash of a JSON value, and a file's bytes
fed into a hash.

Use::

    port = free_port()                                   # a port no server here listens on now
    target = set_aside(path)                             # dir/name.<timestamp>.ext beside it, -wal/-shm too
    target = set_aside(path, "{name}.corrupt-{stamp}")   # the name the caller's readers look for
    factory = load_entry("jitlab.envs.toy:ToySuite")     # "package.module:attribute"
    digest = json_digest({"b": 1, "a": [2]})             # sha256 hex of the sorted-key JSON (others by str)
    hexdigest = hash_file(path).hexdigest()              # sha256 of a file, read in 1 MiB blocks

Caveats: a free port is free when asked; a server that binds it later may lose it to another process (the caller
retries or reports it). ``set_aside`` never overwrites: a name already taken gets ``-1``, ``-2``, ... before the
suffix. It imports no other jitlab module, so the families below the core can use it.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import socket
import time
from pathlib import Path

__all__ = ["SQLITE_SIDE_FILES", "free_port", "hash_file", "json_digest", "load_entry", "set_aside"]

SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def set_aside(path: str | Path, pattern: str = "{stem}.{stamp}{suffix}") -> Path | None:
    """Move ``path`` and its SQLite side files (``-wal``, ``-shm``, ``-journal``) to a new name beside it, so a fresh
    file can take its place and the old one is kept. ``pattern`` makes the new name from ``name``, ``stem``,
    ``suffix``, ``stamp`` (``%Y%m%d-%H%M%S``) and ``k`` (1, 2, ...: the first free one). Returns the new path; None
    when nothing was at ``path``."""
    path = Path(path)
    if not path.exists():
        return None
    stamp, k = time.strftime("%Y%m%d-%H%M%S"), 1
    names = {"name": path.name, "stem": path.stem, "suffix": path.suffix}
    target = path.with_name(pattern.format(**names, stamp=stamp, k=k))
    while target.exists():  # another set aside took that name: never overwrite it
        k += 1
        target = path.with_name(pattern.format(**names, stamp=stamp if "{k}" in pattern else f"{stamp}-{k - 1}", k=k))
    os.replace(path, target)
    for side in SQLITE_SIDE_FILES:
        if Path(f"{path}{side}").exists():
            os.replace(f"{path}{side}", f"{target}{side}")
    return target


def load_entry(target: str):
    """The object a registry entry ``package.module:attribute`` names (ImportError, AttributeError when it is not
    there)."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def json_digest(value) -> str:
    """sha256 (hex) of ``value`` as sorted-key JSON, values JSON cannot hold written by ``str``: the one content hash
    of configs, prompts and records (a caller keeps the prefix it needs)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def hash_file(path: str | Path, digest=None):
    """``digest`` (a new sha256 when None) with ``path``'s bytes fed in, 1 MiB at a time (a model's weights never sit
    in memory whole): the one file hasher of records, game files and adapter weights."""
    digest = hashlib.sha256() if digest is None else digest
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest
