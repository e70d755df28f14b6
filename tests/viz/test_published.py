"""jitlab.viz.published: the committed exports behind the published rows, what the figure notebooks draw by default.

The numbers asserted are docs/measurements.md's (section "Issue 29's rows in one place" and "Full step budgets")."""
import pytest

from jitlab.errors import ConfigError
from jitlab.viz import figures as F
from jitlab.viz import published as P


def test_every_published_row_names_exports_that_exist():
    for row in P.ROWS:
        assert row.figures <= set(P.FIGURES), row
        assert [p.name for p in P.exports(row)] == [e.split("/")[-1] for e in row.exports]


@pytest.fixture(scope="module")
def fig4():
    return P.collect("fig4")


def test_the_figure_4_rows_read_back_with_their_k_over_n(fig4):
    table = P.table(fig4)
    cell = {(r.suite, r.row): r.success for r in table.itertuples()}
    assert cell[("textworld", "streaming JIT (the bank as evidence)")] == "0.83 (30/36; 0.68–0.92)"
    assert cell[("textworld", "ReAct")] == "0.28 (10/36; 0.16–0.44)"
    # BabyAI's ReAct joins two exports; the task that ran in both (GoToObjDoor-2002) counts once: 2/35
    assert cell[("babyai", "ReAct (two exports: tasks 1-11, 12-35)")] == "0.06 (2/35; 0.02–0.19)"
    assert cell[("dbbench", "streaming JIT (evident roles kept)")] == "0.38 (19/50; 0.26–0.52)"
    assert set(table["split"]) == {"test"} and all(e.startswith(("small-model", "full-budget")) for e in table["exports"])
    # one pairing per row: no two rows of a suite share (method, backbone)
    assert len(F.pairings(fig4)) == len(table) == 18


def test_figure_5_pairs_each_suite_s_jit_with_its_react(fig4):
    gains = F.jit_gain(fig4)
    streaming = gains[gains["jit"] == "jit-streaming"].set_index("suite")
    assert streaming.loc["babyai", "gain"] == pytest.approx(27 / 35 - 2 / 35)
    assert streaming.loc["textworld", "n_jit"] == 36 and set(streaming["backbone"]) == {"embedded"}   # no control


def test_figure_6_streams_and_the_seed_rows():
    streams = P.run_dirs("fig6")
    assert list(streams) == ["textworld", "babyai", "dbbench"]
    assert all(sorted(modes) == ["static", "streaming"] for modes in streams.values())
    seeds = P.summaries("seeds")
    assert list(seeds["harness"]) == ["react", "aorchestra", "react", "agentfold", "react"]
    assert list(seeds["n_episodes"]) == [10] * 5 and list(seeds["success_rate"]) == [0.2, 0.3, 0.1, 0.0, 0.0]


def test_a_figure_set_or_suite_without_rows_is_refused():
    with pytest.raises(ConfigError, match="unknown figure set"):
        P.rows("fig9")
    with pytest.raises(ConfigError, match="no published fig6 rows for suite 'toy'"):
        P.rows("fig6", "toy")
    joined = next(r for r in P.ROWS if len(r.exports) > 1)
    with pytest.raises(ConfigError, match="joins 2 exports"):
        P.run_dirs("fig4", joined.suite)


def _dims(fig, name):
    """The range of dimension ``name`` anywhere in a HoloViews object."""
    ranges = set()
    for el in fig.traverse(lambda e: e, [lambda e: hasattr(e, "dimensions")]):
        for d in el.dimensions():
            if d.name == name and d.range != (None, None):
                ranges.add(tuple(d.range))
    return ranges


def test_the_figures_label_k_over_n_and_run_success_axes_0_to_1(fig4):
    pytest.importorskip("holoviews")
    tw = fig4[fig4["suite"] == "textworld"]
    pareto = F.fig_pareto(tw, title="textworld")
    labels = {el.label for el in pareto.traverse(lambda e: e) if getattr(el, "label", "")}
    assert "explorer_margin · embedded · 34/36 (0.82–0.98)" in labels
    assert _dims(pareto, "score") == {(0, 1)}
    gain = F.fig_jit_gain(fig4)
    keys = set(gain.traverse(lambda e: e)[1].data["bar"])
    assert "babyai · embedded · react · 2/35 (0.02–0.19)" in keys and _dims(gain, "score") == {(0, 1)}
    stream = F.per_suite(F.fig_stream, P.collect("fig6", "babyai"), cols=3)
    labels = {el.label for el in stream.traverse(lambda e: e) if getattr(el, "label", "")}
    assert "embedded · static · 5/13 (0.18–0.64)" in labels
    assert _dims(stream, "cumulative accuracy") == {(0, 1)}
    assert len(F.per_suite(F.fig_pareto, fig4)) == 3        # one panel per suite, never pooled
