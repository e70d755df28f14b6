"""The quickstart notebook runs headless with papermill in smoke mode and writes its records and plot."""
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_quickstart_smoke(tmp_path):
    papermill = pytest.importorskip("papermill")
    out = tmp_path / "run"
    papermill.execute_notebook(str(REPO / "notebooks" / "00_quickstart.ipynb"), str(tmp_path / "out.ipynb"),
                               parameters={"smoke": True, "out": str(out), "suite": "textworld"},
                               kernel_name="python3", cwd=str(REPO))
    import nbformat
    nb = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4)
    mimes = [m for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) for m in o.get("data", {})]
    assert "application/vnd.jupyter.widget-view+json" in mimes      # the run's progress widget (tqdm.auto)
    assert "application/vnd.holoviews_exec.v0+json" in mimes        # the hvplot bars
    assert "live dashboard: run `jitlab dash --live" in "".join(o.get("text", "") for c in nb.cells
                                                                 if c.cell_type == "code" for o in c.outputs)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_episodes"] == 2 and summary["backbone"] == "scripted:pick-hash"
    assert (out / "run.sqlite").exists() and (out / "quickstart.png").stat().st_size > 5000
