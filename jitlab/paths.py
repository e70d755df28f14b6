"""Where jitlab keeps generated data, caches and outputs.

``JITLAB_HOME`` (default ``~/.cache/jitlab``) holds generated games (``data/``) and the replay
cache (``replay.sqlite``). Nothing here is downloaded: everything is generated or shipped.

``repo_root()`` is where outputs (``runs/``, ``figures/``) resolve: the source checkout when jitlab runs
from one (so a notebook whose kernel starts in ``notebooks/`` writes beside the code), else the working
directory, never the installed package. ``package_root()`` is the installed ``jitlab/`` folder (seeds,
templates and other package data).
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["home", "data_dir", "package_root", "repo_root"]


def home() -> Path:
    path = Path(os.environ.get("JITLAB_HOME", Path.home() / ".cache" / "jitlab"))
    path.mkdir(parents=True, exist_ok=True)
    return path


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
