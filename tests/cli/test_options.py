"""jitlab.cli.options: command-line options generated from a config dataclass (defaults and checks written once)."""
import argparse
from dataclasses import dataclass, field

import pytest

from jitlab.cli import main
from jitlab.cli.options import add_config_arguments, config_from_args
from jitlab.errors import ConfigError
from jitlab.fields import check_fields
from jitlab.runner import RunConfig


@dataclass
class Demo:
    suite: str = field(default="toy", metadata={"help": "suite"})
    max_wall_s: float = field(default=12.5, metadata={"help": "seconds", "min_exclusive": 0})
    limit: int | None = field(default=None, metadata={"help": "tasks", "min": 1})
    mode: str = field(default="a", metadata={"help": "mode", "choices": ("a", "b")})
    cache: bool = field(default=True, metadata={"help": "use the cache"})
    new_run: bool = field(default=False, metadata={"help": "start over"})
    backbone_options: dict = field(default_factory=dict, metadata={"help": "backend options"})

    def __post_init__(self):
        check_fields(self)


def _parse(argv, **kw):
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Demo, **kw)
    return config_from_args(Demo, parser.parse_args(argv))


def test_defaults_come_from_the_dataclass_and_options_from_its_fields():
    assert _parse([]) == Demo()
    cfg = _parse(["--max-wall-s", "3", "--limit", "2", "--mode", "b", "--no-cache", "--new-run",
                  "--backbone-option", "n=4", "--backbone-option", "name=x", "--api-base", "http://127.0.0.1:1/v1"])
    assert cfg == Demo(max_wall_s=3.0, limit=2, mode="b", cache=False, new_run=True,
                       backbone_options={"n": 4, "name": "x", "api_base": "http://127.0.0.1:1/v1"})


def test_bounds_and_choices_are_the_dataclass_ones():
    with pytest.raises(ConfigError, match="--max-wall-s must be > 0"):
        _parse(["--max-wall-s", "0"])
    with pytest.raises(SystemExit):
        _parse(["--mode", "c"])
    with pytest.raises(SystemExit):
        _parse([], required=("suite",))


def test_run_help_shows_the_dataclass_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"(default: {RunConfig().max_tokens})" in out and f"(default: {RunConfig().max_wall_s})" in out
    for option in ("--max-steps", "--max-wall-s", "--limit", "--new-run", "--no-cache", "--api-base", "--backbone-option",
                   "--max-cost USD", "--isolation {auto,sandbox,none}"):
        assert option in out
