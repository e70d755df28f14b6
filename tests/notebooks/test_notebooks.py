"""Every notebook runs headless with papermill in smoke mode (scripted test doubles, tiny limits) and
writes the files it promises: run records, summary.json, figures, Table 2, anatomy SVGs.

    .venv/bin/pytest tests/notebooks/test_notebooks.py -q

Each test starts a kernel (cwd = repo root) whose outputs go under ``tmp_path``; the kernel inherits
the per-test JITLAB_HOME from tests/conftest.py, so generated games are shared and caches are not.
"""
import csv
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUITES = ["textworld", "babyai", "dbbench"]


def _execute(name: str, tmp_path: Path, **parameters):
    """Execute notebooks/<name> with ``parameters``; returns the executed notebook (nbformat)."""
    papermill = pytest.importorskip("papermill")
    import nbformat
    out = tmp_path / f"out-{name}"
    papermill.execute_notebook(str(REPO / "notebooks" / name), str(out), parameters=parameters,
                               kernel_name="python3", cwd=str(REPO), progress_bar=False)
    return nbformat.read(str(out), as_version=4)


def _outputs(nb, mime: str) -> list[str]:
    return [o["data"][mime] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if mime in o.get("data", {})]


def _rows(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _seeds() -> list[str]:
    from jitlab.experiments import seed_harnesses
    return seed_harnesses()


def test_notebooks_have_parameters_and_smoke():
    import nbformat
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(params) == 1, f"{path.name}: needs exactly one cell tagged 'parameters'"
        assert "smoke = False" in params[0].source, f"{path.name}: the parameters cell must define smoke = False"
        assert nb.cells[0].cell_type == "markdown", f"{path.name}: should open with a markdown cell"


def test_01_seed_bank_smoke(tmp_path):
    runs, figs = tmp_path / "runs", tmp_path / "figures"
    nb = _execute("01_seed_bank.ipynb", tmp_path, smoke=True, suites=SUITES, out_root=str(runs), figures_out=str(figs))
    seeds = _seeds()
    assert len(seeds) == 13 and "random" not in seeds

    # Table 2, derived from code: one row per seed, every slot filled
    table = _rows(figs / "table2_seed_bank.csv")
    assert [r["name"] for r in table] == seeds
    assert all(r[s] for r in table for s in "MPFA")
    assert "| name | M | P | F | A |" in (figs / "table2_seed_bank.md").read_text()

    # one anatomy diagram per seed, saved and drawn inline
    for name in seeds:
        svg = (figs / "anatomy" / f"{name}.svg").read_text()
        assert svg.lstrip().startswith("<svg") and len(svg) > 2000, name
    # and one per case-study harness (not seeds: no Table 2 row, no runs), in figures/case_studies/
    cases = sorted(p.stem for p in (figs / "case_studies").glob("*.svg"))
    assert cases == ["gearbox", "origami", "palimpsest", "pegboard", "trapdoor", "turnstile"]
    assert len(_outputs(nb, "image/svg+xml")) == 13 + 6
    readme = (figs / "README.md").read_text()
    assert "table2_seed_bank.csv" in readme and "anatomy/react.svg" in readme and "papermill" in readme
    assert "case_studies/turnstile.svg" in readme

    # 13 harnesses x 3 suites, one run directory each, with the scripted double recorded
    for suite in SUITES:
        for name in seeds:
            run_dir = runs / suite / f"{name}-scripted_pick-hash"
            summary = json.loads((run_dir / "summary.json").read_text())
            assert (run_dir / "run.sqlite").exists()
            assert summary["backbone"] == "scripted:pick-hash" and summary["n_episodes"] == 1, (suite, name)
            assert summary["suite"] == suite and summary["harness"] == name
            assert set(summary["status_counts"]) <= {"ok", "budget"}, (suite, name, summary["status_counts"])
            assert summary["tokens_per_task"] > 0, (suite, name)

    # the success/tokens table, harness x suite
    results = _rows(runs / "seed_bank_results.csv")
    assert [r["harness"] for r in results] == seeds
    assert {f"{s}:{m}" for s in SUITES for m in ("success_rate", "tokens_per_task")} <= set(results[0])


def test_08_inspect_a_run_smoke(tmp_path):
    runs = tmp_path / "runs"
    nb = _execute("08_inspect_a_run.ipynb", tmp_path, smoke=True, out_root=str(runs))
    run_dir = runs / "toy-plan_and_execute"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["n_episodes"] == 2 and summary["backbone"] == "scripted:pick-hash"
    html = "\n".join(_outputs(nb, "text/html"))
    assert "toy-dev-0" in html and ("go north" in html or "go east" in html)   # episodes, a trajectory
    assert "execute" in html                                                  # the backbone calls table
    assert "admissible" in html and "decided_by_model_reply" in html          # the compliance shares by step
    svgs = _outputs(nb, "image/svg+xml")
    assert len(svgs) == 1 and "RoadmapPlanner" in svgs[0]                     # anatomy of the harness that ran
    assert _outputs(nb, "application/vnd.jupyter.widget-view+json")           # the run picker
    assert _outputs(nb, "application/vnd.holoviews_exec.v0+json")             # the hvplot of the calls


def _figure_files(fig_dir: Path, stem: str) -> None:
    assert (fig_dir / f"{stem}.png").stat().st_size > 5000, stem
    assert (fig_dir / f"{stem}.pdf").stat().st_size > 1000, stem
    assert "bokeh" in (fig_dir / f"{stem}.html").read_text().lower(), stem


def test_05_static_vs_streaming_smoke(tmp_path):
    runs = tmp_path / "runs"
    nb = _execute("05_static_vs_streaming.ipynb", tmp_path, smoke=True, suite="toy", out_root=str(runs))
    root = runs / "toy" / "jit-compose-scripted_pick-hash"
    for mode in ("static", "streaming"):
        summary = json.loads((root / mode / "summary.json").read_text())
        assert summary["mode"] == mode and summary["n_episodes"] == 3 and summary["backbone"] == "scripted:pick-hash"
        assert summary["gen_tokens_per_task"] > 0 and summary["exec_tokens_per_task"] > 0
        assert (root / mode / "bank.sqlite").exists() and any((root / mode / "harnesses").iterdir())
    static = json.loads((root / "static" / "summary.json").read_text())
    assert static["bank_size_before"] == static["bank_size_after"]          # static never writes the bank

    figs = runs / "figures"                                                   # smoke: figures go next to the runs
    stem = "fig6_stream_toy-compose-scripted_pick-hash"
    _figure_files(figs, stem)
    readme = (figs / "README.md").read_text()
    assert stem in readme and "papermill notebooks/05_static_vs_streaming.ipynb" in readme
    assert "Closing note" in readme and "| toy | scripted:pick-hash |" in readme
    assert _outputs(nb, "application/vnd.holoviews_exec.v0+json") and not _outputs(nb, "image/png")   # shown interactive


def test_06_cost_performance_smoke(tmp_path):
    runs = tmp_path / "runs"
    nb = _execute("06_cost_performance.ipynb", tmp_path, smoke=True, suite="toy", out_root=str(runs))
    backbones = ["scripted_pick-hash", "scripted_pick-first"]
    for backbone in backbones:
        for harness in ("react", "plan_and_execute", "gam"):
            summary = json.loads((runs / "toy" / f"{harness}-{backbone}" / "summary.json").read_text())
            assert summary["n_episodes"] == 2 and summary["harness"] == harness
        for mode in ("static", "streaming"):
            summary = json.loads((runs / "toy" / f"jit-compose-{backbone}" / mode / "summary.json").read_text())
            assert summary["mode"] == mode and summary["n_episodes"] == 2

    figs = runs / "figures"
    _figure_files(figs, "fig4_pareto_toy")
    _figure_files(figs, "fig5_jit_gain_toy")
    index = json.loads((figs / "figures.json").read_text())
    pareto = index["fig4_pareto_toy"]["numbers"]
    assert len(pareto.splitlines()) == 2 + 5 * 2             # header + 5 methods x 2 backbones
    assert "True" in pareto                                  # something is on the frontier
    gain = index["fig5_jit_gain_toy"]["numbers"]
    assert "jit-static" in gain and "jit-streaming" in gain and "scripted:pick-first" in gain
    # shown interactive (hvplot scatter, Figure 4 linked to its table, Figure 5); the PNG/PDF are files only
    assert len(_outputs(nb, "application/vnd.holoviews_exec.v0+json")) >= 3
    assert not _outputs(nb, "image/png")
    assert _outputs(nb, "application/vnd.jupyter.widget-view+json")      # the runs chooser (and progress bars)


@pytest.mark.slow
def test_07_harness_engineer_smoke(tmp_path):
    # slow: two 1-step trainings and two model-engineer loops on the embedded model (~2-4 minutes on a loaded CPU)
    from jitlab.errors import ModelPackageMissing
    from jitlab.llm.hf import embedded_gguf_path
    from jitlab.sandbox import probe
    try:
        embedded_gguf_path()
    except ModelPackageMissing as exc:
        pytest.skip(str(exc))
    if not probe()[0]:
        pytest.skip("needs bubblewrap: patches run in the sandbox")
    runs = tmp_path / "runs"
    nb = _execute("07_harness_engineer.ipynb", tmp_path, smoke=True, out_root=str(runs))
    root = runs / "toy-react-scripted_pick-first"
    teacher = [json.loads(line) for line in (root / "loop-teacher" / "candidates.jsonl").read_text().splitlines()]
    assert len(teacher) == 2 and all(c["validation"]["ok"] for c in teacher)      # the K = 2 rule patches, scored
    assert json.loads((root / "data" / "manifest.json").read_text())["counts"]["packets"] == 1
    for phase in ("sft", "grpo"):
        assert (root / phase / phase / "adapter" / "DONE").is_file()
        assert list((root / phase / phase / "runs").rglob("events.out.tfevents.*")), phase
    assert len((root / "grpo" / "completions.jsonl").read_text().splitlines()) == 2
    deltas = _rows(root / "engineer_deltas.csv")
    assert [r["engineer"] for r in deltas] == ["teacher (rules)", "untrained", "trained"]
    assert deltas[2]["spec"].startswith("hf:") and int(deltas[2]["candidates"]) == 2
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "Reply with the whole hooks.py" in text                               # the packet, as the prompt
    assert len(_outputs(nb, "application/vnd.holoviews_exec.v0+json")) >= 2      # curves and the Δ bars, interactive


def test_09_one_vs_per_task_smoke(tmp_path):
    runs = tmp_path / "runs"
    nb = _execute("09_one_vs_per_task.ipynb", tmp_path, smoke=True, out_root=str(runs))
    table = runs / "figures" / "gap-mix_notebooks_grids_09_smoke_mix.yaml-scripted_pick-hash"
    rows = _rows(table / "rows.csv")
    assert [r["row"] for r in rows] == ["best single", "per-family oracle", "per-instance oracle", "streaming",
                                        "harness-only control"]
    assert {r["n_tasks"] for r in rows} == {"4"}                          # the smoke spec's 2 toy + 2 DBBench tasks
    families = {r["suite"] for r in _rows(table / "families.csv")}
    assert families == {"toy", "dbbench"}                                  # the mix's tasks by source suite
    assert "## Chosen on dev" in (table / "gap.md").read_text()
    assert "per-family oracle" in "\n".join(_outputs(nb, "text/markdown"))


# -- the default mode: the figure notebooks draw the published rows from results/ and run nothing -----------------
def _text(nb) -> str:
    return "\n".join(str(o.get("text", "")) + "".join(str(v) for v in o.get("data", {}).values())
                     for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def _default_run(name: str, tmp_path: Path, expect: list[str], **paths) -> None:
    """Execute ``name`` with its defaults (out_root, and ``paths`` such as figures_out, under ``tmp_path``: a run
    would land there, the checkout's figures/ stays as committed) and check that it showed ``expect``, wrote no
    run directory, and printed no warning."""
    nb = _execute(name, tmp_path, out_root=str(tmp_path / "runs"), **{k: str(tmp_path / v) for k, v in paths.items()})
    text = _text(nb)
    for piece in expect:   # in a table, or in a plot's JSON (non-ASCII escaped there)
        assert piece in text or json.dumps(piece)[1:-1] in text, (name, piece)
    assert not (tmp_path / "runs").exists(), f"{name}: its default ran something"
    assert "Warning" not in "".join(str(o.get("text", "")) for c in nb.cells if c.cell_type == "code"
                                    for o in c.get("outputs", []) if o.get("output_type") == "stream"), name
    assert not _outputs(nb, "image/png")                     # interactive plots, no static image


def test_06_by_default_draws_figures_4_and_5_from_the_published_rows(tmp_path):
    _default_run("06_cost_performance.ipynb", tmp_path,
                 ["0.94 (34/36; 0.82–0.98)",                  # explorer_margin, TextWorld test (table)
                  "explorer_margin · embedded · 34/36 (0.82–0.98)",   # Figure 4's legend
                  "babyai · embedded · react · 2/35 (0.02–0.19)"],    # Figure 5's bars, per suite
                 figures_out="figures")


def test_07_by_default_reads_the_engineer_table_export(tmp_path):
    _default_run("07_harness_engineer.ipynb", tmp_path,
                 ["block_after", "Reply with the whole hooks.py", "0.67 (4/6; 0.30–0.90)", "eng-sft-60", "eng-grpo",
                  "train/nonzero_advantage_share"])


def test_09_by_default_builds_the_published_gap_table_from_its_exports(tmp_path):
    _default_run("09_one_vs_per_task.ipynb", tmp_path,
                 ["0.38 (46/121; 0.30–0.47)",                 # (a) the best single fixed harness, chosen on dev
                  "0.65 (79/121; 0.56–0.73)",                 # (b) the per-family oracle
                  "0.67 (81/121; 0.58–0.75)",                 # the streaming JIT
                  "results/mix-121/mix121dev-navigator"],     # the exports, named from the repository root
                 figures_out="figures")


@pytest.mark.slow
@pytest.mark.parametrize("name, expect, paths", [
    ("01_seed_bank.ipynb", ["0.30 (3/10; 0.11–0.60)", "agentfold"], {"figures_out": "figures"}),   # Table 2 goes there
    ("05_static_vs_streaming.ipynb", ["embedded · static · 5/13 (0.18–0.64)", "0.77 (27/35; 0.61–0.88)"],
     {"figures_out": "figures"}),
    ("08_inspect_a_run.ipynb", ["results/full-budget-textworld-test/textworld-react"], {}),
])
def test_the_other_figure_notebooks_by_default_read_results(tmp_path, name, expect, paths):
    _default_run(name, tmp_path, expect, **paths)
