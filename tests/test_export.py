"""jitlab.export: a compact export of a real toy run and a real toy JIT run (scripted test-double backbones) loads
back into the same DataFrames as the run directories, so the figures' data, tables and summaries are regenerated
exactly from ``results/``; no prompt or reply is kept."""
import json
import shutil

import pandas as pd
import pytest

from jitlab.errors import ConfigError, StorageError
from jitlab.export import export_runs
from jitlab.store import load
from jitlab.viz import figures as F


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from jitlab.jit.inference import JITConfig, run_jit
    from jitlab.runner import RunConfig, run
    from jitlab.sandbox import probe
    root = tmp_path_factory.mktemp("runs")
    run(RunConfig(suite="toy", harness="react", backbone="scripted:pick-hash", limit=3, out=str(root / "react"),
                  quiet=True, cache=False))
    run(RunConfig(suite="toy", harness="random", backbone="scripted:pick-hash", limit=3, out=str(root / "random"),
                  quiet=True, cache=False))
    run_jit(JITConfig(suite="toy", mode="streaming", backbone="scripted:pick-hash", limit=3, retrieval="bm25",
                      cache=False, smoke_steps=2, quiet=True, allow_unisolated=not probe()[0],
                      out=str(root / "jit" / "streaming")))
    return root


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("results") / "demo"
    written = export_runs([runs], out)
    assert sorted(str(p.relative_to(out)) for p in written) == ["jit/streaming", "random", "react"]
    return out


def test_export_loads_back_the_same_episodes_and_summary(runs, exported):
    for name in ("react", "jit/streaming"):
        a, b = load(runs / name), load(exported / name)
        pd.testing.assert_frame_equal(a["episodes"], b["episodes"])
        pd.testing.assert_frame_equal(a["config"], b["config"])
        assert a["meta"] == b["meta"]
        summary = lambda root, name=name: json.loads((root / name / "summary.json").read_text())
        assert summary(runs) == summary(exported)
        # per-call aggregates: every call and token counted, no prompt or reply text kept
        calls = b["calls"]
        assert "messages" not in calls and "text" not in calls
        assert calls["n_calls"].sum() == len(a["calls"]) and calls["prompt_tokens"].sum() == a["calls"]["prompt_tokens"].sum()
        assert set(b["steps"].columns) == {"episode_id", "step", "tool", "args", "reward", "done", "tokens",
                                            "compliance"}  # issue 26 item 6: the per-step compliance record
        assert len(b["steps"]) == len(a["steps"])
    text = "".join(p.read_text() for p in exported.rglob("*.csv"))
    assert not any(m["content"][:60] in text for m in json.loads(load(runs / "react")["calls"]["messages"][0]))


def test_prefix_reuse_is_reported_per_run_and_the_export_gives_the_same(runs, exported):
    """summary.json ``prefix_reuse``: the scripted doubles count no tokens, so their score calls are left out of the
    shares (reused_tokens NULL) and counted as unmeasured; the export's per-call aggregates keep that apart."""
    from jitlab.store import summarize
    assert summarize(runs / "random", write=False)["prefix_reuse"] is None    # no backbone call
    for name in ("react", "jit/streaming"):
        calls = load(runs / name)["calls"]
        reuse = summarize(runs / name, write=False)["prefix_reuse"]
        assert reuse == summarize(exported / name, write=False)["prefix_reuse"]
        assert reuse == json.loads((exported / name / "summary.json").read_text()).get("prefix_reuse", reuse)
        score = calls["kind"] == "score"
        assert reuse["unmeasured_calls"] == score.sum() and calls.loc[score, "reused_tokens"].isna().all()
        assert reuse["calls"] == (~score).sum() and reuse["prompt_tokens"] == calls.loc[~score, "prompt_tokens"].sum()
    assert json.loads((runs / "jit/streaming" / "summary.json").read_text())["prefix_reuse"]["unmeasured_calls"] > 0


def test_figures_data_is_regenerated_exactly_from_the_export(runs, exported):
    a, b = F.collect([runs]), F.collect([exported])
    assert len(a) == 9 and set(a["mode"]) == {"fixed", "streaming"}
    pd.testing.assert_frame_equal(a.drop(columns="run"), b.drop(columns="run"))
    for table in (F.final_accuracy, F.pairings, lambda df: F.seed_bank_table(df, with_anatomy=False),
                  lambda df: F.stream_curves(df, window=2)):
        left, right = (table(df).drop(columns="run", errors="ignore").reset_index(drop=True) for df in (a, b))
        pd.testing.assert_frame_equal(left, right)


def test_export_of_a_wrong_folder_or_a_damaged_export_is_one_clear_error(runs, exported, tmp_path):
    with pytest.raises(ConfigError, match="neither a run directory"):
        export_runs([tmp_path], tmp_path / "out")
    damaged = tmp_path / "damaged"
    shutil.copytree(exported / "react", damaged)
    (damaged / "episodes.csv").unlink()
    with pytest.raises(StorageError, match="not a readable jitlab export"):
        load(damaged)
    info = json.loads((damaged / "run.json").read_text())
    (damaged / "run.json").write_text(json.dumps({**info, "format": "jitlab-export/99"}))
    with pytest.raises(ConfigError, match="re-export"):
        load(damaged)


def test_cli_export_then_figures_from_results(runs, tmp_path, capsys):
    from jitlab.cli import main
    assert main(["export", str(runs / "react"), str(runs / "random"), "--out", str(tmp_path / "results")]) == 0
    assert "2 run(s)" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["random", "react"]
    assert [str(p) for p in F.expand_runs([tmp_path / "results"])] == [str(tmp_path / "results" / n)
                                                                      for n in ("random", "react")]
    assert main(["export", str(tmp_path / "nothing"), "--out", str(tmp_path / "r2")]) == 2
