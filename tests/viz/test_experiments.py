"""jitlab.experiments (grids of fixed-harness runs) and jitlab.viz.runs (reading a run back, figure registration).
Runs use the toy suite and the scripted:pick-first test double (milliseconds per episode)."""
import json
import shutil

import pandas as pd
import pytest

from jitlab import experiments as X
from jitlab.errors import ConfigError, UnknownName
from jitlab.viz import runs as R


def test_seed_harnesses_excludes_baselines():
    seeds = X.seed_harnesses()
    assert len(seeds) == 13 and "random" not in seeds and "react" in seeds
    assert "random" in X.seed_harnesses(baselines=True)


def test_repo_path_and_slug(tmp_path):
    assert X.repo_path(tmp_path) == tmp_path
    assert X.repo_path("runs/x") == X.repo_path(".") / "runs" / "x"
    assert X.run_slug("toy", "litellm:openai/gpt-4o") == "toy-litellm_openai_gpt-4o"


def test_output_path_under_a_batch_root(tmp_path, monkeypatch):
    monkeypatch.setenv("JITLAB_OUT_ROOT", str(tmp_path / "batch" / "000-abc"))   # not created yet
    assert X.output_path("runs/x") == tmp_path / "batch" / "000-abc" / "runs" / "x"
    assert X.output_path("../common/x") == tmp_path / "batch" / "common" / "x"   # a folder notebooks share
    assert X.output_path(tmp_path / "abs") == tmp_path / "abs"


@pytest.fixture
def grid(tmp_path):
    return X.run_grid("toy", ["react", "random"], ["scripted:pick-first"], limit=2, out_root=tmp_path / "g")


def test_run_grid_writes_one_run_per_pairing_and_resumes(grid, tmp_path):
    assert list(grid["harness"]) == ["react", "random"] and set(grid["n_episodes"]) == {2}
    for row in grid.itertuples():
        assert (tmp_path / "g" / "toy" / f"{row.harness}-scripted_pick-first" / "run.sqlite").exists()
    assert grid.set_index("harness").loc["random", "tokens_per_task"] == 0     # random never calls the backbone
    again = X.run_grid("toy", ["react", "random"], ["scripted:pick-first"], limit=2, out_root=tmp_path / "g")
    pd.testing.assert_frame_equal(grid.drop(columns="status_counts"), again.drop(columns="status_counts"))


def test_run_grid_workers_give_the_same_rows(grid, tmp_path):
    both = X.run_grid("toy", ["react", "random"], ["scripted:pick-first"], limit=2, out_root=tmp_path / "w", workers=2)
    cols = ["harness", "n_episodes", "success_rate", "tokens_per_task", "tool_calls_per_task"]
    pd.testing.assert_frame_equal(grid[cols], both[cols])


def test_run_grid_workers_finish_the_other_cells_then_raise(tmp_path, caplog):
    with pytest.raises(UnknownName, match="no_such_harness"):
        X.run_grid("toy", ["no_such_harness", "react"], ["scripted:pick-first"], limit=2, out_root=tmp_path / "g",
                   workers=2)
    assert "grid cell toy · no_such_harness · scripted:pick-first failed" in caplog.text
    assert (tmp_path / "g" / "toy" / "react-scripted_pick-first" / "summary.json").exists()


def test_grid_table_and_best_per_suite():
    runs = pd.DataFrame([
        {"suite": "a", "harness": "h1", "backbone": "b", "success_rate": 0.5, "tokens_per_task": 100.0},
        {"suite": "a", "harness": "h2", "backbone": "b", "success_rate": 0.5, "tokens_per_task": 50.0},
        {"suite": "a", "harness": "h3", "backbone": "b", "success_rate": 0.2, "tokens_per_task": 10.0},
        {"suite": "c", "harness": "h1", "backbone": "b", "success_rate": 1.0, "tokens_per_task": 300.0},
        {"suite": "c", "harness": "h2", "backbone": "b", "success_rate": 0.0, "tokens_per_task": 200.0},
        {"suite": "c", "harness": "h3", "backbone": "b", "success_rate": 0.0, "tokens_per_task": 20.0},
    ])
    wide = X.grid_table(runs)
    assert list(wide.columns) == ["a:success_rate", "a:tokens_per_task", "c:success_rate", "c:tokens_per_task"]
    assert wide.loc["h3", "c:tokens_per_task"] == 20.0
    best = X.best_per_suite(runs).set_index("suite")
    assert best.loc["a", "best"] == "h2"            # tie on success: fewer tokens wins
    assert best.loc["a", "cheapest"] == "h3" and best.loc["c", "best"] == "h1"


def test_open_run_trajectory_calls_diagnostics_anatomy(grid, tmp_path):
    rec = R.open_run(grid.set_index("harness").loc["react", "run_dir"])
    assert rec["summary"]["n_episodes"] == 2 and len(rec["finished"]) == 2
    steps = R.trajectory(rec)
    assert len(steps) > 0 and {"tool", "args", "observation", "directive", "capabilities"} <= set(steps.columns)
    assert isinstance(steps["args"].iloc[0], dict)
    calls = R.backbone_calls(rec)
    assert len(calls) > 0 and "messages" not in calls and (calls["backbone"] == "scripted:pick-first").all()
    assert len(R.backbone_calls(rec, -1, full=True)) >= len(calls)
    diag = R.diagnostics(rec)
    assert list(diag["status"]) == ["ok", "ok"] and R.diagnostics(rec, only_problems=True).empty
    (label, a), = R.harness_anatomies(rec).items()
    assert label.startswith("react (") and a.slots["A"].label
    with pytest.raises(ConfigError, match="not in"):
        R.trajectory(rec, 999)


def test_an_export_opens_like_a_run(grid, tmp_path):
    from jitlab.export import export_run
    export_run(grid.set_index("harness").loc["react", "run_dir"], tmp_path / "export")
    rec = R.open_run(tmp_path / "export")
    steps = R.trajectory(rec)          # an export keeps no observations or traces: empty columns, same table
    assert len(steps) > 0 and steps["observation"].isna().all() and isinstance(steps["args"].iloc[0], dict)
    calls = R.backbone_calls(rec)      # per-call aggregates, no messages
    assert len(calls) > 0 and (calls["backbone"] == "scripted:pick-first").all()


def test_harness_anatomies_skips_untrusted_code(grid, tmp_path):
    rec = R.open_run(grid.set_index("harness").loc["react", "run_dir"])
    sha = rec["finished"]["harness_sha"].iloc[0]
    copy = rec["run_dir"] / "harnesses" / sha           # as a JIT run stores what it ran
    shutil.copytree(X.repo_path("seed_bank/react"), copy)
    (_label, why), = R.harness_anatomies(rec).items()
    assert isinstance(why, str) and "trust_code=True" in why
    (_label, a), = R.harness_anatomies(rec, trust_code=True).items()
    assert a.folder == copy.resolve()


def test_register_figure_lists_files_and_numbers(tmp_path):
    (tmp_path / "anatomy").mkdir()
    (tmp_path / "anatomy" / "x.svg").write_text("<svg/>")
    (tmp_path / "t.csv").write_text("a\n1\n")
    R.register_figure(tmp_path, "anat", tmp_path / "anatomy", "Anatomy", "cmd one")
    R.register_figure(tmp_path, "t", [tmp_path / "t.csv"], "T", "cmd two", numbers=pd.DataFrame({"a": [0.5]}))
    index = json.loads((tmp_path / "figures.json").read_text())
    assert index["anat"]["files"] == ["anatomy/x.svg"] and index["t"]["files"] == ["t.csv"]
    readme = (tmp_path / "README.md").read_text()
    assert "cmd one" in readme and "| a |" in readme and "| 0.5 |" in readme
    cmd = X.notebook_command("notebooks/01_seed_bank.ipynb", {"limit": 2, "suites": ["toy"]})
    assert cmd.startswith("papermill notebooks/01_seed_bank.ipynb ") and '"suites": ["toy"]' in cmd


def test_jit_modes_summaries_and_jit_records(tmp_path):
    runs = X.run_jit_modes("toy", "compose", "scripted:pick-first", limit=1, n_candidates=1, out_root=tmp_path,
                           modes=["streaming"], retrieval="bm25")
    assert list(runs) == ["streaming"]
    assert runs["streaming"] == tmp_path / "toy" / "jit-compose-scripted_pick-first" / "streaming"
    summ = X.jit_summaries(runs)
    assert summ.loc[0, "mode"] == "streaming" and summ.loc[0, "n_episodes"] == 1
    assert summ.loc[0, "bank_size_after"] == summ.loc[0, "bank_size_before"] + 1
    rec = R.open_run(runs["streaming"])
    tasks = R.jit_tasks(rec)
    assert len(tasks) == 1 and tasks.loc[0, "gen_tokens"] > 0 and tasks.loc[0, "success"] in (0, 1)
    assert "harness/" in R.harness_diff(rec)                  # generated harness vs its nearest seed
    fixed = R.open_run(X.run_grid("toy", "react", "scripted:pick-first", 1, tmp_path / "f")["run_dir"][0])
    assert R.jit_tasks(fixed).empty and R.harness_diff(fixed) == ""
