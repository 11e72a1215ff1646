"""Headless Chromium looks at the scalars dashboard and the projector, as a person would.

Needs Debian ``chromium`` + ``chromium-driver`` and selenium (``pip install selenium``). Run with
``pytest -m browser tests/browser``. Screenshots go to the test's temp dir and are copied to
``/tmp/embedlab-shots/`` for a human to look at.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.browser
SHOTS = Path("/tmp/embedlab-shots")


def _load(name: str, path: Path) -> ModuleType:
    # by path, so this works whatever the test package layout is
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


TRACK = Path(__file__).resolve().parents[1] / "track"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    fakerun = _load("embedlab_browser_fakerun", TRACK / "fakerun.py")
    tb = _load("embedlab_browser_tb", TRACK / "tbserver.py")
    root = tmp_path_factory.mktemp("tb") / "runs"
    fakerun.simulate(root / "demo-sg", steps=50, ckpt_every=25)
    proc, base = tb.start_server(root)
    try:
        tb.wait_for_runs(base, {"demo-sg"})
        yield base
    finally:
        tb.stop_server(proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver")
    if shutil.which("chromium") is None or shutil.which("chromedriver") is None:
        pytest.fail("install Debian chromium and chromium-driver (apt-get install -y chromium "
                    "chromium-driver) to run the browser tests")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or ""
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-dev-shm-usage", "--window-size=1400,1000"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(options=opts, service=Service(shutil.which("chromedriver")))
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(check: Callable[[], bool], timeout: float = 45) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the dashboard did not render in time")
        time.sleep(0.5)


def page_text(driver: Any) -> str:
    # TensorBoard renders inside shadow DOMs (Polymer) and Angular; innerText of the body pierces
    # neither reliably, so collect text from every shadow root too.
    return str(driver.execute_script("""
        const out = [];
        const walk = (node) => {
          if (node.nodeType === 3) { out.push(node.textContent.trim()); return; }
          if (node.shadowRoot) walk(node.shadowRoot);
          if (node.value && typeof node.value === 'string') out.push(node.value);
          for (const c of node.childNodes || []) walk(c);
        };
        walk(document.documentElement);
        return out.filter(t => t).join(' ');"""))


def save_shot(driver: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    driver.save_screenshot(str(path))
    SHOTS.mkdir(exist_ok=True)
    shutil.copy(path, SHOTS / name)
    return path


def test_scalars_dashboard_shows_the_loss_curve(server: str, browser: Any,
                                                tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(f"{server}/#timeseries")
    wait_until(lambda: bool(browser.find_elements(
        By.CSS_SELECTOR, "input[placeholder='Filter tags (regex)']")))
    browser.find_element(By.CSS_SELECTOR,
                         "input[placeholder='Filter tags (regex)']").send_keys("train/loss")
    # the card's data table lists the run with its last step once the chart has data
    wait_until(lambda: "demo-sg" in (text := page_text(browser)) and "train/loss" in text
               and "Smoothed" in text)
    time.sleep(3)  # let the line chart draw
    shot = save_shot(browser, tmp_path, "scalars.png")
    assert shot.stat().st_size > 20_000


def test_projector_loads_points_with_word_metadata(server: str, browser: Any,
                                                   tmp_path: Path) -> None:
    browser.get(f"{server}/#projector")
    # the projector plugin lives in nested iframes (inside TensorBoard's shadow DOM)
    find_frame = """const walk = (n) => { if (n.tagName === 'IFRAME') return n;
        for (const c of [n.shadowRoot, ...(n.children || [])]) {
          if (c) { const f = walk(c); if (f) return f; } } return null; };
        return walk(document.documentElement);"""
    wait_until(lambda: browser.execute_script(find_frame) is not None)
    depth = 0
    while (frame := browser.execute_script(find_frame)) is not None and depth < 3:
        browser.switch_to.frame(frame)
        depth += 1
        time.sleep(1)  # the inner document loads after the frame element appears
    try:
        wait_until(lambda: "input_embeddings:00050" in (text := page_text(browser))
                   and "Points: 30" in text and "Dimension: 16" in text
                   and "metadata.tsv" in text)
    finally:
        browser.switch_to.default_content()
    time.sleep(3)
    shot = save_shot(browser, tmp_path, "projector.png")
    assert shot.stat().st_size > 20_000
