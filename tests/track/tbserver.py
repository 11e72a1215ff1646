"""Train a tiny real run, start and stop ``embedlab tensorboard``, read its HTTP data API.

Test code shared by the server test and the browser test. Import-free of test packages: the
browser tests load this file by path.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

STARTUP_S = 60

# Demo-corpus size of the tiny run: ~120 steps of 128 centres, i.e. 24 scalar windows and 6
# checkpoints. Each checkpoint draws a labelled PCA figure (~1.2 s on a 2-core machine), so
# the ~50k tokens one might pick first (16 checkpoints, ~19 s a run) would not fit two runs
# plus the server into the test file's ~40 s budget.
TINY_TOKENS = 20_000
# --keep: large enough that RUN/checkpoint lists every checkpoint the run saved, so the
# checkpoint-cadence summaries (histograms, images, text) can be compared with it step for step.
TINY_FLAGS = ("--dim", "16", "--epochs", "1", "--batch-size", "128", "--log-every", "5",
              "--checkpoint-every", "20", "--threads", "1", "--min-count", "2",
              "--keep", "1000", "--projector-words", "300", "--no-progress")
TRAIN_TAGS = ("train/loss", "train/lr", "train/words_per_sec", "train/pairs_per_sec",
              "train/progress")


def write_tiny_corpus(path: Path, tokens: int = TINY_TOKENS) -> Path:
    """The built-in demo corpus (deterministic, seed 0) at ``tokens`` tokens."""
    from embedlab.data.demo import write_demo_corpus

    return write_demo_corpus(path, seed=0, tokens=tokens)


def train_tiny(run: Path, corpus: Path, *extra: str) -> None:
    """``embedlab train`` in-process with the tiny settings plus ``extra`` flags.

    The CLI calls sys.exit only on errors, so a refused command fails the caller loudly.
    """
    from embedlab.cli import main

    main(["train", "--corpus", str(corpus), "--run", str(run), *TINY_FLAGS, *extra])


def metrics_rows(run: Path) -> list[dict[str, Any]]:
    """RUN/metrics.jsonl as dicts (strict: a malformed line fails the test)."""
    text = (run / "metrics.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def metrics_steps(run: Path, tag: str) -> list[int]:
    """Steps at which RUN/metrics.jsonl holds ``tag``, in file order."""
    return [int(row["step"]) for row in metrics_rows(run) if tag in row]


def checkpoint_steps(run: Path) -> list[int]:
    """Steps of every checkpoint named in the RUN/checkpoint index (any role), ascending."""
    text = (run / "checkpoint").read_text(encoding="utf-8")
    return sorted({int(m) for m in re.findall(r"^\w+: ckpt-(\d+)", text, flags=re.M)})


def get(base: str, route: str, **params: str) -> Any:
    url = f"{base}/data/plugin/{route}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
        body = r.read()
    return json.loads(body) if r.headers.get_content_type() == "application/json" else body


def post(base: str, route: str, payload: dict[str, Any]) -> Any:
    req = urllib.request.Request(f"{base}/data/plugin/{route}", data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json",
                                          "X-TensorBoard-Feature-Flags": "{}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def start_server(logdir: Path) -> tuple[subprocess.Popen[str], str]:
    """``embedlab tensorboard LOGDIR`` as a user types it; returns the process and its URL."""
    proc = subprocess.Popen([sys.executable, "-m", "embedlab", "tensorboard", str(logdir)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()  # type: ignore
                                                          ), daemon=True)
    reader.start()
    reader.join(STARTUP_S)
    assert first and "http://127.0.0.1:" in first[0], first
    url = first[0].split("http://", 1)[1].split("/", 1)[0]
    return proc, f"http://{url}"


def stop_server(proc: subprocess.Popen[str]) -> None:
    if proc.stdout is not None:
        proc.stdout.close()
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C, as a user stops it
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_for_runs(base: str, runs: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + STARTUP_S
    while True:
        try:
            tags = get(base, "scalars/tags")
            if runs <= set(tags) and all("final/loss" in tags[r] for r in runs):
                return dict(tags)
        except OSError:
            pass  # not listening yet
        if time.monotonic() > deadline:
            raise AssertionError(f"TensorBoard did not serve runs {runs} in {STARTUP_S}s")
        time.sleep(0.3)
