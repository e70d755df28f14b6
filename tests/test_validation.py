"""Numbers and strings of the config dataclasses are checked once, from field metadata (jitlab.fields):
the CLI, notebooks and the Python API get the same one-line error naming the option, before anything
is written (issue 17, case 6)."""
import pytest

from jitlab.cli import main
from jitlab.errors import ConfigError
from jitlab.jit.inference import JITConfig
from jitlab.runner import RunConfig

SEED_MAX = 2 ** 63 - 1   # what SQLite INTEGER columns hold
RUN = ["run", "--suite", "toy", "--backbone", "scripted:pick-hash"]
JIT = ["jit", "--suite", "toy", "--mode", "static", "--backbone", "scripted:pick-hash", "--retrieval", "bm25"]


@pytest.mark.parametrize("argv, message", [
    (RUN + ["--limit", "-1"], "--limit must be >= 1, got -1"),
    (RUN + ["--limit", "0"], "--limit must be >= 1, got 0"),
    (RUN + ["--max-steps", "0"], "--max-steps must be >= 1, got 0"),
    (RUN + ["--max-steps", "-1"], "--max-steps must be >= 1, got -1"),
    (RUN + ["--max-tokens", "0"], "--max-tokens must be >= 1, got 0"),
    (RUN + ["--max-wall-s", "nan"], "--max-wall-s must be a finite number, got nan"),
    (RUN + ["--max-wall-s", "inf"], "--max-wall-s must be a finite number, got inf"),
    (RUN + ["--max-wall-s", "0"], "--max-wall-s must be > 0, got 0.0"),
    (RUN + ["--concurrency", "0"], "--concurrency must be >= 1, got 0"),
    (RUN + ["--concurrency", "-3"], "--concurrency must be >= 1, got -3"),
    (RUN + ["--seed", "-1"], "--seed must be >= 0, got -1"),
    (RUN + ["--seed", "100000000000000000000000"], f"--seed must be <= {SEED_MAX}, got 100000000000000000000000"),
    (RUN + ["--max-cost", "-1"], "--max-cost must be >= 0, got -1.0"),
    (RUN + ["--max-cost", "nan"], "--max-cost must be a finite number, got nan"),
    (RUN + ["--max-tokens-total", "-5"], "--max-tokens-total must be >= 0, got -5"),
    (JIT + ["--n-candidates", "0"], "--n-candidates must be >= 1, got 0"),
    (JIT + ["--k-references", "-1"], "--k-references must be >= 1, got -1"),
    (JIT + ["--max-repair-rounds", "-1"], "--max-repair-rounds must be >= 0, got -1"),
    (JIT + ["--smoke-steps", "0"], "--smoke-steps must be >= 1, got 0"),
    (JIT + ["--limit", "-1"], "--limit must be >= 1, got -1"),
    (JIT + ["--concurrency", "0"], "--concurrency must be >= 1, got 0"),
])
def test_bad_numbers_are_one_line_errors_and_nothing_is_written(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r"
    assert main(argv + ["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"jitlab: error: {message}"
    assert not out.exists() and list(tmp_path.iterdir()) == [tmp_path / "jitlab_home"]


@pytest.mark.parametrize("command", [RUN, JIT])
def test_empty_out_is_refused(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(command + ["--out", ""]) == 2
    assert "--out must be a non-empty string, got ''" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_refused_seed_leaves_the_directory_free_for_a_valid_one(tmp_path, capsys):
    # before: the overflow came after the config was written, so the directory refused every other seed
    out = str(tmp_path / "r")
    assert main(RUN + ["--limit", "1", "--seed", str(10 ** 23), "--out", out]) == 2
    assert main(RUN + ["--limit", "1", "--seed", "1", "--out", out]) == 0
    assert main(RUN + ["--limit", "1", "--seed", str(SEED_MAX), "--out", str(tmp_path / "big")]) == 0


def test_the_python_api_shares_the_checks():
    with pytest.raises(ConfigError, match="--limit must be >= 1, got -1"):
        RunConfig(limit=-1)
    with pytest.raises(ConfigError, match="--max-steps must be an integer, got 2.5"):
        RunConfig(max_steps=2.5)
    with pytest.raises(ConfigError, match="--concurrency must be an integer, got True"):
        RunConfig(concurrency=True)
    with pytest.raises(ConfigError, match="--max-wall-s must be a number, got '9'"):
        RunConfig(max_wall_s="9")
    with pytest.raises(ConfigError, match="--n-candidates must be >= 1, got 0"):
        JITConfig(n_candidates=0)
    RunConfig(limit=None, max_steps=None, max_wall_s=1, max_cost=0.5)   # None where optional; an int for a float
    JITConfig(n_candidates=None, max_repair_rounds=0)


def test_a_field_changed_after_construction_is_checked_when_the_run_starts(tmp_path):
    from jitlab.runner import run
    cfg = RunConfig(suite="toy", backbone="scripted:look", out=str(tmp_path / "r"))
    cfg.limit = -1   # a notebook may set fields one by one
    with pytest.raises(ConfigError, match="--limit must be >= 1, got -1"):
        run(cfg)
    assert not (tmp_path / "r").exists()


def test_check_number():
    from jitlab.fields import check_number
    check_number("--x", 3, min=1, max=3)
    with pytest.raises(ConfigError, match="--x must be set"):
        check_number("--x", None)
    with pytest.raises(ConfigError, match=r"--x must be <= 3, got 4"):
        check_number("--x", 4, max=3)


def test_an_episode_budget_is_checked_too():
    from jitlab.runtime import Budget
    with pytest.raises(ConfigError, match="--max-steps must be >= 1, got 0"):
        Budget(max_steps=0)
    with pytest.raises(ConfigError, match="--max-wall-s must be a finite number, got nan"):
        Budget(max_wall_s=float("nan"))
