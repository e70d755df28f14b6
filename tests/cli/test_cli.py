"""The jitlab command: fast --help, clear errors for unknown names."""
import json
import subprocess
import sys

import pytest

from jitlab.cli import main


def test_help_does_not_import_torch():
    code = ("import sys, runpy; sys.argv=['jitlab','--help']\n"
            "try:\n    runpy.run_module('jitlab.cli', run_name='__main__')\nexcept SystemExit: pass\n"
            "heavy=[m for m in ('torch','transformers','litellm','panel','pandas') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out


@pytest.mark.parametrize("args, message", [
    (["run", "--suite", "nope", "--backbone", "scripted:look"], "unknown suite 'nope'; available: .*toy"),
    (["run", "--suite", "toy", "--harness", "nope", "--backbone", "scripted:look"], "unknown harness 'nope'; available: .*react"),
    (["run", "--suite", "toy", "--backbone", "gpt5-please"], "unknown backbone 'gpt5-please'; available: .*embedded"),
    (["run", "--suite", "toy", "--backbone", "scripted:nope"], "unknown scripted backbone"),
    (["run", "--suite", "toy", "--split", "holdout", "--backbone", "scripted:look"],
     "unknown split 'holdout'; available: dev, test, train"),
])
def test_unknown_names_list_available(args, message, capsys, tmp_path):
    assert main(args + ["--out", str(tmp_path / "r")]) == 2
    import re
    assert re.search(message, capsys.readouterr().err)


def test_run_and_show(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "--suite", "toy", "--backbone", "scripted:pick-first", "--limit", "2", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_episodes"] == 2 and summary["backbone"] == "scripted:pick-first"
    assert main(["show", str(out)]) == 0
    assert "toy-dev-1" in capsys.readouterr().out


def test_random_baseline_needs_no_backbone(tmp_path):
    # 'embedded' is never loaded: the random harness does not call the backbone
    assert main(["run", "--suite", "toy", "--harness", "random", "--backbone", "embedded", "--limit", "2",
                 "--out", str(tmp_path / "r")]) == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["tokens_per_task"] == 0 and summary["n_episodes"] == 2


def test_a_harness_folder_outside_the_seed_bank_runs_sandboxed(tmp_path):
    import shutil

    from jitlab.harness import load_harness
    from jitlab.sandbox import ISOLATED
    folder = tmp_path / "my_harness"
    shutil.copytree(load_harness("react").folder, folder)
    out = tmp_path / "r"
    assert main(["run", "--suite", "toy", "--harness", str(folder), "--backbone", "scripted:pick-hash",
                 "--limit", "1", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["isolation"] == [ISOLATED] and summary["status_counts"] == {"ok": 1}
    # untrusted code unisolated needs the loud opt-out
    assert main(["run", "--suite", "toy", "--harness", str(folder), "--backbone", "scripted:pick-hash",
                 "--isolation", "none", "--limit", "1", "--out", str(tmp_path / "r2")]) == 2


def test_a_run_whose_every_episode_failed_on_infrastructure_exits_non_zero(tmp_path, capsys):
    # scripted:fail is a provider-outage test double: every call raises InfraError (before: exit 0, "0 episodes")
    out = tmp_path / "r"
    argv = ["run", "--suite", "toy", "--backbone", "scripted:fail", "--limit", "2", "--no-cache", "--out", str(out)]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert f"{out}: 0 episodes" in captured.out
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "2 task(s) have no finished episode (2 infra_error)" in err[0]
    assert "simulated provider outage" in err[0] and "rerun the same command" in err[0]
    assert main(["run", "--suite", "toy", "--backbone", "scripted:pick-first", "--limit", "2", "--out",
                 str(tmp_path / "ok")]) == 0
