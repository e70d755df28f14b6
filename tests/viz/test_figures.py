"""jitlab.viz.figures: tidy collection, the numbers behind each figure, files written, README with commands.

JIT runs here are TEST FIXTURES (tests/viz/dash/jit_runs_fixture.py, synthetic numbers); fixed runs are
real toy-suite runs with the scripted:pick-hash test-double backbone."""
import argparse
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "dash"))
from jit_runs_fixture import make_fixed_run, make_jit_run

from jitlab.errors import ConfigError
from jitlab.viz import figures as F


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    make_jit_run(root / "static", "static", n=12)
    make_jit_run(root / "streaming", "streaming", n=12)
    make_fixed_run(root / "react", limit=6)
    make_fixed_run(root / "random", harness="random", limit=6)
    return root


def test_collect_is_tidy(runs):
    df = F.collect([runs])
    assert len(df) == 12 + 12 + 6 + 6
    for col in F.RUN_COLUMNS + F.EXTRA_COLUMNS + ["success", "cost", "tool_calls", "tokens", "episode_harness"]:
        assert col in df.columns, col
    modes = df.groupby("run_name")["mode"].first().to_dict()
    assert modes == {"static": "static", "streaming": "streaming", "react": "fixed", "random": "fixed"}
    methods = df.groupby("run_name")["method"].first().to_dict()
    assert methods["streaming"] == "jit-streaming" and methods["react"] == "react"
    s = df[df["run_name"] == "streaming"]
    assert sorted(s["stream_index"]) == list(range(12)) and isinstance(s["frontier"].iloc[0], list)
    assert (df[df["run_name"] == "react"]["stream_index"].tolist() == list(range(6)))
    with pytest.raises(ConfigError, match="neither a run directory"):
        F.collect([runs / "nope"])


def test_expand_runs_finds_nested_run_directories(tmp_path):
    for rel in ("tw/react-embedded", "tw/jit-compose-embedded/static", "tw/jit-compose-embedded/streaming"):
        (tmp_path / rel).mkdir(parents=True)
        (tmp_path / rel / "run.sqlite").touch()
    found = [p.relative_to(tmp_path).as_posix() for p in F.expand_runs(tmp_path)]
    assert found == ["tw/jit-compose-embedded/static", "tw/jit-compose-embedded/streaming", "tw/react-embedded"]
    assert F.expand_runs(tmp_path / "tw" / "react-embedded") == [tmp_path / "tw" / "react-embedded"]


def test_stream_curves_numbers(runs):
    df = F.collect([runs / "streaming"])
    c = F.stream_curves(df, window=3)
    succ = df.sort_values("stream_index")["success"].to_numpy()
    assert c["cum_accuracy"].tolist() == pytest.approx([succ[: i + 1].mean() for i in range(len(succ))])
    cost = df.sort_values("stream_index")["cost"]
    assert c["cost_mean"].iloc[5] == pytest.approx(cost.iloc[3:6].mean())
    assert c["cost_std"].iloc[5] == pytest.approx(cost.iloc[3:6].std())
    fa = F.final_accuracy(df)
    assert fa["final_accuracy"].iloc[0] == pytest.approx(succ.mean()) and fa["n_tasks"].iloc[0] == 12


def test_pareto_frontier_and_gain():
    p = pd.DataFrame({"method": list("abcde"), "cost_per_case": [1.0, 2.0, 2.0, 3.0, 0.5],
                      "score": [0.5, 0.4, 0.7, 0.7, 0.1]})
    front = F.pareto_frontier(p)
    assert front["method"].tolist() == ["e", "a", "c"]          # b dominated by a, d by c (same score, dearer)
    xs, ys = F._staircase(front, 4.0)
    assert xs == [0.5, 1.0, 1.0, 2.0, 2.0, 4.0] and ys == [0.1, 0.1, 0.5, 0.5, 0.7, 0.7]
    df = pd.DataFrame({"suite": "s", "backbone": ["m"] * 4 + ["n"] * 2, "run": "r",
                       "method": ["react", "react", "jit-streaming", "jit-streaming", "react", "react"],
                       "success": [1.0, 0.0, 1.0, 1.0, 0.0, 0.0], "cost": 1.0, "tokens": 1.0, "tool_calls": 1.0})
    g = F.jit_gain(df)
    assert g[["backbone", "jit", "baseline_score", "jit_score", "gain"]].values.tolist() == \
        [["m", "jit-streaming", 0.5, 1.0, 0.5]]                  # backbone n has no JIT run: left out


def test_thirteen_seeds_and_jit_get_distinct_colours():
    methods = [f"seed{i}" for i in range(13)] + ["jit-static", "jit-streaming"]
    assert len(set(F._colors(methods).values())) == len(methods)


def test_make_figures_writes_files_and_readme(runs, tmp_path):
    out = tmp_path / "figs"
    from jitlab.cli.viz import add_viz_commands
    parser = argparse.ArgumentParser()
    add_viz_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["figures", "--runs", str(runs), "--out", str(out)])
    assert args.func(args) == 0
    stems = {"fig6_stream_toy", "fig4_pareto_toy", "fig5_jit_gain_toy"}
    for stem in stems:
        for ext in ("png", "pdf", "html"):
            path = out / f"{stem}.{ext}"
            assert path.stat().st_size > 5000, path
        assert (out / f"{stem}.png").read_bytes()[:4] == b"\x89PNG"
        assert (out / f"{stem}.pdf").read_bytes()[:4] == b"%PDF"
        assert "Bokeh" in (out / f"{stem}.html").read_text()
    table = (out / "table_seed_bank.md").read_text()
    assert "| random |" in table and "| react |" in table
    readme = (out / "README.md").read_text()
    command = f"jitlab figures --runs {runs} --out {out}"
    assert readme.count(command) == 5                              # each figure, the table and the case studies list it
    assert "[case_studies/turnstile.svg](case_studies/turnstile.svg)" in readme
    assert sorted(p.name for p in (out / "case_studies").iterdir()) == [f"{n}.svg" for n in (
        "gearbox", "origami", "palimpsest", "pegboard", "trapdoor", "turnstile")]
    for stem in stems:
        assert f"[{stem}.png]({stem}.png)" in readme
    # the closing note carries the Figure 6 numbers, equal to the records'
    df = F.collect([runs])
    acc = {m: df[df["mode"] == m]["success"].mean() for m in ("static", "streaming")}
    assert f"| toy | scripted:pick-hash | {acc['static']:.3f} | {acc['streaming']:.3f} | 12 / 12 |" in readme
    index = json.loads((out / "figures.json").read_text())
    assert set(index) == stems | {"table_seed_bank", "case_studies"}
    # entries of other producers survive a rerun; entries whose files vanished are dropped
    (out / "extra.svg").write_text("<svg/>")
    F.register(out, [{"stem": "anatomy_react", "files": ["extra.svg"], "title": "anatomy", "command": "x"}])
    (out / "table_seed_bank.md").unlink()
    (out / "table_seed_bank.csv").unlink()
    F.make_figures([runs / "static", runs / "streaming"], out, formats=("png",))
    index = json.loads((out / "figures.json").read_text())
    assert "anatomy_react" in index and "table_seed_bank" not in index
    assert "## anatomy" in (out / "README.md").read_text()


def test_no_jit_runs_means_no_stream_figure(runs, tmp_path):
    entries = F.make_figures([runs / "react"], tmp_path, formats=("png",))
    assert [e["stem"] for e in entries] == ["fig4_pareto_toy", "table_seed_bank", "case_studies"]
    with pytest.raises(ConfigError, match="no backbone has both"):
        F.fig_jit_gain(F.collect([runs / "react"]))


def test_the_seed_bank_table_keeps_runs_of_other_settings_apart(runs, tmp_path):
    """Issue 27 item 17: ``jitlab figures --runs results/`` averaged every react/embedded/textworld run of every
    export (dev and test splits, engineer batches, pipeline baselines) into one seed-bank cell; runs whose settings
    differ now get a row each, and a set of runs with one settings keeps the table as it was."""
    from jitlab.runner import RunConfig, run
    test_run = run(RunConfig(suite="toy", harness="react", backbone="scripted:pick-hash", split="test", limit=3,
                             out=str(tmp_path / "react-test"), quiet=True))
    one = F.seed_bank_table(F.collect([runs / "react", runs / "random"]))
    assert "settings" not in one and len(one) == 2
    both = F.seed_bank_table(F.collect([runs / "react", test_run]))
    assert list(both["harness"]) == ["react", "react"] and both.columns[0] == "settings"
    assert sorted(s.split()[0] for s in both["settings"]) == ["split=dev", "split=test"]
    alone = F.seed_bank_table(F.collect([test_run]))
    assert both.loc[both["settings"].str.startswith("split=test"), "toy:score"].item() == alone["toy:score"].item()


def test_jit_runs_of_different_generators_stay_two_points_in_the_comparison_view(tmp_path):
    """Issue 27 item 17: ``jitlab dash runs/jit-compose runs/jit-plan`` (two streaming runs, same backbone, different
    generators) drew one Pareto point and one table row ``jit-streaming``; each generator is now its own."""
    from jitlab.viz.dash.compare_view import CompareApp
    a = make_jit_run(tmp_path / "compose", "streaming", n=4)
    b = make_jit_run(tmp_path / "plan", "streaming", n=4, generator="plan:embedded")
    app = CompareApp([a, b])
    points = F.pairings(app.df)
    assert sorted(points["method"]) == ["jit-streaming · compose", "jit-streaming · plan:embedded"]
    assert list(points["n"]) == [4, 4]
    assert set(F.pairings(F.collect([a]))["method"]) == {"jit-streaming"}   # one generator: the name is unchanged


def test_a_suite_whose_runs_span_two_splits_gets_figures_per_split(runs, tmp_path):
    """Issue 29: `jitlab figures --runs results/small-model-jit` pooled the TextWorld test and holdout streams into
    one Figure 4 point (30/36 and 28/36 drawn as 58/72); each split now has its own figures."""
    from jitlab.runner import RunConfig, run
    test_run = run(RunConfig(suite="toy", harness="react", backbone="scripted:pick-hash", split="test", limit=3,
                             out=str(tmp_path / "react-test"), quiet=True))
    entries = F.make_figures([runs / "react", test_run], tmp_path / "figs", formats=("png",))
    stems = [e["stem"] for e in entries]
    assert "fig4_pareto_toy-dev" in stems and "fig4_pareto_toy-test" in stems and "fig4_pareto_toy" not in stems
    numbers = {e["stem"]: e.get("numbers") for e in entries}
    n_dev = len(F.collect([runs / "react"]))
    assert f"| react | scripted:pick-hash | {n_dev} |" in numbers["fig4_pareto_toy-dev"]
    assert "| react | scripted:pick-hash | 3 |" in numbers["fig4_pareto_toy-test"]
