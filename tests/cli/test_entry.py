"""The console script's quick exit (embedlab.cli.run): same codes, output and files as main()."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from embedlab.testing import write_zipf_corpus

CMD = [sys.executable, "-m", "embedlab"]


def embedlab(*args: str | Path, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMD, *(str(a) for a in args)], capture_output=True, text=True,
                          timeout=300, **kw)  # type: ignore[call-overload]


def test_a_finished_run_exits_0_with_everything_written(tmp_path: Path) -> None:
    corpus = write_zipf_corpus(tmp_path / "c.txt")
    run = tmp_path / "run"
    proc = embedlab("train", "--corpus", corpus, "--run", run, "--dim", "8", "--epochs", "1",
                    "--threads", "1", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "embedlab: finished" in proc.stderr
    # what the process wrote last before exiting is complete on disk
    assert '"status": "finished"' in (run / "status.json").read_text()
    events = sorted(run.glob("events.out.tfevents.*"))
    assert events and events[-1].stat().st_size > 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run), size_guidance={"tensors": 0, "images": 0})
    acc.Reload()
    assert "embeddings/pca" in acc.Tags()["images"]  # the final summaries reached the file
    out = embedlab("neighbors", run, "w1", "-k", "3")
    assert out.returncode == 0 and len(out.stdout.strip().splitlines()) >= 3


def test_bad_input_still_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = embedlab("train", "--corpus", tmp_path / "missing.txt", "--run", tmp_path / "r")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("embedlab: error: corpus")



@pytest.mark.parametrize("module, command", [
    ("click", "runs"), ("embedlab.cli", "runs"),
    # the command's own modules, loaded once it is chosen: it said "embedlab: interrupted"
    ("embedlab.cli.runs", "runs"), ("embedlab.training.api", "train"),
    ("embedlab.data.preparing", "prepare")])
def test_ctrl_c_while_the_command_imports_is_one_line(module: str, command: str) -> None:
    """SIGINT in the first tenth of a second, while Python imports click or the command line
    itself (its decorators run then): exit 130 and one line, not a traceback through the
    imports."""
    argv = ["embedlab", command, *(["x", "--out", "y"] if command == "prepare" else [])]
    code = ("import importlib.abc, runpy, sys\n"
            "class Interrupt(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            f"        if name == {module!r}:\n"
            "            raise KeyboardInterrupt\n"
            "sys.meta_path.insert(0, Interrupt())\n"
            f"sys.argv = {argv!r}\n"
            "runpy.run_module('embedlab', run_name='__main__')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    # ended as SIGINT's default action would (130 in a shell), so that a shell loop stops
    assert (out.returncode, out.stderr) == (
        -2, "embedlab: stopped by SIGINT while starting; nothing was done\n")


def test_a_library_that_cannot_be_mapped_while_starting_is_one_line() -> None:
    """Under a memory limit (ulimit -v) a shared library of click or rich may not map while the
    command line loads: one line naming the limit, exit 2, not a traceback of the imports."""
    code = ("import importlib.abc, runpy, sys\n"
            "class NoMemory(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'click':\n"
            "            raise ImportError('/x/y.so: failed to map segment from shared object')\n"
            "sys.meta_path.insert(0, NoMemory())\n"
            "sys.argv = ['embedlab', 'runs']\n"
            "runpy.run_module('embedlab', run_name='__main__')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    assert out.stderr.startswith("embedlab: error: out of memory while starting")
    assert out.stderr.count("\n") == 1 and "ulimit -v" in out.stderr


def test_a_ctrl_c_stops_the_shell_loop_that_runs_the_command(tmp_path: Path) -> None:
    """A shell, make or xargs stops its loop only for a child that SIGINT ended (an exit status
    of 130 reads as a child that handled it): the command saves, says so, then ends as SIGINT's
    default action would, and the loop's next command never starts."""
    import json
    import os
    import shlex
    import signal
    import time

    corpus = write_zipf_corpus(tmp_path / "c.txt")
    train = " ".join(shlex.quote(str(a)) for a in [
        *CMD, "train", "--corpus", corpus, "--dim", "8", "--epochs", "500", "--threads", "1",
        "--no-progress", "--no-tensorboard", "--checkpoint-every", "100000"])
    script = (f"for run in a b; do {train} --run {shlex.quote(str(tmp_path))}/$run; "
              "echo \"went on after $?\"; done")
    proc = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    status = tmp_path / "a" / "status.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # stepping: the trainer's handlers are in place
        try:
            if json.loads(status.read_text()).get("step", 0) >= 2:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGINT, (out, err)
    assert "saved step" in err and "went on" not in out, (out, err)
    assert not (tmp_path / "b").exists()
