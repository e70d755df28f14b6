"""The training notebooks (02 Stage I, 03 Stage II, 04 Stage III) run headless with papermill in smoke mode (toy suite,
scripted executors as test doubles, one optimizer step per phase on the embedded SmolLM2-135M) and show numbers read
back from the records the library wrote; ``jitlab batch`` accepts their parameters.

    .venv/bin/pytest tests/notebooks/test_train_notebooks.py -q -m slow
"""
import json
from pathlib import Path

import pytest
from test_notebooks import _execute as execute_notebook
from test_notebooks import _outputs

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = ["02_stage1_customization.ipynb", "03_stage2_repair.ipynb", "04_stage3_evo_gdpo.ipynb"]


def _execute(name: str, tmp_path: Path, **parameters):
    """test_notebooks._execute, skipped when the embedded model (the student) is not installed."""
    from jitlab.errors import ModelPackageMissing
    from jitlab.llm.hf import embedded_gguf_path
    try:
        embedded_gguf_path()
    except ModelPackageMissing as exc:
        pytest.skip(str(exc))
    return execute_notebook(name, tmp_path, **parameters)


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def test_batch_accepts_the_training_notebooks_parameters():
    pytest.importorskip("papermill")
    from jitlab.batch import check_parameters, load_grid
    from jitlab.errors import ConfigError
    for name in NOTEBOOKS:
        path = REPO / "notebooks" / name
        check_parameters(path, [{"smoke": True, "out_root": "x", "suite": "toy", "threads": 1}],
                         {"max_cost": 0.5, "max_tokens_total": 1000})
        check_parameters(path, load_grid(REPO / "notebooks" / "grids" / "train_pipeline.yaml"))   # the pipeline's run
        with pytest.raises(ConfigError, match="not in the parameters cell"):
            check_parameters(path, [{"smoke": True, "no_such_parameter": 1}])


@pytest.mark.slow
def test_02_stage1_smoke(tmp_path):
    out = tmp_path / "p"
    nb = _execute("02_stage1_customization.ipynb", tmp_path, smoke=True, out_root=str(out))
    data = _json(out / "data1" / "manifest.json")
    assert data["counts"]["sft"] >= 1 and data["counts"]["pairs"] >= 1
    stage1 = _json(out / "stage1" / "manifest.json")
    assert [stage1["phases"][p]["global_step"] for p in ("sft", "dpo")] == [1, 1]
    assert list((out / "stage1" / "sft" / "runs").rglob("events.out.tfevents.*"))
    for policy in ("base", "stage1"):
        summary = _json(out / "validity" / policy / "summary.json")
        assert summary["n"] == 1 and summary["parse_rate"] in (0.0, 1.0), policy
    assert _json(out / "validity" / "stage1" / "summary.json")["backbone"] == f"hf:{out / 'stage1' / 'adapter'}"
    steps = _json(out / "pipeline.json")["steps"]
    assert all(steps[s]["status"] == "done" for s in ("baselines", "data1", "stage1", "validity"))
    html = "\n".join(_outputs(nb, "text/html"))
    assert "first_try_valid_rate" in html and "parse_rate" in html           # the before/after table
    assert "reward_differs" in html                                          # the DPO pairs' rewards
    assert len(_outputs(nb, "application/vnd.holoviews_exec.v0+json")) >= 3  # teacher plans, loss curves, bars
    # the same run shown from its pipeline config (the config it recorded, as YAML): every step is skipped
    import yaml
    (tmp_path / "pipeline.yaml").write_text(yaml.safe_dump(_json(out / "pipeline.json")["config"]))
    again = _execute("02_stage1_customization.ipynb", tmp_path, pipeline_config=str(tmp_path / "pipeline.yaml"),
                     out_root=str(out))
    printed = "".join(o.get("text", "") for c in again.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "running" not in printed and all(f"{s}: done" in printed for s in ("baselines", "data1", "stage1", "validity"))
    assert _json(out / "pipeline.json")["steps"] == steps


@pytest.mark.slow
def test_03_stage2_smoke(tmp_path):
    out = tmp_path / "p"
    nb = _execute("03_stage2_repair.ipynb", tmp_path, smoke=True, out_root=str(out))
    assert _json(out / "data2" / "manifest.json")["counts"]["examples"] >= 2
    stage2 = _json(out / "stage2" / "manifest.json")
    assert stage2["phases"]["sft"]["global_step"] == 1 and stage2["below"] == []   # no Stage I here: on the base
    after, before = _json(out / "stage2" / "eval" / "summary.json"), _json(out / "stage2" / "eval-before" / "summary.json")
    assert after["n"] == before["n"] == 1 and after["rounds"] == before["rounds"] == 1
    assert before["backbone"] == "embedded" and after["backbone"] == f"hf:{out / 'stage2' / 'adapter'}"
    html = "\n".join(_outputs(nb, "text/html"))
    assert "before" in html and "after" in html and "seen" in html       # before/after, by fault operator
    assert len(_outputs(nb, "application/vnd.holoviews_exec.v0+json")) >= 3  # operators, loss curve, repair bars


@pytest.mark.slow
def test_04_stage3_smoke(tmp_path):
    out = tmp_path / "p"
    nb = _execute("04_stage3_evo_gdpo.ipynb", tmp_path, smoke=True, out_root=str(out))
    stage3 = _json(out / "stage3" / "manifest.json")
    assert stage3["phases"]["grpo"]["global_step"] == 1 and stage3["summary"]["candidates"] == 2
    rows = [json.loads(line) for line in (out / "stage3" / "completions.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    assert sorted(p.name for p in (out / "validity").iterdir()) == ["base", "stage3"]
    html = "\n".join(_outputs(nb, "text/html"))
    assert "task_delta" in html and "first_try_valid_rate" in html and "nonzero_share" in html
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "No closing table: the pipeline's streaming step is not done" in printed
    assert len(_outputs(nb, "application/vnd.holoviews_exec.v0+json")) >= 2  # channels per step, before/after bars
