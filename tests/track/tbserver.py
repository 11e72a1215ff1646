"""Start and stop ``embedlab tensorboard`` and read its HTTP data API (test helper).

Import-free of test packages: the browser tests load this file by path.
"""

from __future__ import annotations

import json
import os
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
