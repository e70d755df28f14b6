"""Where jitlab keeps generated data, caches and outputs.

``JITLAB_HOME`` (default ``~/.cache/jitlab``) holds generated games (``data/``) and the replay
cache (``replay.sqlite``). Nothing here is downloaded: everything is generated or shipped.

``repo_root()`` is where outputs (``runs/``, ``figures/``) resolve: the source checkout when jitlab runs
from one (so a notebook whose kernel starts in ``notebooks/`` writes beside the code), else the working
directory, never the installed package. ``package_root()`` is the installed ``jitlab/`` folder (seeds,
templates and other package data). ``jitlab_commit()`` is the git commit of that checkout (recorded in every run).
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["home", "data_dir", "jitlab_commit", "package_root", "repo_relative", "repo_root"]


def home() -> Path:
    """``$JITLAB_HOME`` (not created here: what writes there creates its folder, so a home that cannot be created or
    written turns the replay cache off with a warning instead of stopping a run that needs nothing else from it)."""
    return Path(os.environ.get("JITLAB_HOME", Path.home() / ".cache" / "jitlab"))


def data_dir(name: str) -> Path:
    path = home() / "data" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def package_root() -> Path:
    """The ``jitlab`` package folder (read-only when installed from a wheel)."""
    return Path(__file__).resolve().parent


def repo_root() -> Path:
    """The source checkout (notebooks/, runs/, figures/) when jitlab runs from one, else the working directory."""
    checkout = package_root().parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "jitlab").resolve() == package_root():
        return checkout
    return Path.cwd()


def repo_relative(path: str | Path) -> Path:
    """``path`` relative to :func:`repo_root` when it lies under it (what a notebook shows: no machine's absolute
    path in an executed copy), else ``path`` itself."""
    path = Path(path)
    try:
        return path.resolve().relative_to(repo_root().resolve())
    except ValueError:
        return path


def jitlab_commit() -> str | None:
    """The git commit of the jitlab checkout running now (``+dirty`` when tracked files differ from it);
    None when jitlab is not run from a git checkout."""
    import subprocess
    root = package_root().parent

    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=20)
    if not (root / ".git").exists():   # an installed package, not a checkout
        return None
    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", "jitlab").stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")
