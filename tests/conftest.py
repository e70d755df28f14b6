"""Shared fixtures: every test gets its own JITLAB_HOME (cache, generated data) unless it opts out."""
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    # generated games are expensive: share them across tests through one data dir
    shared = Path(os.environ.get("JITLAB_TEST_DATA", REPO / ".pytest_cache" / "jitlab_home"))
    shared.mkdir(parents=True, exist_ok=True)
    home = tmp_path / "jitlab_home"
    home.mkdir()
    (shared / "data").mkdir(exist_ok=True)
    (home / "data").symlink_to(shared / "data")
    monkeypatch.setenv("JITLAB_HOME", str(home))
    import jitlab.llm.cache as cache
    monkeypatch.setattr(cache, "_default", None)
    yield home
