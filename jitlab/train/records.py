"""Record files of training runs: atomic JSON/JSONL writes, file hashes, package versions for manifest.json.

    write_jsonl(out / "sft.jsonl", rows)                  # tmp file + rename: a killed writer leaves the old file
    manifest = {"hashes": {"sft.jsonl": file_sha256(out / "sft.jsonl")}, "versions": versions()}
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from jitlab.errors import StorageError
from jitlab.plumbing import hash_file

__all__ = ["REPLACED", "file_sha256", "git_sha", "is_replaced", "read_jsonl", "versions", "write_json",
           "write_jsonl"]

# the name a folder holding other inputs is kept under (plumbing.set_aside; jitlab.train.pipeline)
REPLACED = "{name}.replaced-{k}"

_PACKAGES = ("torch", "transformers", "trl", "peft", "datasets", "accelerate", "tensorboard")


def write_json(path: str | Path, data) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def write_jsonl(path: str | Path, rows) -> int:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    n = 0
    with open(tmp, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row, sort_keys=True, ensure_ascii=False, default=str) + "\n")
            n += 1
    os.replace(tmp, path)
    return n


def read_jsonl(path: str | Path) -> list[dict]:
    rows = []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise StorageError(f"{path}:{i} is not a JSON line ({exc}); rebuild the data with `jitlab train data`") from exc
    return rows


def is_replaced(name: str) -> bool:
    """Whether a folder name is one a rerun set aside under :data:`REPLACED` (a retrained stage's old evaluation)."""
    return REPLACED.format(name="", k="") in name


def file_sha256(path: str | Path) -> str | None:
    path = Path(path)
    if not path.is_file():
        return None
    return hash_file(path).hexdigest()


def versions() -> dict:
    """Installed versions of the training stack (None for a missing package) and of jitlab."""
    from importlib.metadata import PackageNotFoundError, version
    out = {}
    for name in (*_PACKAGES, "jitlab"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    out["jitlab_git"] = git_sha()
    return out


def git_sha() -> str | None:
    """The commit of the jitlab checkout this code runs from (None outside a git checkout)."""
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], check=False, cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() or None if res.returncode == 0 else None
