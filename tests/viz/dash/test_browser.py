"""Browser test: headless Debian chromium loads the served streaming-replay dashboard on 127.0.0.1,
moves the Player with its "next" button, and the page shows the expected plots.

The run is a TEST FIXTURE (jit_runs_fixture.py, synthetic numbers). The screenshot is written to the
test's tmp dir (path printed; run with -s to see it). Skipped when chromium/chromedriver are missing
(`apt-get install chromium chromium-driver`, done by `make setup`)."""
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2]))
from browser_helpers import N_FIGURES, WALK, headless_chromium, requires_chromium  # noqa: E402
from jit_runs_fixture import make_jit_run  # noqa: E402

pytestmark = requires_chromium
selenium = pytest.importorskip("selenium")
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402  (after the importorskip)

NEXT = WALK + "const b = all.find(e => e.tagName === 'BUTTON' && e.classList.contains('next')); " \
               "if (b) { b.click(); return true; } return false;"
TEXT = WALK + "return all.filter(e => e.shadowRoot).map(e => e.shadowRoot.textContent).join('\\n');"
PLAYER_VALUE = "for (const m of Bokeh.documents[0].all_models) { if (m.type && m.type.endsWith('Player')) " \
               "return m.value; } return null;"


def _wait_listening(port, proc, timeout=45):
    """Wait for the port to accept connections (a page GET would build a whole session each time)."""
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise AssertionError(f"dashboard server exited early: {proc.stdout.read()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


@pytest.fixture
def server(tmp_path):
    from jitlab.viz.dash.server import free_port
    run = make_jit_run(tmp_path / "streaming", "streaming", n=16)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "jitlab.viz.dash.server", str(run), "--port", str(port), "--no-show",
                             "--trust-harness-code"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def browser():
    driver = headless_chromium("1400,1300", 120)   # a Panel server on a loaded 2-core machine took > 30 s to serve
    yield driver
    driver.quit()


def test_replay_dashboard_in_chromium(server, browser, tmp_path):
    from jitlab.viz.dash.replay_view import PLOTS
    t0 = time.time()
    browser.get(server)
    wait = WebDriverWait(browser, 40, poll_frequency=0.25)
    wait.until(lambda d: d.execute_script(N_FIGURES) >= PLOTS)
    assert "task 0" in browser.execute_script(TEXT)
    t1 = time.time()
    for _ in range(3):
        assert browser.execute_script(NEXT), "the Player's next button was not found"
        time.sleep(0.2)
    wait.until(lambda d: d.execute_script(PLAYER_VALUE) == 3)
    wait.until(lambda d: "task 3 toy-dev-3" in d.execute_script(TEXT))
    time.sleep(0.5)                                              # let the re-rendered plots paint
    print(f"page {t1 - t0:.1f}s, 3 steps {time.time() - t1:.1f}s")
    assert browser.execute_script(N_FIGURES) == PLOTS
    shot = tmp_path / "replay.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 20_000
    print(f"screenshot: {shot}")
    text = browser.execute_script(TEXT)
    assert "diff against nearest reference" in text and "Fixture variant streaming-3" in text
    assert browser.execute_script(WALK + "return all.filter(e => e.tagName === 'IMG' && "
                                          "e.src.startsWith('data:image/svg+xml')).length;") == 1, "anatomy diagram"
