"""Dashboards without a browser: what each panel shows at a stream position, live refresh, comparison.

JIT runs are TEST FIXTURES (jit_runs_fixture.py, synthetic numbers); the fixed run is a real toy run
with the scripted:pick-hash test-double backbone."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from jit_runs_fixture import make_fixed_run, make_jit_run

pytest.importorskip("panel")
from bokeh.document import Document

import jitlab.viz.dash
from jitlab.viz.dash import data as D
from jitlab.viz.dash.compare_view import CompareApp
from jitlab.viz.dash.replay_view import PLOTS, ReplayApp


def _figures(model) -> int:
    from bokeh.models import Plot
    return len(list(model.select({"type": Plot})))


def test_data_at_a_position(tmp_path):
    run = make_jit_run(tmp_path / "s", "streaming", n=10)
    df = D.load_run(run)
    assert df["position"].tolist() == list(range(10))
    for pos in (0, 4, 9):
        assert D.frontier_at(df, pos) == df.loc[pos, "frontier"]
        pts = D.harness_points(df, pos)
        assert pts["n"].sum() == pos + 1
        assert set(pts[pts["on_frontier"]]["harness_sha"]) <= set(D.frontier_at(df, pos))
    row = D.at_position(df, 3)
    folder = D.harness_folder(run, row)
    assert folder == run / row["harness_dir"]
    where, ref = D.reference_files(run, row["nearest_reference"])
    assert where == str(run / "harnesses" / row["nearest_reference"])
    diff = D.harness_diff(folder, ref)
    assert "+  Fixture variant streaming-3: check the goal first." in diff and "--- reference/prompt.yaml" in diff
    assert D.harness_diff(ref, ref) == ""
    # a reference only the run's bank holds is read from bank.sqlite
    import json
    import shutil
    import sqlite3
    shutil.rmtree(run / "harnesses" / row["nearest_reference"])
    db = sqlite3.connect(run / "bank.sqlite")
    db.execute("CREATE TABLE harnesses (sha TEXT, files TEXT)")
    db.execute("INSERT INTO harnesses VALUES (?, ?)", ("f" * 64, json.dumps({"prompt.yaml": "old\n"})))
    db.commit()
    db.close()
    where, ref = D.reference_files(run, "f" * 64)
    assert where.endswith("(bank entry)") and "-old" in D.harness_diff(folder, ref)
    assert D.reference_files(run, "0" * 64) is None


def test_replay_panels_follow_the_player(tmp_path):
    run = make_jit_run(tmp_path / "s", "streaming", n=8)
    app = ReplayApp(run)
    root = app.view().get_root(Document())
    assert _figures(root) == PLOTS == 4
    acc = app._accuracy(5)
    assert "after 6 tasks" in acc.opts.get().kwargs["title"]
    assert len(acc.Curve.I.data) == 6
    assert len(app._per_task(2, "cost", "cost ($)").Curve.I.data) == 3
    assert "**task 5** `toy-dev-5`" in app._info(5).object
    md = [o.object for o in app._harness(5).objects if hasattr(o, "object") and isinstance(o.object, str)]
    assert any("trust-harness-code" in m for m in md), "generated harness code is not imported by default"
    assert any("Fixture variant streaming-5" in m for m in md)


def test_replay_of_a_fixed_run_draws_the_seed_anatomy(tmp_path):
    pytest.importorskip("jitlab.viz.anatomy")
    run = make_fixed_run(tmp_path / "react", limit=3)
    app = ReplayApp(run)
    parts = app._harness(1).objects
    assert any(type(p).__name__ == "SVG" and "<svg" in p.object for p in parts)
    assert "Pareto frontier of harnesses so far" in app._frontier(2).opts.get().kwargs["title"]


def test_live_mode_picks_up_new_tasks(tmp_path):
    run = make_jit_run(tmp_path / "live", "streaming", n=5, running=1)    # task 4 still running
    app = ReplayApp(run, live=True, poll_s=0.1)
    app.view()
    assert len(app.df) == 4 and app.counts == {"ok": 4, "running": 1}
    app.player.value = 3                                                  # sitting at the end: follows
    assert app.refresh() is False                                         # nothing changed yet
    make_jit_run(tmp_path / "live", "streaming", n=3, start=5)            # the run writes on (task 4 interrupted)
    assert app.refresh() is True and app.version == 1
    assert len(app.df) == 7 and app.player.end == 6 and app.player.value == 6


def test_compare_and_app(tmp_path):
    make_jit_run(tmp_path / "runs" / "static", "static", n=6)
    make_jit_run(tmp_path / "runs" / "streaming", "streaming", n=6)
    make_fixed_run(tmp_path / "runs" / "react", limit=4)
    app = CompareApp([tmp_path / "runs"])
    root = app.view().get_root(Document())
    assert _figures(root) == 5                                            # 4 metrics + Pareto
    overlay = app._metric("tool_calls", "tool calls per task")
    assert len(overlay) == 3
    tabs = jitlab.viz.dash.app([tmp_path / "runs"])
    assert [t.name for t in tabs] == ["compare", "replay react", "replay static", "replay streaming"]


def test_live_mode_from_an_empty_run(tmp_path):
    run = make_jit_run(tmp_path / "live", "static", n=1, running=1)        # nothing finished yet
    app = ReplayApp(run, live=True)
    root = app.view().get_root(Document())
    assert _figures(root) == PLOTS and app.df.empty
    assert "no finished task yet" in app._accuracy(0).opts.get().kwargs["title"]
    assert "No finished task yet" in app._info(0).object
    make_jit_run(tmp_path / "live", "static", n=4, start=1)
    assert app.refresh() and len(app.df) == 4 and app.player.value == 3
    assert "after 4 tasks" in app._accuracy(app.player.value).opts.get().kwargs["title"]


def test_a_corrupt_run_shows_its_error_in_the_page(tmp_path, capsys):
    make_fixed_run(tmp_path / "runs" / "react", limit=2)
    make_jit_run(tmp_path / "runs" / "static", "static", n=3)
    db = tmp_path / "runs" / "react" / "run.sqlite"
    db.write_bytes(b"not SQLite at all" * 100)
    page = jitlab.viz.dash.app([tmp_path / "runs" / "react"])                  # one run: the error is the page
    assert str(db) in page.object and "corrupt" in page.object and "--new-run" in page.object
    assert str(db) in capsys.readouterr().err
    tabs = jitlab.viz.dash.app([tmp_path / "runs"])                             # several: the others still show
    replay_react = dict(zip([t.name for t in tabs], tabs))["replay react"]
    assert str(db) in replay_react.object
    assert _figures(dict(zip([t.name for t in tabs], tabs))["replay static"].get_root(Document())) == PLOTS
