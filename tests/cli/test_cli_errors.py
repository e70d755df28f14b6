"""Issue 17, records and files: one writer per run directory (two real processes), and user mistakes on
files (an --out that is a file, a damaged or empty run.sqlite, a full disk, a bad grid YAML) end in one
line naming the file and what to do, never a traceback, and read-only commands change nothing."""
import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import REPO, RUN, one_line_error

from jitlab.cli import main
from jitlab.store import load


def _env():
    return {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _finals(out) -> dict:
    db = sqlite3.connect(f"file:{out / 'run.sqlite'}?mode=ro", uri=True)
    rows = db.execute("SELECT task_id, COUNT(*) FROM episodes WHERE status IN ('ok','budget','harness_error') "
                      "GROUP BY task_id").fetchall()
    db.close()
    return dict(rows)


def _wait_for_lock(out: Path, proc, timeout=60.0) -> None:
    deadline = time.time() + timeout
    lock = out / "run.lock"
    while time.time() < deadline and proc.poll() is None:
        if lock.exists() and lock.read_text().strip() == str(proc.pid):
            return
        time.sleep(0.02)
    raise AssertionError(f"the first process never took {lock} (rc={proc.poll()})")


# -- case 3: one writer per run directory --------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["run", "jit"])
def test_a_second_process_on_the_same_out_is_refused_naming_the_holder(tmp_path, kind):
    out = tmp_path / kind
    if kind == "run":
        cmd = [*RUN, "--backbone-option", "delay_s=0.1", "--limit", "10", "--out", str(out)]   # ~8 s: time to collide
        n = 10
    else:
        from jitlab.sandbox import probe
        cmd = ["jit", "--suite", "toy", "--mode", "streaming", "--backbone", "scripted:pick-hash", "--backbone-option",
               "delay_s=0.05", "--limit", "4", "--retrieval", "bm25", "--smoke-steps", "2", "--no-cache", "--quiet",
               "--out", str(out)] + ([] if probe()[0] else ["--allow-unisolated"])
        n = 4
    argv = [sys.executable, "-m", "jitlab.cli", *cmd]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env())
    _wait_for_lock(out, first)
    second = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=120, check=False)
    assert first.wait(timeout=300) == 0, first.stderr.read()
    first.stderr.close()
    err = second.stderr.strip().splitlines()
    assert second.returncode == 2 and len(err) == 1, second.stderr
    assert f"PID {first.pid}" in err[0] and str(out) in err[0] and "Traceback" not in second.stderr
    counts = _finals(out)
    assert len(counts) == n and set(counts.values()) == {1}                  # nothing double-counted
    assert json.loads((out / "summary.json").read_text())["n_episodes"] == n
    # the lock went with its holder: the same command now resumes (and adds nothing)
    assert subprocess.run(argv, capture_output=True, env=_env(), timeout=300, check=False).returncode == 0
    assert _finals(out) == counts


_HOLD_BANK = """
import sys, time
from jitlab.jit.bank import Bank, BankConfig
bank = Bank(sys.argv[1], config=BankConfig(retrieval="bm25"), exclusive=True)
print("held", flush=True)
time.sleep(60)
"""


def test_a_bank_being_written_has_one_writer(tmp_path):
    from jitlab.errors import RunLocked
    from jitlab.jit.bank import Bank, BankConfig
    path = tmp_path / "bank.sqlite"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_BANK, str(path)], stdout=subprocess.PIPE, text=True,
                              env=_env())
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunLocked, match=rf"harness bank {path} is being written by another process \(PID "
                                            rf"{holder.pid}"):
            Bank(path, config=BankConfig(retrieval="bm25"), exclusive=True)
        assert len(Bank(path, readonly=True)) == 0                          # readers are never locked out
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    Bank(path, config=BankConfig(retrieval="bm25"), exclusive=True).close()  # free once the holder is gone


# -- case 7: one line for user mistakes on files ------------------------------------------------------------
@pytest.mark.parametrize("out, needle", [("/etc/hostname", "is a file"),
                                         ("/proc/x", "cannot be created"),
                                         ("/etc/hostname/sub", "is a file")])
def test_out_that_is_a_file_or_cannot_be_created(capsys, out, needle):
    one_line_error(capsys, [*RUN, "--limit", "1", "--out", out], out, needle, "--out")


@pytest.fixture
def finished_run(tmp_path):
    out = tmp_path / "r"
    assert main([*RUN, "--limit", "2", "--out", str(out)]) == 0
    return out


def test_truncated_run_sqlite_is_one_line_under_show_and_rerun(finished_run, capsys):
    db = finished_run / "run.sqlite"
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
    db.write_bytes(db.read_bytes()[:1500])                 # the header survives, the pages do not
    summary = (finished_run / "summary.json").read_bytes()
    capsys.readouterr()
    one_line_error(capsys, ["show", str(finished_run)], str(db), "--new-run")
    one_line_error(capsys, [*RUN, "--limit", "2", "--out", str(finished_run)], str(db), "--new-run")
    assert (finished_run / "summary.json").read_bytes() == summary       # nothing overwritten
    assert main([*RUN, "--limit", "2", "--out", str(finished_run), "--new-run"]) == 0
    assert list(finished_run.glob("run.*.sqlite")), "the damaged file is kept beside the new run"


def test_zero_byte_run_sqlite_is_refused_not_started_over(finished_run, capsys):
    (finished_run / "run.sqlite").write_bytes(b"")
    for side in ("-wal", "-shm"):
        Path(f"{finished_run / 'run.sqlite'}{side}").unlink(missing_ok=True)
    summary = (finished_run / "summary.json").read_bytes()
    capsys.readouterr()
    one_line_error(capsys, [*RUN, "--limit", "2", "--out", str(finished_run)], "0 bytes", "--new-run")
    one_line_error(capsys, ["show", str(finished_run)], "0 bytes")
    assert (finished_run / "summary.json").read_bytes() == summary
    assert (finished_run / "run.sqlite").stat().st_size == 0


def test_figures_on_a_corrupt_run_or_with_out_a_file(finished_run, tmp_path, capsys):
    pytest.importorskip("holoviews")
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    capsys.readouterr()
    one_line_error(capsys, ["figures", "--runs", str(finished_run), "--out", str(a_file)], str(a_file),
                    "not a directory")
    db = finished_run / "run.sqlite"
    db.write_bytes(b"garbage, not SQLite" * 200)
    one_line_error(capsys, ["figures", "--runs", str(finished_run), "--out", str(tmp_path / "figs")], str(db))


def test_malformed_batch_yaml_is_one_line(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text("limit: [1, 2\nseed: {oops\n")
    one_line_error(capsys, ["batch", str(REPO / "notebooks" / "00_quickstart.ipynb"), "--grid", str(grid), "--out",
                             str(tmp_path / "b")], str(grid), "not valid YAML", "line ")


# -- a full disk: a real tiny tmpfs (needs root; skipped where mounting is not allowed) --------------------------
@contextlib.contextmanager
def _tiny_tmpfs(where: Path, size: str):
    where.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here ({exc})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_disk_full_run_is_one_line_and_resumes(tmp_path, capsys):
    with _tiny_tmpfs(tmp_path / "small", "400k") as small:
        out = small / "r"
        argv = [*RUN, "--limit", "10", "--out", str(out)]
        err = one_line_error(capsys, argv, "no space left", "free space")
        assert str(out) in err
        roomy = shutil.copytree(out, tmp_path / "roomy")          # "free space": the records on a roomy disk
    done = _finals(roomy)
    assert 0 < len(done) < 10, "the disk filled mid-run"
    assert main([*RUN, "--limit", "10", "--out", str(roomy)]) == 0  # the same command resumes
    counts = _finals(roomy)
    assert len(counts) == 10 and set(counts.values()) == {1}       # the earlier episodes were kept, not rerun


def test_cache_on_a_full_disk_is_turned_off_and_the_run_finishes(tmp_path, monkeypatch, capsys):
    from jitlab.llm.cache import CacheQuarantined
    with _tiny_tmpfs(tmp_path / "home", "64k") as home:
        monkeypatch.setenv("JITLAB_HOME", str(home))
        (home / "fill").write_bytes(b"\0" * (40 * 1024))       # leave the cache a few pages only
        with pytest.warns(CacheQuarantined, match="continuing without the cache"):
            rc = main(["run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-hash", "--limit",
                       "4", "--out", str(tmp_path / "r")])
        assert rc == 0
        eps = load(tmp_path / "r")["episodes"]
        assert set(eps["status"]) == {"ok"} and len(eps) == 4


# -- case 8: read-only commands write nothing -------------------------------------------------------------
def _tree(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_show_leaves_summary_json_as_it_is(finished_run, capsys):
    (finished_run / "summary.json").write_text('{"note": "written by someone else"}')
    before = _tree(finished_run)
    assert main(["show", str(finished_run)]) == 0
    assert "toy-dev-0" in capsys.readouterr().out
    assert _tree(finished_run) == before


@pytest.mark.parametrize("content", [b"", b"\x00\xffnot a bank" * 100])
def test_bank_show_on_an_empty_or_corrupt_bank_changes_nothing(tmp_path, capsys, content):
    path = tmp_path / "bank.sqlite"
    path.write_bytes(content)
    before = _tree(tmp_path)
    for cmd in ("show", "frontier"):
        err = one_line_error(capsys, ["bank", cmd, "--bank", str(path)], str(path))
        assert "fresh harness bank" not in err
    assert _tree(tmp_path) == before


def test_the_cli_backstop_turns_an_oserror_into_one_line_naming_the_file(tmp_path, capsys, monkeypatch):
    grid = tmp_path / "grid.yaml"
    grid.write_text("runs:\n  - {}\n")
    notebook = str(REPO / "notebooks" / "00_quickstart.ipynb")
    one_line_error(capsys, ["batch", notebook, "--grid", str(grid), "--out", "/etc/hostname"], "/etc/hostname")
    monkeypatch.setenv("JITLAB_DEBUG", "1")                 # and the traceback is there when asked for
    with pytest.raises(OSError):
        main(["batch", notebook, "--grid", str(grid), "--out", "/etc/hostname"])


def test_bank_export_into_a_file_is_one_line(tmp_path, capsys):
    from jitlab.jit.bank import Bank, BankConfig
    Bank(tmp_path / "bank.sqlite", config=BankConfig(retrieval="bm25")).close()
    one_line_error(capsys, ["bank", "export", "/etc/hostname", "--bank", str(tmp_path / "bank.sqlite")],
                    "/etc/hostname", "is a file")
