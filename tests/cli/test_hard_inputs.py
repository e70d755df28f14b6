"""Issue 27 (hard inputs, round three), items 6-10: options are checked before anything is written, backbone
options and ``choices`` are checked from field metadata, read-only commands work on read-only media and create
nothing, error lines name the right file and cause, and the inputs that ended in a traceback end in one line.
Each test's docstring holds the command it reproduces."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jitlab.cli import main

REPO = Path(__file__).resolve().parents[2]
RUN = ["run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-hash", "--no-cache"]


def _one_line_error(capsys, argv, *needles):
    """Run the CLI in-process: exit code 2 and exactly one line on stderr, no traceback, naming ``needles``."""
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


@pytest.fixture
def finished_run(tmp_path, capsys):
    out = tmp_path / "r"
    assert main([*RUN, "--limit", "2", "--quiet", "--out", str(out)]) == 0
    capsys.readouterr()
    return out


# -- item 8: read-only commands on read-only media, creating nothing ------------------------------------------
def test_a_finished_run_has_no_journal_and_show_or_export_create_none(finished_run, tmp_path, capsys):
    """jitlab run ... --out r && jitlab show r && jitlab export r --out x: before, r/run.sqlite-wal and -shm were
    left by the run's own summary and by every read."""
    names = sorted(p.name for p in finished_run.iterdir())
    assert names == ["run.lock", "run.sqlite", "summary.json"]
    assert main(["show", str(finished_run)]) == 0
    assert main(["export", str(finished_run), "--out", str(tmp_path / "x")]) == 0
    assert sorted(p.name for p in finished_run.iterdir()) == names


def test_show_and_export_work_on_a_read_only_mount(finished_run, tmp_path):
    """unshare -m sh -c 'mount --bind -o ro r ro && jitlab show ro && jitlab export ro --out x': before, "run.sqlite
    is corrupt ... rerun with --new-run". A real read-only bind mount (root: chmod does not stop root)."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("no mount namespace here (unshare -m)")
    ro, export = tmp_path / "ro", tmp_path / "x"
    ro.mkdir()
    jitlab = f"{sys.executable} -m jitlab.cli"
    script = (f"mount --bind -o ro {finished_run} {ro} && touch {ro}/probe 2>/dev/null && echo WRITABLE; "
              f"{jitlab} show {ro} && {jitlab} export {ro} --out {export}")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert "WRITABLE" not in proc.stdout, "the bind mount is not read-only"
    assert proc.returncode == 0, proc.stderr
    assert "toy-dev-0" in proc.stdout and "corrupt" not in proc.stderr
    assert (export / "ro" / "summary.json").is_file()
    assert sorted(p.name for p in finished_run.iterdir()) == ["run.lock", "run.sqlite", "summary.json"]
