"""Training configs and the ``jitlab train`` CLI's input errors: YAML loading, bounds, CPU defaults, the shipped GPU
profile, refusal of test-split data and of a changed config in a used run folder (no model is loaded)."""
import json

import pytest

from jitlab.cli import main
from jitlab.errors import ConfigDrift, ConfigError
from jitlab.train.config import CONFIG_DIR, Stage1Config, Stage1DataConfig, load_config


def test_cpu_defaults_turn_off_trl_gpu_defaults():
    cfg = Stage1Config(data="d")
    assert cfg.bf16 is False and cfg.gradient_checkpointing is False and cfg.use_cpu is True
    assert cfg.reporters() == ["tensorboard"]


def test_gpu_profile_ships_inside_the_package_and_loads():
    path = CONFIG_DIR / "gpu" / "stage1.yaml"
    cfg = load_config(Stage1Config, path, {"data": "runs/d", "sft_steps": "3"})
    assert cfg.bf16 and cfg.gradient_checkpointing and not cfg.use_cpu and cfg.lora_r == 64 and cfg.sft_steps == 3
    from jitlab.train.stage1 import training_arguments
    args = training_arguments(cfg, "sft", path.parent)
    assert args["bf16"] and args["max_steps"] == 3 and args["report_to"] == ["tensorboard"]


def test_engineer_gpu_profiles_load_and_cpu_defaults_hold():
    from jitlab.train.config import EngineerGRPOConfig, EngineerSFTConfig
    for cls, name in ((EngineerSFTConfig, "engineer_sft.yaml"), (EngineerGRPOConfig, "engineer_grpo.yaml")):
        assert not cls(data="d").bf16 and cls(data="d").use_cpu
        cfg = load_config(cls, CONFIG_DIR / "gpu" / name, {"data": "runs/d"})
        assert cfg.bf16 and not cfg.use_cpu and cfg.lora_r == 64, name
    with pytest.raises(ConfigError, match="--invalid-reward must be <= -1"):
        load_config(EngineerGRPOConfig, None, {"data": "d", "invalid_reward": "0"})


@pytest.mark.parametrize("overrides,message", [
    ({"lora_r": "0"}, "--lora-r must be >= 1, got 0"),
    ({"sft_learning_rate": "-1"}, "--sft-learning-rate must be > 0"),
    ({"report_to": "nowhere"}, "unknown tracker 'nowhere'"),
    ({"bf16": "maybe"}, "--bf16 must be true or false"),
    ({"colour": "red"}, "unknown key\\(s\\) colour"),
])
def test_bad_values_are_one_line_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(Stage1Config, None, {"data": "d", **overrides})


def test_exponent_floats_without_a_dot_are_numbers(tmp_path):
    # YAML 1.1 reads 5e-5 as a string; a researcher types it on --set and in a config file alike
    assert load_config(Stage1Config, None, {"data": "d", "sft_learning_rate": "5e-5"}).sft_learning_rate == 5e-5
    config = tmp_path / "c.yaml"
    config.write_text("data: d\nsft_learning_rate: 2E-4\n")
    assert load_config(Stage1Config, config).sft_learning_rate == 2e-4
    with pytest.raises(ConfigError, match="--sft-learning-rate must be a number, got 'fast'"):
        load_config(Stage1Config, None, {"data": "d", "sft_learning_rate": "fast"})


def test_yaml_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="bad.yaml must be a YAML mapping"):
        load_config(Stage1Config, bad)
    with pytest.raises(ConfigError, match="no such file"):
        load_config(Stage1Config, tmp_path / "missing.yaml")


def _data(folder, split="dev"):
    folder.mkdir()
    row = {"prompt": [{"role": "user", "content": "task"}], "completion": [{"role": "assistant", "content": "{}"}],
           "split": split, "task_id": "t"}
    (folder / "sft.jsonl").write_text(json.dumps(row) + "\n")
    return folder


def test_stage1_refuses_test_split_data_and_a_changed_config(tmp_path):
    from jitlab.train.stage1 import run_stage1
    with pytest.raises(ConfigError, match="split\\(s\\) test"):
        run_stage1(Stage1Config(data=str(_data(tmp_path / "bad", "test"))), tmp_path / "out")
    with pytest.raises(ConfigError, match="no sft.jsonl"):
        run_stage1(Stage1Config(data=str(tmp_path / "nothing")), tmp_path / "out")
    out = tmp_path / "used"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"fingerprint": {"config": {}, "data": {}}}))
    with pytest.raises(ConfigDrift, match="another config or other data"):
        run_stage1(Stage1Config(data=str(_data(tmp_path / "good"))), out)


def test_cli_reports_input_errors_in_one_line(tmp_path, capsys):
    assert main(["train", "stage1", "--set", "data=" + str(tmp_path / "none"), "--out", str(tmp_path / "o")]) == 2
    assert "no sft.jsonl" in capsys.readouterr().err
    assert main(["train", "stage1", "--set", "lora_r", "--out", str(tmp_path / "o")]) == 2
    assert "--set expects KEY=VALUE" in capsys.readouterr().err
    assert main(["train", "data", "stage1", "--runs", "r", "--set", "splits=[dev, test]", "--out", str(tmp_path)]) == 2
    assert "must not include 'test'" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="must not include 'test'"):
        Stage1DataConfig(splits=["test"])
    with pytest.raises(ConfigError, match="must not include 'holdout'"):
        Stage1DataConfig(splits=["dev", "holdout"])
