"""jitlab/progress.py: `jitlab run` shows a bar with ETA on a terminal (a real pty), plain progress lines when piped
to a file, nothing under --quiet; the plain-line cadence and a grid's total, in-process.

The runs use the toy suite and `scripted:pick-hash`, a deterministic test double (not a model)."""
import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from jitlab.progress import Progress, group, live_dashboard_hint, progress_mode

REPO = Path(__file__).resolve().parent.parent
RUN = [sys.executable, "-m", "jitlab.cli", "run", "--suite", "toy", "--harness", "react", "--backbone",
       "scripted:pick-hash", "--limit", "20"]   # the toy suite has 10 dev tasks: --limit 20 runs them all


def _env(**more) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "JITLAB_PROGRESS")}
    return {**env, "PYTHONPATH": str(REPO), **more}


def test_piped_to_a_file_prints_plain_progress_lines(tmp_path):
    log = tmp_path / "run.log"
    with log.open("w") as f:
        subprocess.run([*RUN, "--out", str(tmp_path / "run")], stdout=f, stderr=subprocess.STDOUT, env=_env(),
                       check=True, timeout=120)
    text = log.read_text()
    lines = [l for l in text.splitlines() if l.startswith("progress ")]
    assert "\r" not in text and "█" not in text, "no bar redraws in a file"
    assert len(lines) == 10, text    # one per tenth of the job (10 episodes: every episode)
    last = lines[-1]
    assert re.match(r"progress react · toy: 10/10 episodes \(100%\) · ok \d+/10 · [\d,]+ tok · \$\d+\.\d{4} · "
                    r"\d+ tok/s · elapsed \d+m\d\ds · eta 0m00s$", last), last
    assert re.search(r"eta \d+m\d\ds", lines[0])
    tokens = int(re.search(r"([\d,]+) tok ", last).group(1).replace(",", ""))
    assert tokens > 0

    quiet = subprocess.run([*RUN, "--out", str(tmp_path / "quiet"), "--quiet"], capture_output=True, text=True,
                           env=_env(), check=True, timeout=120)
    assert "progress" not in quiet.stdout + quiet.stderr


@pytest.mark.parametrize("columns", [160, 0])   # 0: a pty with no size (`script` without a terminal, some CI runners)
def test_a_terminal_gets_a_bar_with_eta(tmp_path, columns):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40 if columns else 0, columns, 0, 0))
    proc = subprocess.Popen([*RUN, "--out", str(tmp_path / "run")], stdout=slave, stderr=slave, env=_env())
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:   # EIO: the child closed the pty
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=120) == 0
    os.close(master)
    text = out.decode("utf-8", "replace")
    bars = [p for p in re.split(r"[\r\n]", text) if "episode/s" in p]
    assert bars, text
    # tqdm's [elapsed<remaining, rate, postfix]: the ETA, then our successes / tokens / cost / tokens per second
    full = r", +[\d.]+episode/s, ok \d+/10 · [\d,]+ tok · \$\d+\.\d{4} · \d+ tok/s\]" if columns else ""  # 80 wide: cut
    assert re.search(r"react · toy: 100%.*10/10 \[\d\d:\d\d<\d\d:\d\d" + full, bars[-1]), bars[-1]
    assert not [l for l in text.splitlines() if l.startswith("progress ")], "a terminal gets the bar, not the lines"


def test_plain_lines_every_n_and_at_the_end(capsys, monkeypatch):
    monkeypatch.delenv("JITLAB_PROGRESS", raising=False)
    with Progress(7, "job", every=3, mode="lines") as bar:
        for i in range(7):
            bar.update(success=i % 2 == 0, tokens=100, cost=0.001)
    lines = capsys.readouterr().out.splitlines()
    assert [l.split(":")[1].split()[0] for l in lines] == ["3/7", "6/7", "7/7"]
    assert "ok 4/7 · 700 tok · $0.0070" in lines[-1]


def test_a_grid_total_adds_its_cells_outcomes(capsys):
    with group(2, "grid", unit="cell") as total:
        total.mode = "off"
        for _ in range(2):
            with Progress(3, "cell", mode="off") as cell:   # made while the group is open: it reports to it
                for _ in range(3):
                    cell.update(success=True, tokens=10, cost=0.5)
            total.update()
    assert (total.done, total.episodes, total.successes, total.tokens, total.cost) == (2, 6, 6, 60, 3.0)
    assert Progress(1, mode="off")._parent is None   # closed: later jobs are on their own


@pytest.mark.parametrize("forced", ["bar", "lines", "off"])
def test_jitlab_progress_forces_a_rendering(monkeypatch, forced):
    monkeypatch.setenv("JITLAB_PROGRESS", forced)
    assert progress_mode(quiet=True) == forced


def test_quiet_or_piped_outside_a_notebook(monkeypatch):
    monkeypatch.delenv("JITLAB_PROGRESS", raising=False)
    assert progress_mode(quiet=True) == "off"
    assert progress_mode(quiet=False) == "lines"   # pytest captures stdout: not a terminal


def test_the_live_dashboard_hint_names_a_run_under_the_checkout_from_its_root(tmp_path):
    """Notebook 00's executed copy printed `jitlab dash --live /work/main/runs/...`: a run under the repository root is
    named from there (where the commands are typed); one elsewhere keeps its absolute path."""
    from jitlab.paths import repo_root
    hint = live_dashboard_hint(repo_root() / "runs" / "quickstart")
    assert "jitlab dash --live runs/quickstart --port " in hint and str(repo_root()) not in hint
    assert f"--live {tmp_path / 'run'} --port " in live_dashboard_hint(tmp_path / "run")
