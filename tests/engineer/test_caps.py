"""The run options said once (jitlab/run_options.py) reach every run of ``engineer run``, ``engineer table`` and
``transfer``: their spend caps bound the whole command (every run it makes, counted with what is recorded under its
``--out``), a rerun with a higher cap resumes to the uncapped result, and the wall budget bounds each episode. The wall
cap (``--max-wall-total-s``) bounds the whole command the same way: a tiny one stops it, a rerun without it resumes.
With priced scripted TEST DOUBLES (jitlab.llm.scripted: a nominal $1 per million tokens) and no replay cache, so every
call costs. Each command's uncapped reference is run once per module (the fixtures below)."""

import ast
import json
import sys
from dataclasses import fields
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "sandbox"))
from sandbox_helpers import requires_bwrap  # noqa: E402

import jitlab  # noqa: E402
from jitlab.cli import main  # noqa: E402
from jitlab.engineer.loop import EngineerConfig  # noqa: E402
from jitlab.engineer.table import TableConfig, run_table  # noqa: E402
from jitlab.engineer.transfer import TransferConfig, run_transfer  # noqa: E402
from jitlab.jit.config import JITConfig  # noqa: E402
from jitlab.run_options import NOT_FINGERPRINTED, RunControls, adjust, derive, option_names, shared_spend  # noqa: E402
from jitlab.runner import RunConfig  # noqa: E402
from jitlab.runtime import SpendCapReached  # noqa: E402
from jitlab.store import load  # noqa: E402
from jitlab.train.config import EngineerGRPOConfig, Stage3Config  # noqa: E402
from jitlab.train.pipeline import PipelineConfig  # noqa: E402

BACKBONE = "scripted:pick-hash"
ENGINEER = [
    "engineer",
    "run",
    "--suite",
    "toy",
    "--harness",
    "react",
    "--backbone",
    BACKBONE,
    "--engineer",
    "rules",
    "--batch",
    "2",
    "-k",
    "1",
    "--no-cache",
    "--concurrency",
    "1",
    "--quiet",
]


def _recorded(out) -> tuple[float, int]:
    """(cost, tokens) recorded in every run directory under ``out``."""
    spend = shared_spend(out, max_tokens_total=10**12)
    return spend.cost, spend.tokens


def _statuses(out) -> list[str]:
    return sorted(s for db in Path(out).rglob("run.sqlite") for s in load(db.parent)["episodes"]["status"])


# the configs of the commands that play episodes (the JIT's generator and repair configs are the JIT's own), and
# jitlab batch's, whose caps bound the notebooks it runs
RUN_FACING = {
    "BatchConfig",
    "RunConfig",
    "JITConfig",
    "EngineerConfig",
    "TableConfig",
    "TransferConfig",
    "PipelineConfig",
    "Stage1DataConfig",
    "Stage2DataConfig",
    "Stage2Config",
    "Stage3Config",
    "EngineerGRPOConfig",
    "PatchRuns",
}


def _declarations() -> dict[str, list[str]]:
    """Field name -> where it is declared (``name: T = field(...)`` in a class body) among jitlab/'s option classes
    and run-facing configs."""
    found: dict[str, list[str]] = {}
    for path in sorted(Path(jitlab.__file__).parent.rglob("*.py")):
        if "seed_bank" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and (node.name in RUN_FACING or path.name == "run_options.py"):
                for item in node.body:
                    if (
                        isinstance(item, ast.AnnAssign)
                        and isinstance(item.value, ast.Call)
                        and getattr(item.value.func, "id", None) == "field"
                    ):
                        found.setdefault(item.target.id, []).append(f"{path.name}:{node.name}")
    return found


def test_each_option_is_declared_once_and_every_run_facing_config_takes_it():
    configs = (RunConfig, JITConfig, EngineerConfig, TableConfig, TransferConfig)
    declared = _declarations()
    for name in option_names():
        where = declared.get(name, [])
        assert len(where) == 1 and where[0].startswith("run_options.py:"), f"{name} declared in {where}"
        for cls in configs:
            if name != "new_run" or cls in (RunConfig, JITConfig):
                assert name in {f.name for f in fields(cls)}, f"{cls.__name__} lacks {name}"
    # the engineer commands keep their defaults; JIT's narrower meaning is said once, as help
    assert EngineerConfig().concurrency == TableConfig().concurrency == TransferConfig().concurrency == 6
    assert RunConfig().concurrency == JITConfig().concurrency == 1
    assert JITConfig.__dataclass_fields__["concurrency"].metadata["help"].startswith("static mode")
    assert JITConfig.__dataclass_fields__["concurrency"].metadata["max"] == 256  # bounds kept
    assert "allow_unisolated" in {f.name for f in fields(PipelineConfig)}
    caps = {"max_cost", "max_tokens_total", "max_wall_total_s"}
    assert {"max_wall_s", *caps} <= {f.name for f in fields(Stage3Config)}
    assert {"max_wall_s", *caps, "concurrency"} <= {f.name for f in fields(EngineerGRPOConfig)}
    assert caps <= set(NOT_FINGERPRINTED)  # a run stopped by a cap resumes with another


def test_derive_carries_the_options_and_nothing_of_the_same_name_that_is_not_one():
    eng = EngineerConfig(suite="toy", seed=4, max_wall_s=7.0, max_cost=0.5, retries=0, concurrency=2, out="x")
    rc = derive(RunConfig, eng, suite="toy", quiet=True)
    assert (rc.seed, rc.max_wall_s, rc.max_cost, rc.retries, rc.concurrency, rc.quiet) == (4, 7.0, 0.5, 0, 2, True)
    assert rc.out is None and rc.harness == "react"  # not an option: never carried
    grpo = EngineerGRPOConfig(data="d", seed=9, max_wall_s=3.0)  # seed here orders the training data
    assert derive(EngineerConfig, grpo, seed=1).seed == 1 and derive(EngineerConfig, grpo).seed == 0
    assert derive(EngineerConfig, grpo).max_wall_s == 3.0
    with pytest.raises(TypeError, match="inherits no option"):

        @adjust(defaults={"nope": 1})
        class Bad(RunControls):
            pass


def test_the_engineer_commands_take_the_wall_budget_and_the_caps_as_options(capsys):
    for argv in (["engineer", "run"], ["engineer", "table"], ["transfer"], ["run"], ["jit"]):
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        text = capsys.readouterr().out
        for option in ("--max-wall-s", "--max-cost", "--max-tokens-total", "--max-wall-total-s", "--retries",
                       "--concurrency"):
            assert option in text, f"{' '.join(argv)} --help lacks {option}"


@pytest.fixture(scope="module")
def engineer_ref(tmp_path_factory):
    """The uncapped ``engineer run``: its folder (read only by the tests)."""
    ref = tmp_path_factory.mktemp("engineer") / "ref"
    assert main([*ENGINEER, "--out", str(ref)]) == 0
    return ref


@requires_bwrap
def test_engineer_run_stops_at_its_spend_cap_and_a_higher_cap_resumes_to_the_uncapped_result(tmp_path, capsys,
                                                                                              engineer_ref):
    ref = engineer_ref
    cost, tokens = _recorded(ref)
    assert tokens > 0 and cost > 0
    for cap in (["--max-tokens-total", str(tokens // 2)], ["--max-cost", f"{cost / 2:.9f}"]):
        out = tmp_path / cap[0].strip("-")
        capsys.readouterr()
        assert main([*ENGINEER, *cap, "--out", str(out)]) == 2
        assert "spend cap reached" in capsys.readouterr().err
        got_cost, got_tokens = _recorded(out)
        assert got_tokens < tokens and got_cost < cost  # stopped: not every run was made
        assert (got_tokens >= tokens // 2) if cap[0] == "--max-tokens-total" else (got_cost >= cost / 2)  # at the cap
        assert not (out / "summary.json").exists()
        assert main([*ENGINEER, *cap, "--out", str(out)]) == 2  # the same cap: nothing new starts
        assert _recorded(out) == (got_cost, got_tokens)
        assert main([*ENGINEER, "--max-tokens-total", str(10 * tokens), "--out", str(out)]) == 0  # resumes
        summary, expected = (json.loads((d / "summary.json").read_text()) for d in (out, ref))
        for key in ("base_success", "success", "kept_sha", "delta_batch"):
            assert summary[key] == expected[key]
        assert _recorded(out)[1] >= tokens  # an episode the cap stopped in flight (spend_cap) was run again


@requires_bwrap
def test_engineer_run_stops_at_its_wall_cap_and_a_rerun_without_it_resumes(tmp_path, capsys, engineer_ref):
    out = tmp_path / "walled"
    capsys.readouterr()
    assert main([*ENGINEER, "--max-wall-total-s", "0.001", "--out", str(out)]) == 2  # a loop never takes a millisecond
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "wall cap reached: " in err[0]
    assert "of --max-wall-total-s 0.001 (this invocation)" in err[0] and "rerun to resume" in err[0]
    assert not (out / "summary.json").exists() and _recorded(out)[1] < _recorded(engineer_ref)[1]
    assert set(_statuses(out)) <= {"ok", "budget", "harness_error", "spend_cap"}  # no episode lost or mis-recorded
    assert main([*ENGINEER, "--out", str(out)]) == 0  # no cap: resumes (the cap is in no run's fingerprint)
    summary, expected = (json.loads((d / "summary.json").read_text()) for d in (out, engineer_ref))
    for key in ("base_success", "success", "kept_sha", "delta_batch"):
        assert summary[key] == expected[key]


@requires_bwrap
def test_engineer_run_bounds_each_episode_by_the_wall_budget(tmp_path):
    out = tmp_path / "wall"
    assert main([*ENGINEER, "--backbone-option", "delay_s=0.1", "--max-wall-s", "0.25", "--rounds", "1", "--out", str(out)]) == 0
    base = load(out / "round0" / "base")
    assert set(base["episodes"]["status"]) == {"budget"}  # each stopped at its wall budget
    assert all("wall budget 0.25s" in e for e in base["episodes"]["error"])
    assert json.loads((out / "summary.json").read_text())["config"]["max_wall_s"] == 0.25


def _table(out, **kw) -> TableConfig:
    return TableConfig(
        suite="toy",
        harness="react",
        engineers="rules,interventions",
        backbone=BACKBONE,
        batch=2,
        k=1,
        test=1,
        concurrency=1,
        cache=False,
        quiet=True,
        out=str(out),
        **kw,
    )


@pytest.fixture(scope="module")
def table_ref(tmp_path_factory):
    """The uncapped ``engineer table``: its folder (read only by the tests)."""
    ref = tmp_path_factory.mktemp("table") / "ref"
    run_table(_table(ref, max_wall_s=30.0))
    return ref


@requires_bwrap
def test_engineer_table_stops_at_its_spend_cap_across_its_loops(tmp_path, table_ref):
    ref = table_ref
    tokens = _recorded(ref)[1]
    for db in ref.rglob("run.sqlite"):  # the wall budget reached every loop's runs
        assert load(db.parent)["config"]["max_wall_s"].iloc[0] == 30.0
    out = tmp_path / "capped"
    with pytest.raises(SpendCapReached, match="spend cap reached"):
        run_table(_table(out, max_wall_s=30.0, max_tokens_total=int(tokens * 0.6)))
    # the cap counts every loop's runs together (and the smoke validations, which no run records; a call in flight
    # may overrun it by one reply)
    assert _recorded(out)[1] < min(tokens, int(tokens * 0.6) + 1000)
    assert not (out / "table.csv").exists()
    rows = run_table(_table(out, max_wall_s=30.0))  # no cap: resumes
    assert (out / "table.md").read_text() == (ref / "table.md").read_text() and len(rows) == 3


@requires_bwrap
def test_engineer_table_stops_at_its_wall_cap_and_a_rerun_without_it_resumes(tmp_path, table_ref):
    out = tmp_path / "walled"
    with pytest.raises(SpendCapReached, match=r"wall cap reached: .* of --max-wall-total-s 0\.001 \(this invocation\)"):
        run_table(_table(out, max_wall_s=30.0, max_wall_total_s=0.001))
    assert not (out / "table.csv").exists() and _recorded(out)[1] < _recorded(table_ref)[1]
    rows = run_table(_table(out, max_wall_s=30.0))  # no cap: resumes
    assert (out / "table.md").read_text() == (table_ref / "table.md").read_text() and len(rows) == 3


def _transfer(out, **kw) -> TransferConfig:
    return TransferConfig(
        suite="toy",
        learn_on="scripted:pick-first",
        apply_to=BACKBONE,
        limit=2,
        dev=2,
        concurrency=1,
        cache=False,
        quiet=True,
        out=str(out),
        max_wall_s=20.0,
        **kw,
    )


@pytest.fixture(scope="module")
def transfer_ref(tmp_path_factory):
    """The uncapped ``transfer``: (its folder, its transfer.json)."""
    out = tmp_path_factory.mktemp("transfer") / "ref"
    return out, run_transfer(_transfer(out))


@requires_bwrap
def test_transfer_stops_at_its_spend_cap_and_resumes(tmp_path, transfer_ref):
    cfg = _transfer
    ref_dir, ref = transfer_ref
    cost, tokens = _recorded(ref_dir)
    for db in ref_dir.rglob("run.sqlite"):
        assert load(db.parent)["config"]["max_wall_s"].iloc[0] == 20.0
    out = tmp_path / "capped"
    with pytest.raises(SpendCapReached, match="spend cap reached"):
        run_transfer(cfg(out, max_cost=cost / 2))
    assert cost / 2 <= _recorded(out)[0] < cost and not (out / "transfer.json").exists()
    again = run_transfer(cfg(out, max_cost=cost * 10))
    assert [c["delta"] for c in again["cells"]] == [c["delta"] for c in ref["cells"]]
    assert _recorded(out)[1] >= tokens


@requires_bwrap
def test_transfer_stops_at_its_wall_cap_and_a_rerun_without_it_resumes(tmp_path, transfer_ref):
    ref_dir, ref = transfer_ref
    out = tmp_path / "walled"
    with pytest.raises(SpendCapReached, match=r"wall cap reached: .* of --max-wall-total-s 0\.001 \(this invocation\)"):
        run_transfer(_transfer(out, max_wall_total_s=0.001))
    assert not (out / "transfer.json").exists() and _recorded(out)[1] < _recorded(ref_dir)[1]
    again = run_transfer(_transfer(out))  # no cap: resumes
    assert [c["delta"] for c in again["cells"]] == [c["delta"] for c in ref["cells"]]
