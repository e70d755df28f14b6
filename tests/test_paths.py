"""Outputs resolve from the checkout when jitlab runs from one, else from the working directory."""
from pathlib import Path

import jitlab.paths as P


def test_repo_root_is_the_checkout_when_running_from_one():
    root = P.repo_root()
    assert (root / "pyproject.toml").is_file() and (root / "jitlab").resolve() == P.package_root()


def test_repo_root_is_the_cwd_for_an_installed_package(tmp_path, monkeypatch):
    site = tmp_path / "site-packages" / "jitlab"          # what a wheel install looks like: no pyproject beside it
    site.mkdir(parents=True)
    monkeypatch.setattr(P, "package_root", lambda: site)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert P.repo_root() == Path.cwd() == work


def test_seeds_live_in_the_package():
    from jitlab.harness import seed_bank_dir, seed_names
    assert seed_bank_dir().is_relative_to(P.package_root()) and "react" in seed_names()
