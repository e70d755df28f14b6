"""Issue 27 item 5: every count that allocates per unit (candidates, workers, rounds, references, retries, steps,
sampled replies, tensor rows) has an upper bound in its field metadata (jitlab.fields) whose error says why,
checked before anything is written; ``--help`` shows it as "at most N"."""
from dataclasses import fields

import pytest

from jitlab.batch import BatchConfig
from jitlab.cli import main
from jitlab.engineer.loop import EngineerConfig
from jitlab.engineer.table import TableConfig
from jitlab.engineer.transfer import TransferConfig
from jitlab.errors import ConfigError
from jitlab.jit.inference import JITConfig
from jitlab.runner import RunConfig
from jitlab.train.config import EngineerGRPOConfig, EngineerSFTConfig, Stage1Config, Stage2Config, Stage3Config
from jitlab.train.pipeline import PipelineConfig

CONFIGS = (RunConfig, JITConfig, EngineerConfig, TableConfig, TransferConfig, Stage1Config, Stage2Config,
           Stage3Config, EngineerSFTConfig, EngineerGRPOConfig, PipelineConfig, BatchConfig)
# the counts that allocate per unit, by field name, wherever a user-facing config has them
COUNTS = {"n_candidates", "concurrency", "eval_concurrency", "parallel", "retries", "avoid_retries", "k",
          "num_generations", "rounds", "max_repair_rounds", "repair_rounds", "eval_rounds", "k_references",
          "code_references", "repeat", "max_steps", "smoke_steps", "eval_smoke_steps", "episode_steps", "batch_size",
          "max_length", "max_completion_length", "lora_r"}


def test_every_count_has_an_upper_bound_that_says_why():
    unbounded = [f"{cls.__name__}.{f.name}" for cls in CONFIGS for f in fields(cls)
                 if f.name in COUNTS and not ("max" in f.metadata and f.metadata.get("max_why"))]
    assert unbounded == []
    assert sum(f.name in COUNTS for cls in CONFIGS for f in fields(cls)) > 30  # the names above still exist


@pytest.mark.parametrize("argv, message", [
    (["jit", "--suite", "toy", "--mode", "static", "--backbone", "scripted:pick-hash", "--n-candidates", "1000000000"],
     "--n-candidates must be <= 64 (each is generated, validated in its own sandbox and held until one is picked), "
     "got 1000000000"),
    (["run", "--suite", "toy", "--backbone", "scripted:pick-hash", "--concurrency", "100000"],
     "--concurrency must be <= 256 (each runs its own episode, thread and records at once), got 100000"),
    (["jit", "--suite", "toy", "--mode", "static", "--backbone", "scripted:pick-hash", "--max-repair-rounds", "10000"],
     "--max-repair-rounds must be <= 20 (each round is a backbone call set and a sandboxed run), got 10000"),
    (["run", "--suite", "toy", "--backbone", "scripted:pick-hash", "--retries", "1000000"],
     "--retries must be <= 20 (each retry reruns an episode from its start), got 1000000"),
])
def test_a_huge_count_is_one_line_that_says_why_and_nothing_is_written(argv, message, tmp_path, capsys, monkeypatch):
    """``jitlab jit --suite toy --mode static --backbone scripted:pick-hash --n-candidates 1000000000`` was accepted
    and grew to 2.7 GB with no output; now it is refused in one line, before the run directory exists."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r"
    assert main(argv + ["--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"jitlab: error: {message}"
    assert not out.exists()


def test_the_python_api_and_training_configs_share_the_bounds():
    with pytest.raises(ConfigError, match=r"--k must be <= 64 \(each is generated"):
        EngineerConfig(k=10 ** 6)
    with pytest.raises(ConfigError, match=r"--num-generations must be <= 64"):
        Stage3Config(num_generations=10 ** 9)
    with pytest.raises(ConfigError, match=r"--batch-size must be <= 1024 \(each row holds max_length tokens"):
        Stage1Config(batch_size=10 ** 9)
    assert JITConfig(suite="toy", n_candidates=64).n_candidates == 64  # the bound itself is allowed


def test_help_shows_the_bound(capsys):
    with pytest.raises(SystemExit):
        main(["jit", "--help"])
    assert "(at most 64)" in " ".join(capsys.readouterr().out.split())
