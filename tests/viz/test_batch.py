"""jitlab batch: grid expansion, parallel papermill runs, a failing cell fails alone, reruns skip ok runs."""
import json

import pytest

from jitlab.batch import BatchConfig, combinations, load_grid, run_batch
from jitlab.errors import ConfigError

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("papermill")


def _notebook(path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell("x = 1\nfail = False")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("tiny test notebook"), params,
                nbformat.v4.new_code_cell("if fail:\n    raise ValueError(f'broken parameter set x={x}')"),
                nbformat.v4.new_code_cell("from pathlib import Path\nPath(f'out_{x}.txt').write_text(str(x * 2))")]
    nbformat.write(nb, path)
    return path


def test_grid_forms(tmp_path):
    assert combinations({"a": [1, 2], "b": ["x", "y"], "c": 5}) == [
        {"a": 1, "b": "x", "c": 5}, {"a": 1, "b": "y", "c": 5}, {"a": 2, "b": "x", "c": 5}, {"a": 2, "b": "y", "c": 5}]
    grid = tmp_path / "g.yaml"
    grid.write_text("grid: {a: [1, 2]}\nruns:\n  - {a: 9, b: z}\n")
    assert load_grid(grid) == [{"a": 1}, {"a": 2}, {"a": 9, "b": "z"}]
    grid.write_text("- {a: 1}\n- {a: 2}\n")
    assert load_grid(grid) == [{"a": 1}, {"a": 2}]
    grid.write_text("runs: []\n")
    with pytest.raises(ConfigError, match="no parameter combination"):
        load_grid(grid)


def test_batch_failure_isolated_and_rerun_skips(tmp_path):
    nb = _notebook(tmp_path / "tiny.ipynb")
    grid = tmp_path / "grid.yaml"
    grid.write_text("x: [1, 2]\nfail: [false]\nruns:\n  - {x: 3, fail: true}\n")
    out = tmp_path / "batch"
    cfg = BatchConfig(notebook=str(nb), grid=str(grid), out=str(out), parallel=2, cwd="run")
    manifest = run_batch(cfg, echo=lambda *_: None)

    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["summary"] == {"total": 3, "ok": 2, "failed": 1, "skipped": 0}
    by_x = {r["params"]["x"]: r for r in on_disk["runs"]}
    assert by_x[1]["status"] == by_x[2]["status"] == "ok" and by_x[1]["error"] == ""
    assert by_x[3]["status"] == "failed"
    assert "ValueError: broken parameter set x=3" in by_x[3]["error"]
    for r in on_disk["runs"]:
        assert r["duration_s"] > 0 and (out / r["id"]).is_dir()
        executed = nbformat.read(r["output"], as_version=4)       # every run writes its notebook, failed too
        assert any("injected-parameters" in c.metadata.get("tags", []) for c in executed.cells)
    # the ok runs really ran their last cell in their own working directory; the failed one stopped early
    assert (out / by_x[2]["id"] / "out_2.txt").read_text() == "4"
    assert not (out / by_x[3]["id"] / "out_3.txt").exists()
    assert manifest["runs"] == on_disk["runs"]

    (out / by_x[1]["id"] / "out_1.txt").unlink()
    again = run_batch(cfg, echo=lambda *_: None)
    assert again["summary"] == {"total": 3, "ok": 2, "failed": 1, "skipped": 2}
    assert not (out / by_x[1]["id"] / "out_1.txt").exists(), "an ok run was executed again"
    rerun = {r["params"]["x"]: r for r in again["runs"]}[3]
    assert rerun["status"] == "failed" and not rerun["skipped"], "failed runs are retried on rerun"


def test_missing_notebook_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        run_batch(BatchConfig(notebook=str(tmp_path / "nope.ipynb"), grid="", out=str(tmp_path)))


@pytest.mark.slow
def test_notebook_05_grid_of_the_readme(tmp_path):
    """The README's example: notebook 05 (smoke) over notebooks/grids/05_smoke_2x2.yaml, records under tmp_path."""
    from jitlab.paths import repo_root
    text = (repo_root() / "notebooks/grids/05_smoke_2x2.yaml").read_text().replace("runs/batch05", str(tmp_path / "rec"))
    grid = tmp_path / "grid.yaml"
    grid.write_text(text)
    cfg = BatchConfig(notebook=str(repo_root() / "notebooks/05_static_vs_streaming.ipynb"), grid=str(grid),
                      out=str(tmp_path / "out"), parallel=2)
    manifest = run_batch(cfg, echo=lambda *_: None)
    assert manifest["summary"] == {"total": 5, "ok": 4, "failed": 1, "skipped": 0}
    broken = [r for r in manifest["runs"] if r["status"] == "failed"]
    assert broken[0]["params"]["suite"] == "no_such_suite" and "unknown suite 'no_such_suite'" in broken[0]["error"]
    for name in ("toy-1", "toy-2", "textworld-1", "textworld-2"):
        assert list((tmp_path / "rec" / name / "figures").glob("fig6_stream_*.png")), name


def test_an_unknown_parameter_is_an_error_before_anything_runs(tmp_path):
    # before: papermill only warned, and the notebook ran with its full defaults
    nb = _notebook(tmp_path / "tiny.ipynb")
    grid = tmp_path / "grid.yaml"
    grid.write_text("x: [1, 2]\nfial: [true]\n")
    out = tmp_path / "batch"
    with pytest.raises(ConfigError, match=r"parameter\(s\) fial not in the parameters cell of .*tiny.ipynb "
                                          r"\(it defines: fail, x\)"):
        run_batch(BatchConfig(notebook=str(nb), grid=str(grid), out=str(out)), echo=lambda *_: None)
    assert not out.exists()
    with pytest.raises(ConfigError, match="defines no max_cost parameter"):
        run_batch(BatchConfig(notebook=str(nb), grid=str(grid), out=str(out), max_cost=1.0),
                  combos=[{"x": 1}], echo=lambda *_: None)


def test_the_repository_notebooks_take_the_spend_caps():
    import papermill as pm

    from jitlab.paths import repo_root
    for name in ("00_quickstart", "01_seed_bank", "05_static_vs_streaming", "06_cost_performance",
                 "07_harness_engineer"):
        assert {"max_cost", "max_tokens_total"} <= set(pm.inspect_notebook(str(repo_root() / f"notebooks/{name}.ipynb")))


def test_batch_numbers_are_checked():
    with pytest.raises(ConfigError, match="--parallel must be >= 1, got 0"):
        BatchConfig(notebook="n.ipynb", parallel=0)
    with pytest.raises(ConfigError, match="--timeout-s must be >= 1, got -5"):
        BatchConfig(notebook="n.ipynb", timeout_s=-5)


def test_notebook_00_writes_its_run_under_the_batch_out(tmp_path, capsys):
    """Notebook 00 (smoke: the scripted test double pick-hash) through the batch: its run lands in OUT/<id>/runs/,
    never in the checkout (before: runs/ next to the notebook file), and the batch's spend cap reaches the run.
    First ``jitlab batch NB --max-wall-total-s 0.001`` (the whole-command wall cap of run, jit, engineer and
    transfer; batch lacked it) starts nothing and exits 2 with the cap's line; the run without it then resumes."""
    from jitlab.cli import main
    from jitlab.paths import repo_root
    notebook = repo_root() / "notebooks" / "00_quickstart.ipynb"
    before = {p for p in (repo_root() / "notebooks").rglob("run.sqlite")} | set((repo_root() / "runs").rglob("run.sqlite"))
    out = tmp_path / "batch"
    (tmp_path / "g.yaml").write_text("smoke: [true]\nsuite: [toy]\nout: [runs/q]\n")
    assert main(["batch", str(notebook), "--grid", str(tmp_path / "g.yaml"), "--out", str(out),
                 "--max-wall-total-s", "0.001"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("jitlab: error: batch wall cap reached: ") and "rerun to resume" in err
    assert "of --max-wall-total-s 0.001 (this invocation)" in err
    walled = json.loads((out / "manifest.json").read_text())["runs"][0]
    assert walled["status"] == "failed" and walled["error"].startswith("batch stopped (wall cap reached: ")
    assert not (out / walled["id"]).exists()                      # nothing ran
    cfg = BatchConfig(notebook=str(notebook), out=str(out), parallel=1, max_cost=10.0)
    manifest = run_batch(cfg, combos=[{"smoke": True, "suite": "toy", "out": "runs/q"}], echo=lambda *_: None)
    assert manifest["summary"]["ok"] == 1, manifest["runs"][0]["error"]
    rid = manifest["runs"][0]["id"]
    assert rid == walled["id"]                                    # the wall cap is in no combination's id
    summary = json.loads((out / rid / "runs" / "q" / "summary.json").read_text())
    assert summary["n_episodes"] == 2 and summary["backbone"] == "scripted:pick-hash"
    after = {p for p in (repo_root() / "notebooks").rglob("run.sqlite")} | set((repo_root() / "runs").rglob("run.sqlite"))
    assert after == before
    # the cap is already spent by that run: a further combination does not start, and says why
    capped = BatchConfig(notebook=str(notebook), out=str(out), parallel=1, max_cost=1e-6)
    manifest = run_batch(capped, combos=[{"smoke": True, "suite": "toy", "out": "runs/q2"}], echo=lambda *_: None)
    assert manifest["summary"]["failed"] == 1 and "not started: batch spend cap reached" in manifest["runs"][0]["error"]
    assert not (out / manifest["runs"][0]["id"] / "runs" / "q2").exists()


def test_the_wall_cap_stops_a_notebook_in_flight(tmp_path, monkeypatch):
    """At the wall cap the notebooks still running are stopped, their kernels with them, and marked failed. The
    batch's clock is injected: the cap is reached once the notebook has started (it then waits for a file that never
    comes)."""
    import time

    from jitlab import batch
    from jitlab.errors import JitlabError
    from jitlab.runtime import RunSpend
    psutil = pytest.importorskip("psutil")
    _sleepy(tmp_path / "nb.ipynb")
    log = tmp_path / "log.txt"                                    # in the kernel's folder: the notebook's
    monkeypatch.setattr(batch, "SPEND_POLL_S", 0.2)
    monkeypatch.setattr(batch, "RunSpend", lambda **caps: RunSpend(
        **caps, clock=lambda: 100.0 if log.is_file() else 0.0, started=0.0))
    cfg = BatchConfig(notebook=str(tmp_path / "nb.ipynb"), out=str(tmp_path / "b"), parallel=1, max_wall_total_s=60)
    with pytest.raises(JitlabError, match=r"^batch wall cap reached: 100\.00s of --max-wall-total-s 60 "):
        run_batch(cfg, combos=[{"go": str(tmp_path / "never")}], echo=lambda *_: None)
    run = json.loads((tmp_path / "b" / "manifest.json").read_text())["runs"][0]
    assert run["status"] == "failed" and run["error"].startswith("batch stopped (wall cap reached: 100.00s")
    assert log.read_text().split()[0::2] == ["start"]             # it was in flight: started, never done

    def alive(pid):
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    kernel = int(log.read_text().split()[1])
    deadline = time.time() + 15
    while time.time() < deadline and alive(kernel):
        time.sleep(0.1)
    assert not alive(kernel)


def test_a_batch_killed_by_timeout_marks_its_runs_failed(tmp_path):
    import subprocess
    import sys
    import time
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell("x = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("import time\ntime.sleep(120)")]
    nbformat.write(nb, tmp_path / "slow.ipynb")
    (tmp_path / "grid.yaml").write_text("x: [1]\n")
    out = tmp_path / "batch"
    proc = subprocess.Popen([sys.executable, "-m", "jitlab.cli", "batch", str(tmp_path / "slow.ipynb"), "--grid",
                             str(tmp_path / "grid.yaml"), "--out", str(out)], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and '"running"' not in ((out / "manifest.json").read_text()
                                                         if (out / "manifest.json").exists() else ""):
        time.sleep(0.2)
    time.sleep(1.0)
    proc.terminate()                       # what `timeout` sends
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "batch stopped by signal 15" in err and "Traceback" not in err
    run = json.loads((out / "manifest.json").read_text())["runs"][0]
    assert run["status"] == "failed" and "batch stopped" in run["error"]


def test_html_copies_of_the_ok_runs_only(tmp_path):
    nb = _notebook(tmp_path / "tiny.ipynb")
    grid = tmp_path / "grid.yaml"
    grid.write_text("runs:\n  - {x: 7}\n  - {x: 8, fail: true}\n")
    out, html = tmp_path / "batch", tmp_path / "html"
    manifest = run_batch(BatchConfig(notebook=str(nb), grid=str(grid), out=str(out), parallel=1, cwd="run",
                                     html=str(html)), echo=lambda *_: None)
    ok, failed = manifest["runs"]
    page = (html / f"tiny-{ok['id']}.html").read_text()
    assert ok["html"].endswith(f"tiny-{ok['id']}.html") and page.startswith("<!DOCTYPE html>")
    assert "x = 7" in _text(page)   # the injected parameters, with their outputs
    assert "html" not in failed and sorted(p.name for p in html.iterdir()) == [f"tiny-{ok['id']}.html"]
    # a one-run grid is named after the notebook; a rerun that skips the ok run still writes its page
    grid.write_text("runs:\n  - {x: 7}\n")
    run_batch(BatchConfig(notebook=str(nb), grid=str(grid), out=str(tmp_path / "one"), html=str(html)),
              echo=lambda *_: None)
    (html / "tiny.html").unlink()
    again = run_batch(BatchConfig(notebook=str(nb), grid=str(grid), out=str(tmp_path / "one"), html=str(html)),
                      echo=lambda *_: None)
    assert again["runs"][0]["skipped"] and "x = 7" in _text((html / "tiny.html").read_text())


def _text(page: str) -> str:
    """An HTML page's text (code cells are split into highlighting spans)."""
    import html
    import re
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def _sleepy(path):
    """A notebook that logs its start (kernel PID) and, once the file ``go`` exists, its end to log.txt in its folder."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell("x = 1\ngo = ''")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        "import os, time\nfrom pathlib import Path\n"
        "with Path('log.txt').open('a') as f:\n    f.write(f'start {os.getpid()}\\n')\n"
        "while not Path(go).is_file():\n    time.sleep(0.1)\n"
        "with Path('log.txt').open('a') as f:\n    f.write('done\\n')")]
    nbformat.write(nb, path)
    return path


def test_kill_9_of_a_batch_leaves_no_worker_and_a_second_batch_on_its_out_is_refused(tmp_path):
    """Issue 27 item 2: ``jitlab batch nb.ipynb --grid g.yaml --out b --parallel 2 --cwd run & sleep 8; kill -9 $!``
    left both pool workers (and their kernels) executing; the rerun ran the same notebooks again beside them (two
    ``done`` lines each), and a second ``jitlab batch`` on the same ``--out`` ran every notebook too. The notebooks
    wait for the file ``go``, so both are in flight until the test lets them finish."""
    import subprocess
    import sys
    import time
    psutil = pytest.importorskip("psutil")
    _sleepy(tmp_path / "nb.ipynb")
    go = tmp_path / "go"
    (tmp_path / "g.yaml").write_text(f"x: [1, 2]\ngo: ['{go}']\n")
    out = tmp_path / "b"
    cmd = [sys.executable, "-m", "jitlab.cli", "batch", str(tmp_path / "nb.ipynb"), "--grid", str(tmp_path / "g.yaml"),
           "--out", str(out), "--parallel", "2", "--cwd", "run"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    logs = lambda: sorted(out.glob("*/log.txt"))   # noqa: E731
    deadline = time.time() + 120
    while time.time() < deadline and not (len(logs()) == 2 and all("start" in p.read_text() for p in logs())):
        time.sleep(0.1)
    assert len(logs()) == 2, "both notebooks should be in flight"
    manifest = (out / "manifest.json").read_text()
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert second.returncode == 2 and "Traceback" not in second.stderr
    assert "batch output folder" in second.stderr and f"another process (PID {proc.pid}" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1 and (out / "manifest.json").read_text() == manifest
    tree = psutil.Process(proc.pid).children(recursive=True)
    kernels = {int(line.split()[1]) for p in logs() for line in p.read_text().splitlines()}
    assert kernels <= {p.pid for p in tree}
    proc.kill()
    proc.wait()

    def alive():
        left = []
        for p in tree:
            try:
                if p.status() != psutil.STATUS_ZOMBIE:
                    left.append(p)
            except psutil.NoSuchProcess:
                pass
        return left
    deadline = time.time() + 15
    while time.time() < deadline and alive():
        time.sleep(0.1)
    assert not alive(), f"left running after kill -9: {[' '.join(p.cmdline())[:80] for p in alive()]}"
    go.touch()   # from now on a notebook finishes as soon as it starts (an orphan too)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=300)
    runs = json.loads((out / "manifest.json").read_text())["runs"]
    assert [r["status"] for r in runs] == ["ok", "ok"]
    time.sleep(2)   # an orphan would have written its end by now
    for path in logs():
        lines = path.read_text().splitlines()
        assert [x.split()[0] for x in lines] == ["start", "start", "done"], lines   # killed once, finished once


def test_the_progress_bar_shows_what_the_notebooks_spend(tmp_path, capsys, monkeypatch):
    """Issue 27 item 11: ``JITLAB_PROGRESS=lines jitlab batch spend.ipynb --grid g.yaml --out b`` ended with
    ``progress batch spend.ipynb: 1/1 runs (100%) · ok 1/1 · 0 tok · $0.0000`` while its run spent tokens."""
    from jitlab.store import recorded_spend
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell("limit = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        "from jitlab.runner import RunConfig, run\n"
        "run(RunConfig(suite='toy', harness='react', backbone='scripted:pick-hash', limit=limit, out='r', quiet=True,"
        " cache=False))")]
    nbformat.write(nb, tmp_path / "spend.ipynb")
    monkeypatch.setenv("JITLAB_PROGRESS", "lines")
    out = tmp_path / "b"
    manifest = run_batch(BatchConfig(notebook=str(tmp_path / "spend.ipynb"), out=str(out), cwd="run"),
                         combos=[{"limit": 1}], echo=lambda *_: None)
    assert manifest["summary"]["ok"] == 1, manifest["runs"][0]["error"]
    cost, tokens = recorded_spend(out / manifest["runs"][0]["id"] / "r")
    assert tokens > 0 and cost > 0
    last = [line for line in capsys.readouterr().out.splitlines() if line.startswith("progress batch")][-1]
    assert f"· {tokens:,} tok · ${cost:.4f} ·" in last, last


def test_a_kernel_that_never_answered_is_started_again_and_other_errors_are_not(monkeypatch):
    import papermill as pm

    from jitlab import batch
    calls = []

    def flaky(*args, **kwargs):  # TEST DOUBLE of papermill: the kernel's first start loses its port
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("Kernel didn't respond in 60 seconds")

    monkeypatch.setattr(pm, "execute_notebook", flaky)
    assert batch._execute("nb.ipynb", "out.ipynb", {}, None, ".", None)["status"] == "ok" and len(calls) == 2

    def broken(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("something else")

    calls.clear()
    monkeypatch.setattr(pm, "execute_notebook", broken)
    result = batch._execute("nb.ipynb", "out.ipynb", {}, None, ".", None)
    assert result["status"] == "failed" and "something else" in result["error"] and len(calls) == 1

    def never(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("Kernel didn't respond in 60 seconds")

    calls.clear()
    monkeypatch.setattr(pm, "execute_notebook", never)
    assert batch._execute("nb.ipynb", "out.ipynb", {}, None, ".", None)["status"] == "failed"
    assert len(calls) == batch.KERNEL_START_TRIES


def test_the_html_copy_drops_outputs_without_data_and_nbconvert_stays_quiet(tmp_path):
    """HoloViews leaves an empty display_data beside each plot; nbconvert warned "Your element with mimetype(s)
    dict_keys([]) is not able to be represented" for each (printed by every `jitlab batch --html`)."""
    import warnings

    import nbformat

    from jitlab.batch import export_html
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("1")
    cell.outputs = [nbformat.v4.new_output("display_data", data={}),
                    nbformat.v4.new_output("display_data", data={"text/plain": "shown"})]
    nb.cells = [cell]
    nbformat.write(nb, tmp_path / "nb.ipynb")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        page = export_html(tmp_path / "nb.ipynb", tmp_path / "nb.html").read_text()
    assert "shown" in page
