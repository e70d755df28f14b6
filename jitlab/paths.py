"""Where jitlab keeps generated data and caches.

``JITLAB_HOME`` (default ``~/.cache/jitlab``) holds generated games (``data/``) and the replay
cache (``replay.sqlite``). Nothing here is downloaded: everything is generated or shipped.
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["home", "data_dir", "repo_root"]


def home() -> Path:
    path = Path(os.environ.get("JITLAB_HOME", Path.home() / ".cache" / "jitlab"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir(name: str) -> Path:
    path = home() / "data" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def repo_root() -> Path:
    """The source checkout (seed_bank/, notebooks/ live here)."""
    return Path(__file__).resolve().parent.parent
