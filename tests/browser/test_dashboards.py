"""Headless Chromium looks at real tiny runs' dashboards as a person would: scalars, projector,
the PCA images at card size and the HParams table.

Trains three tiny runs through the CLI in-process (the same function as the server test), on
corpora in two folders, at two learning rates and two dimensions, serves them with ``embedlab
tensorboard`` and drives Chromium to the dashboards. Needs Debian ``chromium`` +
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
OTHER = "tiny-other-lr"  # another corpus folder and --lr
THIRD = "tiny-other-dim"  # RUN's corpus folder, another --dim: three hyperparameters differ


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
    run: Path  # the run folder of RUN
    other: Path  # the run folder of OTHER
    third: Path  # the run folder of THIRD


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("tb")
    root = tmp / "runs"
    for name, folder, extra in ((RUN, "news", ()), (OTHER, "wiki", ("--lr", "0.05")),
                                (THIRD, "news", ("--dim", "12"))):
        (tmp / "corpora" / folder).mkdir(parents=True, exist_ok=True)
        TB.train_tiny(root / name, TB.write_tiny_corpus(tmp / "corpora" / folder / "corpus.txt"),
                      *extra)
    proc, base = TB.start_server(root)
    try:
        TB.wait_for_runs(base, {RUN, OTHER, THIRD})
        yield Served(base, root / RUN, root / OTHER, root / THIRD)
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


# every element matching a CSS selector, in the page and in every shadow root below it
DEEP_QUERY = """const found = [];
    const walk = (n) => { if (n.matches && n.matches(arguments[0])) found.push(n);
      if (n.shadowRoot) walk(n.shadowRoot); for (const c of n.children || []) walk(c); };
    walk(document.documentElement);"""


def test_pca_images_are_legible_in_their_cards(server: Served, browser: Any,
                                              tmp_path: Path) -> None:
    from embedlab.track.plots import CARD_DPI, CARD_FONT

    browser.get(f"{server.base}/#images")
    # [natural width, shown width] of each loaded image, and the cards holding them
    sizes = DEEP_QUERY + """return found.filter(i => i.complete && i.naturalWidth > 0)
        .map(i => [i.naturalWidth, i.clientWidth]);"""
    wait_until(lambda: len(browser.execute_script(sizes, "img")) >= 2)
    time.sleep(2)  # let the other cards load
    shown = browser.execute_script(sizes, "img")
    assert shown
    for natural, width in shown:
        # sized for the card: sharp on a high-density screen, not shrunk past reading on others
        assert width <= natural <= 2 * width, (natural, width)
        # the labels' size on screen, in CSS pixels: TensorBoard's own text is 11-13 px
        assert CARD_FONT * CARD_DPI / 72 * width / natural >= 10, (natural, width)
    save_shot(browser, tmp_path, "images.png")
    card = browser.execute_script(DEEP_QUERY + "return found[0];", "tf-image-loader")
    shot = tmp_path / "images-card.png"
    shot.write_bytes(card.screenshot_as_png)
    shutil.copy(shot, SHOTS / "real-images-card.png")
    assert shot.stat().st_size > 20_000


def test_hparams_table_shows_the_differing_hyperparameters_as_its_columns(
        server: Served, browser: Any, tmp_path: Path) -> None:
    from embedlab.track.tensorboard import table_hparams

    records = [table_hparams(json.loads((run / "config.json").read_text(encoding="utf-8")))
               for run in (server.run, server.other, server.third)]
    differing = sorted(k for k in records[0] if len({json.dumps(r[k]) for r in records}) > 1)
    assert differing == ["data.corpus", "model.dim", "optim.lr"]
    browser.get(f"{server.base}/#hparams")
    # the left pane: the hyperparameters listed, ticked when TensorBoard shows them as columns
    pane = DEEP_QUERY + "return found.map(c => [c.textContent.trim(), c.checked]);"
    wait_until(lambda: len(browser.execute_script(pane, "paper-checkbox.hparam-checkbox")) > 0
               and all(run in page_text(browser) for run in (RUN, OTHER, THIRD)))
    time.sleep(2)  # let the table draw
    save_shot(browser, tmp_path, "hparams.png")
    listed = browser.execute_script(pane, "paper-checkbox.hparam-checkbox")
    assert listed == [[name, True] for name in differing]  # no track.*, threads, ...
    headers = browser.execute_script(DEEP_QUERY + "return found.map(h => h.textContent.trim());",
                                     ".table-header")
    assert [h for h in headers if h in records[0]] == differing
    # the metric columns: TensorBoard shows five, here the final metrics first
    tags = {t for run in (server.run, server.other, server.third)
            for row in TB.metrics_rows(run) for t in row if t != "step"}
    metrics = sorted(tags, key=lambda t: (not t.startswith("final/"), t))
    assert [h for h in headers if h in tags] == metrics[:5]
    # A cell is cut at its end (a 10-em column): the corpus path shows the part that tells the
    # runs apart, its folder and file name, in full.
    cells = DEEP_QUERY + """return found.flatMap(c => {
        const t = [...c.childNodes].find(x => x.nodeType === 3 && x.textContent.trim());
        if (!t || !t.textContent.trim().endsWith(arguments[1])) return [];
        const start = t.textContent.indexOf(t.textContent.trim());
        const r = document.createRange();
        r.setStart(t, start); r.setEnd(t, start + arguments[2]);
        return [[t.textContent.trim(), r.getBoundingClientRect().right,
                 c.getBoundingClientRect().right]];
      });"""
    tail = len("news/corpus.txt")
    corpus_cells = browser.execute_script(cells, ".table-cell",
                                          str(server.run.parents[1] / "corpora"), tail)
    assert sorted(text[:tail] for text, _, _ in corpus_cells) == ["news/corpus.txt",
                                                                   "news/corpus.txt",
                                                                   "wiki/corpus.txt"]
    for text, shown_right, cell_right in corpus_cells:
        assert shown_right <= cell_right, text
