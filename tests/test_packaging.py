"""A wheel installed into a fresh venv runs the CLI on its packaged seeds and writes outputs under the cwd.

Slow: builds a wheel and a venv. Nothing is downloaded: the venv reaches this interpreter's installed
dependencies (torch, transformers, ...) through a .pth file, and pip installs the wheel with --no-deps --no-index.
"""
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _sh(*cmd, **kw) -> str:
    kw.setdefault("env", {k: v for k, v in os.environ.items() if k != "PYTHONPATH"})  # no source checkout in reach
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)
    assert out.returncode == 0, f"{cmd}: {out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    return out.stdout


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_runs_react_on_toy(tmp_path):
    wheels = tmp_path / "wheels"
    _sh(sys.executable, "-m", "pip", "wheel", REPO, "--no-deps", "--no-build-isolation", "-q", "-w", wheels)
    wheel = next(wheels.glob("jitlab-*.whl"))
    venv = tmp_path / "venv"
    _sh(sys.executable, "-m", "venv", venv)
    py = venv / "bin" / "python"
    site = Path(_sh(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    # install first (pip would see this interpreter's jitlab through the .pth and skip), then reach the
    # dependencies this interpreter has; the venv's own site-packages comes first, so its jitlab wins
    _sh(py, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel)
    (site / "_jitlab_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    cwd = tmp_path / "work"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["JITLAB_HOME"] = str(tmp_path / "home")
    where = _sh(py, "-c", "import jitlab; print(jitlab.__file__)", cwd=cwd, env=env).strip()
    assert Path(where).is_relative_to(venv), where
    jitlab = venv / "bin" / "jitlab"
    listing = _sh(jitlab, "harnesses", cwd=cwd, env=env)
    assert "react" in listing and "resum" in listing
    shown = _sh(jitlab, "harnesses", "show", "resum", cwd=cwd, env=env)
    assert "class PeriodicSummaryMemory" in shown and "from jitlab.modules" not in shown
    out = _sh(jitlab, "run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-first", "--limit", "2",
              cwd=cwd, env=env)
    assert "2 episodes" in out
    assert (cwd / "runs" / "toy-react-scripted_pick-first" / "run.sqlite").is_file()
    assert not (venv / "runs").exists() and not any(site.glob("runs"))
