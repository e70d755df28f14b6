"""The lab under test: `jupyter lab` on 127.0.0.1 with a temporary token, driven by headless Debian chromium
(Selenium). Notebook 00 (and 06) run all their cells in smoke mode through the UI (JupyterLab's own "run all
cells" command); the test asserts that the progress widget and interactive bokeh plots rendered and that no
cell errored, reading the saved notebook back through the Jupyter server's contents API.

Screenshots go to the test's tmp dir (paths printed; run with -s): 00 mid-run with its progress bar, 00 done,
06's interactive Figure 4. Smoke mode uses `scripted:*` test doubles, not models. Slow (a JupyterLab start
and a kernel per notebook): `make test-slow`, or `pytest -m slow tests/notebooks/test_lab_browser.py -s`.
Skipped when chromium/chromedriver are missing (`make setup` installs them)."""
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from browser_helpers import N_FIGURES, WALK, headless_chromium, requires_chromium  # noqa: E402

pytestmark = [pytest.mark.slow, requires_chromium]
selenium = pytest.importorskip("selenium")
pytest.importorskip("jupyterlab")
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402  (after the importorskip)

# tqdm.auto's widget: an ipywidgets progress bar inside an output area, with tqdm's text next to it
PROGRESS = "return Array.from(document.querySelectorAll('.jp-OutputArea .widget-hprogress')).map(" \
           "e => e.parentElement.textContent.replace(/\\u2007/g, ' '));"   # tqdm pads with figure spaces
# code cells whose prompt is not a finished execution count: '[*]' (running) or '[ ]' (not run)
PENDING = "return Array.from(document.querySelectorAll(" \
          "'.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')).filter(" \
          "p => !/\\[\\d+\\]/.test(p.textContent)).length;"
ERRORS = "return Array.from(document.querySelectorAll('.jp-OutputArea-output[data-mime-type=" \
         "\"application/vnd.jupyter.stderr\"]')).map(e => e.textContent).filter(t => t.includes('Traceback'));"
RUN_ALL = "window.jupyterapp.commands.execute('notebook:run-all-cells'); return true;"
KERNEL_IDLE = "const w = window.jupyterapp.shell.currentWidget; const k = w && w.sessionContext && " \
              "w.sessionContext.session && w.sessionContext.session.kernel; " \
              "return !!(k && k.connectionStatus === 'connected' && k.status === 'idle');"
SAVE = "window.jupyterapp.commands.execute('docmanager:save'); return true;"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _parameterized(name: str, folder: Path, **parameters) -> Path:
    """notebooks/<name> with an injected-parameters cell after its ``parameters`` cell (as papermill does; nothing
    executed), written to ``folder``."""
    import nbformat
    nb = nbformat.read(str(REPO / "notebooks" / name), as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    source = "\n".join(f"{k} = {v!r}" for k, v in parameters.items())
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]}))
    path = folder / name
    nbformat.write(nb, str(path))
    return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a temp folder (the parameterized notebooks) on 127.0.0.1 with a random token."""
    root = tmp_path_factory.mktemp("lab")
    (root / "nb").mkdir()
    token, port = secrets.token_hex(16), _free_port()
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "JUPYTER_RUNTIME_DIR": str(root / "runtime"), "JUPYTER_CONFIG_DIR": str(root / "config"),
           "IPYTHONDIR": str(root / "ipython")}
    env.pop("JITLAB_PROGRESS", None)
    news = root / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text(json.dumps({"fetchNews": "false"}))   # no "Jupyter news?" toast over the screenshots
    log = (root / "lab.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
                             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root / 'nb'}",
                             "--LabApp.expose_app_in_browser=True", f"--LabApp.workspaces_dir={root / 'ws'}",
                             f"--LabApp.user_settings_dir={root / 'settings'}", "--ServerApp.open_browser=False",
                             *(["--allow-root"] if os.geteuid() == 0 else [])],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        end = time.time() + 90
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"jupyter lab exited early: {(root / 'lab.log').read_text()[-3000:]}")
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError as exc:
                if time.time() > end:
                    raise AssertionError(f"jupyter lab did not answer: {(root / 'lab.log').read_text()[-3000:]}") from exc
                time.sleep(0.5)
        yield {"base": base, "token": token, "root": root}
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture
def browser():
    driver = headless_chromium("1400,1500", 60, "--disable-dev-shm-usage")
    yield driver
    driver.quit()


def _run_all(browser, lab, name: str, timeout: int, on_progress=None) -> dict:
    """Open ``name`` in the lab, run all its cells through the UI, wait until every code cell has an execution
    count, save; returns the saved notebook (from the contents API). ``on_progress()``: called once, as soon as a
    progress widget shows (while the notebook still runs, unless it already finished)."""
    # a fresh workspace per notebook (?reset): the lab must not reopen, and run, the notebook of an earlier test
    browser.get(f"{lab['base']}/lab/workspaces/{Path(name).stem}/tree/{name}?reset&token={lab['token']}")
    wait = WebDriverWait(browser, 90, poll_frequency=0.25)
    wait.until(lambda d: d.execute_script("return !!(window.jupyterapp && "
                                          "document.querySelector('.jp-NotebookPanel .jp-CodeCell'));"))
    # Run All before the panel's kernel is connected and idle is dropped silently (seen on a loaded machine)
    WebDriverWait(browser, 120, poll_frequency=0.25).until(lambda d: d.execute_script(KERNEL_IDLE))
    assert browser.execute_script(RUN_ALL)
    end, seen = time.time() + timeout, False
    while True:
        if not seen and browser.execute_script(PROGRESS):
            seen = True
            if on_progress:
                on_progress()
        if browser.execute_script(PENDING) == 0:
            break
        assert time.time() < end, f"{name}: cells still pending after {timeout}s"
        time.sleep(0.2)
    time.sleep(1.5)   # let the last outputs paint
    browser.execute_script(SAVE)
    time.sleep(1.5)
    with urllib.request.urlopen(f"{lab['base']}/api/contents/{name}?content=1&token={lab['token']}") as r:
        return json.loads(r.read())["content"]


def _errors(nb: dict) -> list[str]:
    return [f"{o.get('ename')}: {o.get('evalue')}" for c in nb["cells"] if c["cell_type"] == "code"
            for o in c.get("outputs", []) if o["output_type"] == "error"]


def test_notebook_00_runs_in_the_lab_with_progress_and_interactive_plots(lab, browser, tmp_path):
    _parameterized("00_quickstart.ipynb", lab["root"] / "nb", smoke=True, out=str(tmp_path / "run"))
    shots = []
    t0 = time.time()
    nb = _run_all(browser, lab, "00_quickstart.ipynb", timeout=240,
                  on_progress=lambda: shots.append(browser.save_screenshot(str(tmp_path / "00_mid_run.png"))))
    print(f"notebook 00 through the UI: {time.time() - t0:.1f}s")
    assert not _errors(nb), _errors(nb)
    assert not browser.execute_script(ERRORS)
    assert all(c.get("execution_count") for c in nb["cells"] if c["cell_type"] == "code")
    bars = browser.execute_script(PROGRESS)
    assert bars and "react · textworld" in bars[0] and "episode" in bars[0], bars   # tqdm.auto's widget
    assert "ok " in bars[0] and " tok/s" in bars[0], bars
    assert browser.execute_script(N_FIGURES) >= 2, "the hvplot bars (reward, tokens) as bokeh plots"
    assert (tmp_path / "run" / "summary.json").exists()
    browser.execute_script("window.jupyterapp.commands.execute('notebook:scroll-to-top'); return true;")
    assert shots == [True] and (tmp_path / "00_mid_run.png").stat().st_size > 20_000
    done = tmp_path / "00_done.png"
    assert browser.save_screenshot(str(done))
    print(f"screenshots: {tmp_path / '00_mid_run.png'} {done}")


def test_notebook_06_figure_4_is_interactive_in_the_lab(lab, browser, tmp_path):
    _parameterized("06_cost_performance.ipynb", lab["root"] / "nb", smoke=True, suite="toy",
                   out_root=str(tmp_path / "runs"))
    nb = _run_all(browser, lab, "06_cost_performance.ipynb", timeout=480)
    assert not _errors(nb), _errors(nb)
    assert not browser.execute_script(ERRORS)
    assert browser.execute_script(N_FIGURES) >= 3, "hvplot scatter, Figure 4, Figure 5"
    # Figure 4's table of pairings (Panel Tabulator): one row per method x backbone
    rows = browser.execute_script(WALK + "return all.filter(e => e.classList.contains('tabulator-row')).length;")
    assert rows == 10, rows
    browser.execute_script(WALK + "const f = all.filter(e => e.classList.contains('bk-Figure'));"
                                   "f[1].scrollIntoView({block: 'start'}); return f.length;")
    time.sleep(1)
    shot = tmp_path / "06_figure4.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 20_000
    print(f"screenshot: {shot}")
