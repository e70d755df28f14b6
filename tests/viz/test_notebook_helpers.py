"""jitlab/viz/notebook.py on real run records (toy suite, `scripted:*` test doubles, not models): Figure 4 linked to
its table of pairings, hover and legend toggles on the bokeh plots, the run pickers."""
from pathlib import Path

import pytest

from jitlab.runner import RunConfig, run

pytest.importorskip("panel")
pytest.importorskip("ipywidgets")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    dirs = [run(RunConfig(suite="toy", harness=h, backbone=b, limit=2, out=str(root / "toy" / f"{h}-{b[-4:]}"),
                          quiet=True, cache=False))
            for h in ("react", "gam") for b in ("scripted:pick-hash", "scripted:pick-first")]
    return root, dirs


def test_figure_4_points_select_their_rows_in_the_table(runs):
    import holoviews as hv

    from jitlab.viz import figures as F
    from jitlab.viz import notebook as V
    df = F.collect(runs[1])
    column = V.pareto_explorer(df, title="toy")
    table = column[1]
    assert sorted(table.value["method"]) == ["gam", "gam", "react", "react"]
    assert table.selection == []
    column.selection.event(index=[0, 2])          # what a tap / box-select on the plot sends
    assert table.selection == [0, 2]
    model = hv.render(column[0].object, backend="bokeh")
    hover = [t for t in model.tools if type(t).__name__ == "HoverTool"]
    fields = {label for t in hover for label, _ in (t.tooltips or [])}
    assert {"method", "backbone", "n", "tokens_per_case"} <= fields, fields
    assert model.legend[0].click_policy == "hide"


def test_interactive_adds_hover_and_legend_toggles(runs):
    import holoviews as hv

    from jitlab.viz import figures as F
    from jitlab.viz import notebook as V
    grid = hv.render(V.interactive(F.fig_stream(F.collect(runs[1]))), backend="bokeh")   # a layout of 3 plots
    figures = [child[0] for child in grid.children]
    assert len(figures) == 3
    assert all(any(type(t).__name__ == "HoverTool" for t in fig.tools) for fig in figures)
    assert figures[0].legend[0].click_policy == "hide"     # the panel with the legend (the others hide theirs)


def test_pickers_list_the_runs_under_a_folder(runs, tmp_path):
    from jitlab.errors import ConfigError
    from jitlab.viz import notebook as V
    root, dirs = runs
    assert sorted(V.list_runs(root)) == sorted(str(d) for d in dirs)
    picker = V.run_picker(root, dirs[1])
    assert picker.value == str(Path(dirs[1]).resolve()) and len(picker.options) == 4
    assert {label for label, _ in picker.options} == {f"toy/{Path(d).name}" for d in dirs}
    chooser = V.runs_chooser(root, selected=dirs[:2])
    assert chooser.value == tuple(str(Path(d).resolve()) for d in dirs[:2]) and len(chooser.options) == 4
    with pytest.raises(ConfigError, match="no run directories under"):
        V.run_picker(tmp_path / "empty")


def test_step_lines_draw_a_line_and_points_per_curve():
    """The training-curve helper notebooks 02 and 04 use: one line and its points per ``by`` value."""
    import holoviews as hv
    import pandas as pd

    from jitlab.viz import notebook as V
    df = pd.DataFrame({"step": [1, 2, 1], "value": [0.5, 0.4, 0.9], "tag": ["loss", "loss", "reward"]})
    plot = V.step_lines(df, "tag", "curves", ylabel="value")
    assert isinstance(plot, hv.Overlay)
    kinds = sorted(type(el).__name__ for el in plot.traverse(lambda el: el, [hv.Curve, hv.Scatter]))
    assert kinds == ["Curve", "Curve", "Scatter", "Scatter"]
    assert hv.render(plot, backend="bokeh").title.text == "curves"
