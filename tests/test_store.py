"""Run records: resume, SIGKILL safety, config drift, infra retries, DataFrame export."""
import json
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from jitlab.errors import ConfigDrift
from jitlab.runner import RunConfig, run
from jitlab.store import load


def _cfg(out, **kw):
    base = dict(suite="toy", harness="react", backbone="scripted:pick-hash", limit=4, out=str(out), quiet=True)
    return RunConfig(**{**base, **kw})


def test_summary_and_frames(tmp_path):
    out = run(_cfg(tmp_path / "r"))
    summary = json.loads((out / "summary.json").read_text())
    for key in ("suite", "harness", "backbone", "n_episodes", "success_rate", "mean_reward", "tokens_per_task",
                "cost_per_task", "tool_calls_per_task", "wall_s_per_task"):
        assert key in summary
    assert summary["n_episodes"] == 4 and summary["tokens_per_task"] > 0 and summary["cost_per_task"] > 0
    frames = load(out)
    assert len(frames["episodes"]) == 4
    assert len(frames["steps"]) == frames["episodes"]["steps"].sum()
    assert len(frames["calls"]) == frames["episodes"]["llm_calls"].sum()
    assert frames["calls"]["backbone"].str.startswith("scripted:").all()


def test_rerun_adds_no_episodes(tmp_path):
    run(_cfg(tmp_path / "r"))
    run(_cfg(tmp_path / "r", concurrency=3))       # concurrency is not part of the fingerprint
    assert len(load(tmp_path / "r")["episodes"]) == 4


def test_config_drift_is_refused_with_the_difference(tmp_path):
    run(_cfg(tmp_path / "r"))
    with pytest.raises(ConfigDrift, match=r"backbone: 'scripted:pick-hash' -> 'scripted:look'.*--new-run"):
        run(_cfg(tmp_path / "r", backbone="scripted:look"))
    run(_cfg(tmp_path / "r", backbone="scripted:look", new_run=True))
    assert load(tmp_path / "r")["config"]["backbone"].iloc[0] == "scripted:look"
    assert list(tmp_path.joinpath("r").glob("run.*.sqlite")), "old records are kept beside the new run"


def test_offset_selects_the_tasks_and_is_fingerprinted_only_when_set(tmp_path):
    from jitlab.envs.toy import ToySuite
    from jitlab.errors import ConfigError
    from jitlab.store import fingerprint
    ids = [t.id for t in ToySuite().tasks("dev")]
    out = run(_cfg(tmp_path / "r", offset=3, limit=2))
    assert sorted(load(out)["episodes"]["task_id"]) == ids[3:5]
    with pytest.raises(ConfigDrift, match="offset: 3 -> "):  # another slice is another run
        run(_cfg(tmp_path / "r", limit=2))
    with pytest.raises(ConfigError, match=f"from offset {len(ids)} .*lower --offset"):
        run(_cfg(tmp_path / "past", offset=len(ids)))
    # a directory made before `offset` existed: its stored config (and fingerprint) has no such key
    old = run(_cfg(tmp_path / "old", limit=2))
    db = sqlite3.connect(old / "run.sqlite")
    config = json.loads(db.execute("SELECT value FROM meta WHERE key='config'").fetchone()[0])
    config.pop("offset", None)
    with db:
        db.execute("UPDATE meta SET value=? WHERE key='config'", (json.dumps(config, sort_keys=True),))
        db.execute("UPDATE meta SET value=? WHERE key='fingerprint'", (fingerprint(config),))
    db.close()
    run(_cfg(tmp_path / "old", limit=2, offset=0))  # resumes: no ConfigDrift, nothing rerun
    assert sorted(load(old)["episodes"]["task_id"]) == ids[:2]


def test_infra_errors_are_retried_not_counted(tmp_path):
    out = run(_cfg(tmp_path / "r", backbone="scripted:fail", retries=1, limit=2))
    eps = load(out)["episodes"]
    assert set(eps["status"]) == {"infra_error"} and len(eps) == 4        # 2 tasks x 2 attempts
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_episodes"] == 0 and summary["n_tasks_unfinished"] == 2


def test_a_backbone_that_fails_to_load_is_an_infra_error_and_retried(tmp_path, monkeypatch):
    import jitlab.llm.base
    real, failures = jitlab.llm.base.get_backbone, []

    def flaky(name, **options):          # the first load fails the way a racing transformers import did
        if not failures:
            failures.append(name)
            raise ImportError("cannot import name 'AutoModelForCausalLM' from 'transformers'")
        return real(name, **options)
    monkeypatch.setattr(jitlab.llm.base, "get_backbone", flaky)
    eps = load(run(_cfg(tmp_path / "r", limit=1, cache=False)))["episodes"].sort_values("id")
    assert list(eps["status"]) == ["infra_error", "ok"]
    assert "failed to load: ImportError" in eps["error"].iloc[0]


def test_replay_cache_makes_reruns_exact_and_flags_hits(tmp_path):
    first = load(run(_cfg(tmp_path / "a", limit=2)))
    second = load(run(_cfg(tmp_path / "b", limit=2)))
    assert not first["calls"]["cached"].any() and second["calls"]["cached"].all()
    assert list(first["calls"]["text"]) == list(second["calls"]["text"])
    assert second["episodes"]["cost"].sum() == pytest.approx(first["episodes"]["cost"].sum())
    assert list(first["steps"]["args"]) == list(second["steps"]["args"])


def _final_counts(out):
    db = sqlite3.connect(out / "run.sqlite")
    rows = db.execute("SELECT task_id, COUNT(*) FROM episodes WHERE status IN ('ok','budget','harness_error') "
                      "GROUP BY task_id").fetchall()
    db.close()
    return dict(rows)


@pytest.mark.parametrize("kill_after", [0.4, 1.1])
def test_sigkill_mid_run_resumes_without_loss_or_duplicates(tmp_path, kill_after):
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "jitlab.cli", "run", "--suite", "toy", "--harness", "react", "--backbone",
           "scripted:pick-hash", "--backbone-option", "delay_s=0.03", "--limit", "10", "--out", str(out),
           "--no-cache"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(kill_after)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = _final_counts(out) if (out / "run.sqlite").exists() else {}
    assert len(partial) < 10, "the kill should land mid-run"
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    counts = _final_counts(out)
    assert len(counts) == 10 and set(counts.values()) == {1}
    for task_id in partial:      # episodes finished before the kill were kept, not rerun
        assert counts[task_id] == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_episodes"] == 10


def test_one_writer_per_run_directory_in_process_too(tmp_path):
    from jitlab.errors import RunLocked
    from jitlab.store import RunStore
    store = RunStore(tmp_path / "r", {"a": 1})
    with pytest.raises(RunLocked, match=r"already open for writing in this process \(PID \d+"):
        RunStore(tmp_path / "r", {"a": 1})
    store.close()
    store = RunStore(tmp_path / "r", {"a": 1})                 # closing hands the directory on
    with store._tx():                                           # a finished episode: another config is refused
        store.db.execute("INSERT INTO episodes (harness_sha, task_id, seed, attempt, status) VALUES ('s','t',0,0,'ok')")
    store.close()
    with pytest.raises(ConfigDrift):                            # a refused open releases the lock too
        RunStore(tmp_path / "r", {"a": 2})
    RunStore(tmp_path / "r", {"a": 1}).close()


def test_a_jit_run_refused_at_start_leaves_the_directory_unlocked(tmp_path):
    from jitlab.errors import ConfigError
    from jitlab.jit.inference import JITConfig, run_jit
    cfg = dict(suite="toy", backbone="scripted:pick-hash", limit=1, retrieval="bm25", cache=False, smoke_steps=2,
               quiet=True, out=str(tmp_path / "j"), allow_unisolated=True)
    with pytest.raises(ConfigError):
        run_jit(JITConfig(**{**cfg, "backbone": "no-such-backend:x"}))
    with pytest.raises(ConfigError):                            # the bank's folder is a file: refused after the lock
        (tmp_path / "j").mkdir(exist_ok=True)
        (tmp_path / "j" / "bank.sqlite").mkdir()
        run_jit(JITConfig(**cfg))
    (tmp_path / "j" / "bank.sqlite").rmdir()
    assert json.loads((run_jit(JITConfig(**cfg)) / "summary.json").read_text())["n_episodes"] == 1


def test_damage_found_mid_run_is_a_storage_error_naming_the_file(tmp_path):
    from jitlab.errors import StorageError
    out = run(_cfg(tmp_path / "r", limit=2))
    from jitlab.store import RunStore
    store = RunStore(out, load(out)["config"].iloc[0].to_dict())
    db = out / "run.sqlite"
    raw = bytearray(db.read_bytes())
    raw[4096:] = b"\xa5" * (len(raw) - 4096)        # every page but the header page, while the store is open
    db.write_bytes(bytes(raw))
    try:
        with pytest.raises(StorageError, match=rf"{db} is corrupt .*--new-run"):
            store.status_of("x", "toy-dev-0", 0)
    finally:
        store.close()


def test_calls_record_queue_compute_and_prefix_reuse_and_old_files_gain_the_columns(tmp_path):
    from jitlab.store import _SCHEMA, RunStore
    out = run(_cfg(tmp_path / "r", limit=1))
    calls = load(out)["calls"]
    assert (calls["queue_s"] == 0).all() and (calls["compute_s"] >= 0).all() and (calls["reused_tokens"] == 0).all()
    assert (calls["prefix_hit"] == 0).all()
    # a run file written before these columns existed (schema 1): readable as is, migrated when opened to write
    old = tmp_path / "old"
    old.mkdir()
    db = sqlite3.connect(old / "run.sqlite")
    db.executescript(_SCHEMA.replace(", queue_s REAL, compute_s REAL, reused_tokens INTEGER", ""))
    db.execute("INSERT INTO calls (episode_id, prompt_tokens, completion_tokens, cached) VALUES (1, 10, 2, 0)")
    db.commit()
    db.close()
    assert load(old)["calls"]["prefix_hit"].isna().all()
    store = RunStore(old, {"suite": "toy"})
    store.log_call(1, {"step": 1, "phase": "execute", "kind": "chat", "key": "k", "backbone": "b", "prompt_tokens": 8,
                       "completion_tokens": 1, "cost": 0.0, "latency_s": 1.0, "cached": False, "messages": [],
                       "text": "", "queue_s": 0.25, "compute_s": 0.75, "reused_tokens": 6})
    store.close()
    calls = load(old)["calls"]
    assert calls["prefix_hit"].isna().tolist() == [True, False] and calls["prefix_hit"].iloc[1] == 0.75
    assert calls["queue_s"].iloc[1] == 0.25 and calls["compute_s"].iloc[1] == 0.75


def test_episode_statuses_are_declared_once():
    """Every status the episode code writes or compares is spelled as a jitlab.status.Status member (re-exported by
    store), never as a string; FINAL and RETRY partition the ones a finished or retried episode has."""
    import ast
    from pathlib import Path

    import jitlab
    from jitlab.store import FINAL, RETRY, Status
    assert set(FINAL) | set(RETRY) < set(Status) and not set(FINAL) & set(RETRY)
    root = Path(jitlab.__file__).parent
    found, members = set(), set()
    for name in ("runtime.py", "runner.py", "store.py", "jit/inference.py", "jit/loop.py", "jit/repair.py",
                 "jit/worker.py", "engineer/packets.py", "train/data.py", "viz/runs.py"):
        for node in ast.walk(ast.parse((root / name).read_text())):
            if isinstance(node, ast.Compare) and "status" in ast.unparse(node.left):
                found |= {f"{name}: {c.value}" for c in ast.walk(node) if isinstance(c, ast.Constant)
                          and c.value in set(Status)}
            if isinstance(node, ast.keyword) and node.arg == "status" and isinstance(node.value, ast.Constant):
                found.add(f"{name}: {node.value.value}")
            if isinstance(node, ast.Assign) and any("status" in ast.unparse(t) for t in node.targets):
                found |= {f"{name}: {c.value}" for c in ast.walk(node.value) if isinstance(c, ast.Constant)
                          and c.value in set(Status)}
            if isinstance(node, ast.Attribute) and getattr(node.value, "id", "") == "Status":
                members.add(node.attr)
    assert not found, f"statuses spelled as strings (use jitlab.status.Status): {sorted(found)}"
    assert members and members <= set(Status.__members__), sorted(members - set(Status.__members__))
