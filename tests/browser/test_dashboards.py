"""Headless Chromium looks at a real tiny run's scalars dashboard and projector, as a person would.

Trains a tiny run through the CLI in-process (the same helper as the server test), serves it
with ``embedlab tensorboard`` and drives Chromium to the dashboards. Needs Debian ``chromium`` +
``chromium-driver`` (skipped, saying so, when either is missing) and selenium (a test extra).
Run with ``pytest -m browser tests/browser``. Screenshots go to the test's temp dir and are copied
to ``/tmp/embedlab-shots/real-*.png`` for a human to look at.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.browser
SHOTS = Path("/tmp/embedlab-shots")
RUN = "tiny-real"


def _load(name: str, path: Path) -> ModuleType:
    # by path, so this works whatever the test package layout is
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


TRACK = Path(__file__).resolve().parents[1] / "track"
TB = _load("embedlab_browser_tb", TRACK / "tbserver.py")  # stdlib-only at import time


@dataclass(frozen=True)
class Served:
    base: str  # http://127.0.0.1:PORT
    run: Path  # the run folder


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("tb")
    corpus = TB.write_tiny_corpus(tmp / "corpus.txt")
    root = tmp / "runs"
    TB.train_tiny(root / RUN, corpus)
    proc, base = TB.start_server(root)
    try:
        TB.wait_for_runs(base, {RUN})
        yield Served(base, root / RUN)
    finally:
        TB.stop_server(proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = [exe for exe in ("chromium", "chromedriver") if shutil.which(exe) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed; run apt-get install -y chromium "
                    "chromium-driver to run the browser tests")
    # selenium is a test extra: missing it is a broken environment, not a reason to skip
    from selenium import webdriver
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
    shutil.copy(path, SHOTS / f"real-{name}")
    return path


def test_scalars_dashboard_shows_the_loss_curve(server: Served, browser: Any,
                                                tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(f"{server.base}/#timeseries")
    wait_until(lambda: bool(browser.find_elements(
        By.CSS_SELECTOR, "input[placeholder='Filter tags (regex)']")))
    browser.find_element(By.CSS_SELECTOR,
                         "input[placeholder='Filter tags (regex)']").send_keys("train/loss")
    # the card's data table lists the run with its last step once the chart has data
    last = max(TB.metrics_steps(server.run, "train/loss"))
    wait_until(lambda: RUN in (text := page_text(browser)) and "train/loss" in text
               and "Smoothed" in text and str(last) in text)
    time.sleep(3)  # let the line chart draw
    shot = save_shot(browser, tmp_path, "scalars.png")
    assert shot.stat().st_size > 20_000


def test_projector_loads_points_with_word_metadata(server: Served, browser: Any,
                                                   tmp_path: Path) -> None:
    last = max(TB.metrics_steps(server.run, "train/loss"))
    cfg = json.loads((server.run / "config.json").read_text(encoding="utf-8"))
    vocab_size = len((server.run / "vocab.tsv").read_text(encoding="utf-8").splitlines())
    points = min(cfg["track"]["projector_words"], vocab_size)
    browser.get(f"{server.base}/#projector")
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
        wait_until(lambda: f"input_embeddings:{last:05d}" in (text := page_text(browser))
                   and f"Points: {points}" in text
                   and f"Dimension: {cfg['model']['dim']}" in text and "metadata.tsv" in text)
    finally:
        browser.switch_to.default_content()
    time.sleep(3)
    shot = save_shot(browser, tmp_path, "projector.png")
    assert shot.stat().st_size > 20_000
