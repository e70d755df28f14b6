"""DBBench task data: AgentBench's entries per split and jitlab's gold fixes / exclusions.

``load_entries(split)`` reads ``jitlab/envs/data/dbbench/<split>.jsonl`` (each entry gets an ``_id``
such as ``dev-000``, from its line number) for each split of ``SPLITS``; ``fixes.jsonl`` maps an id
to a replacement gold statement or an exclusion, each with its reason (see that folder's README).
"""
from __future__ import annotations

import json
from functools import cache
from pathlib import Path

__all__ = ["DATA_DIR", "MODIFY", "SPLITS", "entry_of", "excluded", "family_of", "fixes", "load_entries"]

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "dbbench"
MODIFY = ("INSERT", "UPDATE", "DELETE")   # families scored by the final table, not the answer
# dev: AgentBench's dev set; test: 200 rows of its standard set; train: the standard set's other 100 rows
SPLITS = ("dev", "test", "train")


@cache
def load_entries(split: str) -> tuple[dict, ...]:
    """The raw AgentBench entries of a split, each with ``_id`` (``dev-000``...) added."""
    path = DATA_DIR / f"{split}.jsonl"
    entries = []
    for i, line in enumerate(path.read_text().splitlines()):
        if line.strip():
            entry = json.loads(line)
            entry["_id"] = f"{split}-{i:03d}"
            entries.append(entry)
    return tuple(entries)


def entry_of(entry_id: str) -> dict:
    """The entry with this ``_id`` (``dev-000``)."""
    split, _, _ = entry_id.partition("-")
    return next(e for e in load_entries(split) if e["_id"] == entry_id)


@cache
def fixes() -> dict[str, dict]:
    """id -> {"sql": replacement gold statement} or {"exclude": True}, each with a "reason"."""
    path = DATA_DIR / "fixes.jsonl"
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            out[record["id"]] = record
    return out


def excluded() -> dict[str, str]:
    """Task ids left out of the suite, with the reason recorded in fixes.jsonl."""
    return {k: v["reason"] for k, v in fixes().items() if v.get("exclude")}


def family_of(entry: dict) -> str:
    """The task's family: its AgentBench ``type``."""
    return entry["type"][0]
