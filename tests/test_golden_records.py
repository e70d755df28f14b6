"""Golden records: the same commands give the same records. A fixed run and a streaming JIT run on the toy suite with
the deterministic ``scripted:pick-hash`` TEST DOUBLE are compared, row by row, with tests/data/golden_toy.json:
episode, step and call rows without ids, shas, timings and cache flags (a harness's sha legitimately changes with
its resolved source; timings and cache hits vary by machine). Prompts and replies are compared by their sha256,
which keeps the file small and still catches a changed prompt.

After an intended change of behaviour, regenerate the file and review its diff:
    JITLAB_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_records.py
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
from pathlib import Path

from jitlab.cli import main

GOLDEN = Path(__file__).parent / "data" / "golden_toy.json"
COMMANDS = {
    "run": ["run", "--suite", "toy", "--harness", "resum", "--backbone", "scripted:pick-hash", "--limit", "2", "--quiet"],
    "jit": ["jit", "--suite", "toy", "--mode", "streaming", "--generator", "compose", "--backbone", "scripted:pick-hash",
            "--limit", "2", "--retrieval", "bm25", "--quiet"],
}
SKIP = {"id", "episode_id", "harness_sha", "wall_s", "started", "finished", "t", "latency_s", "queue_s", "compute_s",
        "key", "cached", "cached_calls", "isolation"}
_SHA = re.compile(r"[0-9a-f]{10,64}")
_TIMING = re.compile(r'"(\w*(?:_s|wall|seconds|time|latency)\w*)": [0-9.e-]+')


def _digest(text) -> str | None:
    return None if text is None else hashlib.sha256(str(text).encode()).hexdigest()[:16]


def _clean(value):
    return _TIMING.sub(r'"\1": 0', _SHA.sub("<sha>", value)) if isinstance(value, str) else value


def rows(run_dir: Path) -> dict:
    db = sqlite3.connect(run_dir / "run.sqlite")
    out = {}
    for table in ("episodes", "steps", "calls"):
        cur = db.execute(f"SELECT * FROM {table} ORDER BY rowid")
        names = [d[0] for d in cur.description]
        found = []
        for row in cur:
            rec = {k: _clean(v) for k, v in zip(names, row) if k not in SKIP}
            for k in ("messages", "text"):
                if k in rec:
                    rec[k] = _digest(rec[k])
            found.append(rec)
        out[table] = found
    db.close()
    return out


def test_toy_records_match_the_golden_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    got = {}
    for name, argv in COMMANDS.items():
        assert main([*argv, "--out", str(tmp_path / name)]) == 0
        got[name] = rows(tmp_path / name)
    if os.environ.get("JITLAB_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    for name in COMMANDS:
        for table in ("episodes", "steps", "calls"):
            assert len(got[name][table]) == len(want[name][table]), (name, table)
            for i, (g, w) in enumerate(zip(got[name][table], want[name][table])):
                assert g == w, (name, table, i, {k: (g.get(k), w.get(k)) for k in set(g) | set(w) if g.get(k) != w.get(k)})
