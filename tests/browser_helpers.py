"""Shared by the browser tests (tests/viz/dash/test_browser.py, tests/notebooks/test_lab_browser.py): Debian's
headless Chromium driven by Selenium, and JavaScript that counts what bokeh painted inside shadow roots."""
import os
import shutil
import tempfile

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
requires_chromium = pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)),
                                       reason="needs Debian chromium + chromium-driver (/usr/bin/chromedriver); "
                                              "install with `apt-get install -y chromium chromium-driver`")

# every element, descending into shadow roots (bokeh/panel render inside them)
WALK = "function walk(r, out){ for (const el of r.querySelectorAll('*')) { out.push(el); " \
       "if (el.shadowRoot) walk(el.shadowRoot, out); } return out; } const all = walk(document, []);"
# bokeh figures that painted: a bk-Figure element with a canvas somewhere below it
N_FIGURES = WALK + "return all.filter(e => e.classList.contains('bk-Figure') && " \
                   "walk(e.shadowRoot || e, []).some(c => c.tagName === 'CANVAS')).length;"


def headless_chromium(window: str, page_load_timeout: int, *extra_flags: str):
    """A Selenium driver on headless Chromium with a fresh profile and nothing fetched in the background."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 *extra_flags, f"--window-size={window}",
                 f"--user-data-dir={tempfile.mkdtemp(prefix='jitlab-chromium-')}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(page_load_timeout)
    return driver
