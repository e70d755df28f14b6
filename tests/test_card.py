"""What a harness card reads that the records did not always hold: the jitlab commit and the suite version."""
import re

from jitlab import paths
from jitlab.card import format_card, task_list_hash
from jitlab.envs.base import suite_version


def test_jitlab_commit_is_the_checkouts_head_and_none_outside_a_checkout(tmp_path, monkeypatch):
    commit = paths.jitlab_commit()
    assert commit is not None and re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", commit)
    monkeypatch.setattr(paths, "package_root", lambda: tmp_path / "site-packages" / "jitlab")
    assert paths.jitlab_commit() is None


def test_suite_version_and_task_list_hash():
    assert suite_version("toy") == "1" and suite_version("no-such-suite") is None and suite_version(None) is None
    assert task_list_hash(["b", "a", "a"]) == task_list_hash(["a", "b"]) != task_list_hash(["a"])


def test_a_card_says_what_it_does_not_know():
    card = {"harness": "h", "harness_sha": None, "modules": None, "hooks": None, "backbone": "scripted:x",
            "decoding": {"temperature": 0.7, "greedy": False, "top_p": 0.9},
            "budgets": {"max_steps": 5, "max_tokens": 100, "max_wall_s": 60.0}, "suite": "toy", "split": "dev",
            "suite_version": None, "n_tasks": 0, "task_list_hash": task_list_hash([]), "seeds": [],
            "jitlab_commit": None, "replay_cache_hit_share": None}
    text = format_card(card)
    assert "temperature 0.7, top_p=0.9" in text and "version not recorded" in text
    assert "jitlab commit not recorded" in text and "sha none: no finished episode" in text
