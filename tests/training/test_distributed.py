"""One run trained by the processes torchrun starts (real processes, gloo on 127.0.0.1): the bits
of one process, resumable across process counts, a clean stop on SIGTERM, a lost process that
stops the others, and refusals before anything is written."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import embedlab

pytest.importorskip("torch")

#: a small run: 528k tokens (chunks 0 and 1 of 2^18 tokens, read by process 0 and 1, and a
#: short chunk 2, whose steps are one micro-batch), 2 micro-batches of 512 centres a step, ~510
#: steps over 2 epochs
FLAGS = ["--engine", "torch", "--micro-batches", "2", "--batch-size", "512", "--dim", "16",
         "--epochs", "2", "--log-every", "10", "--checkpoint-every", "50", "--no-tensorboard",
         "--threads", "1"]


#: a traceback line in a module of embedlab's: in the package these processes import (a
#: clone's folder may itself be named embedlab, and torchrun's own frames lie in it then)
_OUR_TRACEBACK = re.compile(r'File "' + re.escape(str(Path(embedlab.__file__).parent)) +
                            r'[/\\]')

#: a run's final tensors file and its metrics.jsonl rows without the speeds
Outcome = tuple[bytes, list[dict[str, float]]]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prepared Zipf corpus of 300 words in 44,000 lines."""
    folder = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(0)
    p = 1 / np.arange(1, 301)
    words = np.array([f"w{i}" for i in range(300)])
    lines = [" ".join(rng.choice(words, 12, p=p / p.sum())) for _ in range(44_000)]
    (folder / "c.txt").write_text("\n".join(lines) + "\n")
    (folder / "questions.txt").write_text(": planted\n" + "".join(
        f"w{i} w{i + 1} w{i + 2} w{i + 3}\n" for i in range(0, 40, 2)))
    subprocess.run([sys.executable, "-m", "embedlab", "prepare", str(folder / "c.txt"), "--out",
                    str(folder / "prep")], check=True, capture_output=True)
    return folder / "prep"


def _torchrun(n: int, run: Path, corpus: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone",
                             "--nproc-per-node", str(n), "-m", "embedlab", "--", "train",
                             "--run", str(run), "--corpus", str(corpus), *FLAGS,
                             *_evaluation(corpus), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _one(run: Path, corpus: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "embedlab", "train", "--run", str(run),
                             "--corpus", str(corpus), *FLAGS, *_evaluation(corpus), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _evaluation(corpus: Path) -> list[str]:
    """Rank 0 evaluates while the others wait (and the best checkpoint is chosen by it)."""
    return ["--eval-every", "100", "--eval-analogies", str(corpus.parent / "questions.txt")]


def _finish(proc: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def _final(run: Path) -> Outcome:
    """The final checkpoint's tensor file, and every row of metrics.jsonl but its speeds."""
    last = sorted((run / "checkpoints").glob("ckpt-*"))[-1]
    rows = [{k: v for k, v in json.loads(line).items() if not k.endswith("_per_sec")}
            for line in (run / "metrics.jsonl").read_text().splitlines()]
    return (last / "tensors.safetensors").read_bytes(), rows


def _status(run: Path) -> dict[str, object]:
    try:
        return json.loads((run / "status.json").read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return {}


def _wait_for_step(run: Path, step: int, proc: subprocess.Popen[str]) -> None:
    """Until the run has trained ``step`` steps and saved a checkpoint."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status = _status(run)
        if int(status.get("step", 0)) >= step and any((run / "checkpoints").glob("ckpt-*")):  # type: ignore[call-overload]
            return
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.05)
    raise AssertionError(f"{run} did not reach step {step}")


def _two_processes_past_a_save(run: Path, corpus: Path) -> subprocess.Popen[str]:
    """The run started on 2 processes, once it has trained 120 steps and saved."""
    proc = _torchrun(2, run, corpus)
    _wait_for_step(run, 120, proc)
    return proc


def _worker(launcher: int, rank: int) -> int:
    """The pid of torchrun's worker of ``rank``."""
    children = Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()
    for pid in children:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        if f"RANK={rank}".encode() in env:
            return int(pid)
    raise AssertionError(f"no worker of rank {rank} among {children}")


@pytest.fixture(scope="module")
def reference(corpus: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> Outcome:
    """The run trained by one process, uninterrupted."""
    run = tmp_path_factory.mktemp("one") / "run"
    code, out = _finish(_one(run, corpus))
    assert code == 0, out
    return _final(run)


def test_two_processes_train_the_bits_of_one(corpus: Path, tmp_path: Path,
                                             reference: Outcome) -> None:
    code, out = _finish(_torchrun(2, tmp_path / "run", corpus))
    assert code == 0, out
    assert out.count("embedlab: new run") == 1  # rank 0 speaks for the run
    tensors, rows = _final(tmp_path / "run")
    assert rows == reference[1]  # every window's loss and every evaluation
    assert sum("train/loss" in r for r in rows) > 20 and any("eval/analogy" in r for r in rows)
    assert tensors == reference[0]
    assert json.loads((tmp_path / "run" / "config.json").read_text())["optim"][
        "micro_batches"] == 2
    assert json.loads((tmp_path / "run" / "env.json").read_text())["processes"] == 2


@pytest.mark.slow
def test_a_killed_process_stops_the_other_and_the_run_resumes_on_one(
        corpus: Path, tmp_path: Path, reference: Outcome) -> None:
    run = tmp_path / "run"
    proc = _two_processes_past_a_save(run, corpus)
    killed = time.monotonic()
    os.kill(_worker(proc.pid, 1), signal.SIGKILL)
    code, out = _finish(proc)
    assert time.monotonic() - killed < 60
    assert code != 0
    status = _status(run)
    assert status["status"] == "interrupted" and "another process" in str(status["error"])
    assert "embedlab: error: another process of the run stopped" in out
    assert "re-run the same command to resume" in out
    code, out = _finish(_one(run, corpus))
    assert code == 0, out
    assert "resuming" in out
    assert _final(run) == reference


@pytest.mark.slow
def test_a_process_that_hangs_stops_the_others_after_the_step_timeout(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDLAB_STEP_TIMEOUT", "3")  # a link that breaks silently
    run = tmp_path / "run"
    proc = _two_processes_past_a_save(run, corpus)
    hung = _worker(proc.pid, 1)
    os.kill(hung, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        while _status(run).get("status") == "running" and time.monotonic() - stopped < 60:
            time.sleep(0.05)
        waited = time.monotonic() - stopped
    finally:
        os.kill(hung, signal.SIGKILL)
    code, out = _finish(proc)
    assert code != 0
    status = _status(run)
    assert status["status"] == "interrupted" and "Timed out" in str(status["error"]), out
    assert 2 < waited < 30
    assert "embedlab: error: another process of the run stopped or cannot be reached (Timed " \
        "out waiting 3000ms" in out


#: every process of a run, where process 0 hangs (SIGSTOP) as it saves at step 100, while the
#: others wait for it
_HANGING_LEADER = """
import os, signal, sys
from embedlab.checkpoint.manager import CheckpointManager
from embedlab.cli import run
save = CheckpointManager.save
def hanging_save(self, step, *args, **kwargs):
    if os.environ.get("RANK") == "0" and step >= 100:
        os.kill(os.getpid(), signal.SIGSTOP)
    return save(self, step, *args, **kwargs)
CheckpointManager.save = hanging_save
run()  # as python -m embedlab: its arguments are sys.argv[1:]
"""


def _state(pid: int) -> str:
    """A process's state letter (T: stopped), or "" once it is gone (Z: exited, not reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


@pytest.mark.slow
def test_a_process_0_that_hangs_while_the_others_wait_for_it_stops_them(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0's saves, evaluations and log windows are work it does alone: the others wait as
    long as its heartbeat moves, and no longer than the step's time limit once it stops."""
    monkeypatch.setenv("EMBEDLAB_STEP_TIMEOUT", "3")
    script = tmp_path / "hang.py"
    script.write_text(_HANGING_LEADER)
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone",
                             "--nproc-per-node", "2", str(script), "--", "train", "--run", str(run),
                             "--corpus", str(corpus), *FLAGS],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        try:
            leader, other = _worker(proc.pid, 0), _worker(proc.pid, 1)
        except (AssertionError, OSError):  # not started yet
            time.sleep(0.05)
            continue
        if _state(leader) == "T":
            break
        time.sleep(0.05)
    else:
        raise AssertionError("process 0 did not reach its save at step 100")
    stopped = time.monotonic()
    try:
        while _state(other) not in ("", "Z") and time.monotonic() - stopped < 60:
            time.sleep(0.05)
        waited = time.monotonic() - stopped
    finally:
        os.kill(leader, signal.SIGKILL)
    code, out = _finish(proc)
    assert code != 0
    assert 1.5 < waited < 30, out
    assert ("embedlab: error: another process of the run stopped or cannot be reached (process "
            "0 not heard from for 3 s while it worked alone)") in out, out
    assert [p.name for p in (run / "checkpoints").glob("ckpt-*")] == ["ckpt-00000050"]


@pytest.mark.slow
def test_a_killed_single_process_run_resumes_on_two(
        corpus: Path, tmp_path: Path, reference: Outcome) -> None:
    run = tmp_path / "run"
    proc = _one(run, corpus)
    _wait_for_step(run, 120, proc)
    proc.kill()
    proc.communicate()
    code, out = _finish(_torchrun(2, run, corpus))
    assert code == 0, out
    assert "resuming" in out
    assert _final(run) == reference


@pytest.mark.slow
def test_sigterm_saves_on_every_process_and_resumes(
        corpus: Path, tmp_path: Path, reference: Outcome) -> None:
    run = tmp_path / "run"
    proc = _two_processes_past_a_save(run, corpus)
    proc.send_signal(signal.SIGTERM)  # as a scheduler stops the job: torchrun passes it on
    code, out = _finish(proc)
    assert code != 0
    # no failure of ours (torchrun prints its own traceback for the signal it received)
    assert not _OUR_TRACEBACK.search(out) and "embedlab: error" not in out, out
    status = _status(run)
    step = int(status["step"])  # type: ignore[call-overload]
    assert status["status"] == "interrupted", out
    assert (run / "checkpoints" / f"ckpt-{step:08d}").is_dir()  # the stop was saved
    assert out.count(f"saved step {step} — re-run the same command to resume") == 1
    assert out.count("SIGTERM received") == 1  # said by the machine's first process alone
    code, out = _finish(_torchrun(2, run, corpus))
    assert code == 0, out
    assert _final(run) == reference


def test_a_process_count_that_does_not_divide_the_step_is_refused(corpus: Path,
                                                                   tmp_path: Path) -> None:
    code, out = _finish(_torchrun(2, tmp_path / "run", corpus, "--micro-batches", "3"))
    assert code != 0
    lines = [line for line in out.splitlines() if line.startswith("embedlab: error:")]
    assert lines == [INDIVISIBLE]  # said once, by the first process of the machine
    assert not _OUR_TRACEBACK.search(out)  # no traceback of ours (torchrun prints its own)
    assert not (tmp_path / "run").exists()  # nothing written


INDIVISIBLE = ("embedlab: error: 2 processes share a step of 3 micro-batches, which they cannot "
               "split evenly; pass --micro-batches 4 (a multiple of 2; keep it × --batch-size "
               "near 2048) or start a number of processes that divides it")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _by_hand(args: list[list[str]], cwds: list[Path]) -> list[tuple[int, str]]:
    """Processes started as torchrun starts them, each with its own arguments and folder."""
    port = _free_port()
    procs = []
    for rank, (argv, cwd) in enumerate(zip(args, cwds, strict=True)):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
               "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        procs.append(subprocess.Popen([sys.executable, "-m", "embedlab", "train", *argv],
                                      cwd=cwd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    return [_finish(p, 120) for p in procs]


def _start_by_hand(argv: list[str], cwd: Path, *, rank1: list[str] | None = None
                   ) -> list[subprocess.Popen[str]]:
    """Two processes of one run started as torchrun starts them (``rank1``: process 1's own
    interpreter arguments in place of ``-m embedlab``)."""
    port = _free_port()
    procs = []
    for rank in range(2):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
               "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        start = rank1 if rank == 1 and rank1 is not None else ["-m", "embedlab"]
        procs.append(subprocess.Popen([sys.executable, *start, "train", *argv], cwd=cwd,
                                      env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    return procs


#: process 1 of a run whose replica drifts: one value of its input vectors changes just before
#: its second save (a stand-in for a bug that would make the processes disagree)
_DRIFTING = """
import sys
import embedlab.training.following as following
from embedlab.cli import main
save = following._save
def drifting_save(part, group):
    if part.state.step >= 100:
        part.engine.input_vectors[0, 0] += 1.0
    save(part, group)
following._save = drifting_save
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_replica_that_differs_stops_the_run_before_it_is_saved(
        corpus: Path, tmp_path: Path) -> None:
    import embedlab

    run = tmp_path / "run"
    argv = ["--run", str(run), "--corpus", str(corpus), *FLAGS]
    procs = _start_by_hand(argv, tmp_path, rank1=["-c", _DRIFTING])
    (code0, out0), (code1, out1) = (_finish(p, 120) for p in procs)
    assert code0 != 0 and code1 != 0
    errors = [line for line in out0.splitlines() if line.startswith("embedlab: error:")]
    assert len(errors) == 1, out0
    assert errors[0].startswith("embedlab: error: the parameters of process 1 differ from "
                                "process 0's at step 100 (sha256 ")
    assert errors[0].endswith("a bug in embedlab, please report it with the command; stopped at "
                              "step 100, checkpoints up to step 50 are intact — re-run the same "
                              "command to resume"), out0
    assert "Traceback" not in out0 + out1
    # the differing step was not saved; the one before is whole
    assert [p.name for p in (run / "checkpoints").glob("ckpt-*")] == ["ckpt-00000050"]
    assert embedlab.checkpoints(run)[0].verified
    assert _status(run)["status"] == "interrupted"


@pytest.mark.slow
def test_sigterm_to_every_process_saves_once_and_the_lock_refuses_a_second_job(
        corpus: Path, tmp_path: Path, reference: Outcome) -> None:
    """As a scheduler stops a job whose processes it started itself: SIGTERM to each. Each
    exits with 143 and no error; while the run trains, another job on it is refused."""
    run = tmp_path / "run"
    argv = ["--run", str(run), "--corpus", str(corpus), *FLAGS, *_evaluation(corpus)]
    procs = _start_by_hand(argv, tmp_path)
    _wait_for_step(run, 120, procs[0])
    for proc in procs:  # held still, so that the run cannot end while the second job starts
        proc.send_signal(signal.SIGSTOP)
    try:
        second = subprocess.run([sys.executable, "-m", "embedlab", "train", *argv],
                                capture_output=True, text=True, timeout=120)
        for proc in procs:  # taken when they go on
            proc.send_signal(signal.SIGTERM)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGCONT)
    assert second.returncode == 2
    assert second.stderr.startswith(f"embedlab: error: run {run} is in use by pid "
                                    f"{procs[0].pid}"), second.stderr
    assert len(second.stderr.strip().splitlines()) == 1
    (code0, out0), (code1, out1) = (_finish(p, 120) for p in procs)
    assert (code0, code1) == (143, 143), out0 + out1
    assert "Traceback" not in out0 + out1 and "embedlab: error" not in out0 + out1
    status = _status(run)
    step = int(status["step"])  # type: ignore[call-overload]
    assert status["status"] == "interrupted"
    assert (run / "checkpoints" / f"ckpt-{step:08d}").is_dir()
    assert out0.count(f"saved step {step} — re-run the same command to resume") == 1
    code, out = _finish(_torchrun(2, run, corpus))
    assert code == 0, out
    assert _final(run) == reference


def test_processes_started_with_other_flags_are_refused(corpus: Path, tmp_path: Path) -> None:
    # by the flags' names, not the config's (it said "options.model.window: 3 vs 4")
    base = ["--run", str(tmp_path / "run"), "--corpus", str(corpus), *FLAGS]
    got = _by_hand([[*base, "--window", "3", "--seed", "1"], [*base, "--window", "4"]],
                   [tmp_path, tmp_path])
    assert [code for code, _ in got] == [2, 2]
    assert [out.strip().splitlines() for _, out in got] == [[
        "embedlab: error: process 1 of 2 was started with other arguments than process 0 "
        "(--window: 3 vs 4); start every process with the same command"], []]
    assert not (tmp_path / "run").exists()


def test_flags_that_say_the_defaults_agree_with_none(corpus: Path, tmp_path: Path,
                                                     reference: Outcome) -> None:
    # --seed 1 (the default) on one process and no --seed on the other were refused as
    # "options.seed: None vs 1"; so were --engine torch and none (which picks torch)
    run = tmp_path / "run"
    base = ["--run", str(run), "--corpus", str(corpus), *FLAGS, *_evaluation(corpus)]
    got = _by_hand([[*base, "--seed", "1"], [*base, "--engine", "auto"]],
                   [tmp_path, tmp_path])
    assert [code for code, _ in got] == [0, 0], got
    assert _final(run) == reference


def test_a_corpus_missing_on_one_machine_is_refused(corpus: Path, tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    os.symlink(corpus, here / "prep")  # "prep" exists only in process 0's folder
    argv = ["--run", str(tmp_path / "run"), "--corpus", "prep", *FLAGS]
    got = _by_hand([argv, argv], [here, there])
    assert [code for code, _ in got] == [2, 2]
    assert [out.strip().splitlines() for _, out in got] == [[
        f"embedlab: error: process 1 of 2: corpus prep does not exist on "
        f"{socket.gethostname()} (working folder {there}); put it at that path on every "
        "machine, or pass an absolute path that every machine can read"], []]
    assert not (tmp_path / "run").exists()


def test_a_corpus_missing_under_nproc_is_said_as_one_process_says_it(tmp_path: Path) -> None:
    """--nproc's processes run on this machine: where the corpus is missing is not news."""
    assert _nproc_refused(tmp_path, "misssing.txt", cwd=tmp_path) == [
        "embedlab: error: corpus not found: misssing.txt; pass an existing file or folder, "
        "'text8' (downloads it) or 'demo'"]


@pytest.mark.slow
def test_nproc_starts_torchrun_on_this_machine(corpus: Path, tmp_path: Path,
                                               reference: Outcome) -> None:
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "embedlab", "train", "--nproc", "2", "--run",
                             str(run), "--corpus", str(corpus), *FLAGS, *_evaluation(corpus)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    code, out = _finish(proc)
    assert code == 0, out
    assert out.count("embedlab: new run") == 1
    assert _final(run) == reference
    # the launcher's command line as typed (python -m embedlab, not __main__.py's path)
    assert json.loads((run / "env.json").read_text())["argv"][:6] == [
        "python", "-m", "embedlab", "train", "--nproc", "2"]


def test_another_corpus_on_one_machine_is_refused(corpus: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.txt"
    other.write_text("\n".join(" ".join(f"v{(i * 7 + j) % 50}" for j in range(10))
                               for i in range(400)) + "\n")
    subprocess.run([sys.executable, "-m", "embedlab", "prepare", str(other), "--out",
                    str(tmp_path / "other")], check=True, capture_output=True)
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    os.symlink(corpus, here / "prep")
    os.symlink(tmp_path / "other", there / "prep")  # the same path names another corpus there
    argv = ["--run", str(tmp_path / "run"), "--corpus", "prep", *FLAGS]
    got = _by_hand([argv, argv], [here, there])
    assert [code for code, _ in got] == [2, 2]
    assert [out.strip().splitlines() for _, out in got] == [[
        f"embedlab: error: process 1 of 2: the prepared corpus prep on {socket.gethostname()} "
        "differs from process 0's (its vocabulary, sentences or token ids); give every machine "
        "the same prepared folder"], []]
    assert not (tmp_path / "run").exists()


def _nproc_refused(tmp_path: Path, corpus: str, *extra: str, **kw: Any) -> list[str]:
    """The stderr lines of ``train --nproc 2`` on ``corpus``, which must exit 2 with nothing on
    stdout and no run folder made."""
    proc = subprocess.run([sys.executable, "-m", "embedlab", "train", "--nproc", "2", "--run",
                           str(tmp_path / "run"), "--corpus", corpus, *FLAGS, *extra],
                          capture_output=True, text=True, timeout=120, **kw)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert not (tmp_path / "run").exists()
    return proc.stderr.strip().splitlines()


def test_nproc_refuses_in_one_line_with_exit_2(corpus: Path, tmp_path: Path) -> None:
    assert _nproc_refused(tmp_path, str(corpus), "--micro-batches", "3") == [INDIVISIBLE]


def test_the_processes_of_nproc_record_and_hint_the_command_typed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """env.json's argv and the hint to train further keep --nproc: the processes themselves
    run without it."""
    from embedlab.training import launch, launched, loop

    monkeypatch.setattr(sys, "argv", ["/x/embedlab/__main__.py", "train", "--run", "r"])
    assert launched.typed_argv() == sys.argv and launched.launched_processes() is None
    typed = ["/venv/bin/embedlab", "train", "--nproc", "2", "--run", "r"]
    monkeypatch.setenv(launched.LAUNCHER_PID, "1")
    monkeypatch.setenv(launched.LAUNCHER_ARGV, json.dumps(typed))
    monkeypatch.setenv(launch.PROGRAM_NAME, "embedlab")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert launched.typed_argv() == typed and launched.launched_processes() == 2
    assert loop._train_further(tmp_path / "r", 2).startswith(
        f"to train more: embedlab train --nproc 2 --run {tmp_path / 'r'} --epochs N (N > 2)")


def test_nproc_under_torchrun_is_refused_at_any_size(corpus: Path, tmp_path: Path) -> None:
    """torchrun --nproc-per-node 1 -m embedlab -- train --nproc 2: the processes --nproc would
    start wait for a run of 2 that torchrun's process never joins."""
    env = {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
           "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}
    assert _nproc_refused(tmp_path, str(corpus), env=env) == [
        "embedlab: error: --nproc starts the processes of a run, and this command already runs "
        "as one of them; drop --nproc (torchrun's --nproc-per-node sets them)"]


#: the cuda engine through Triton's interpreter on the CPU (its exchange then goes over gloo):
#: a few steps of small micro-batches, each step's two from chunks 0 and 1, one a process
CUDA_FLAGS = ["--engine", "cuda", "--micro-batches", "2", "--batch-size", "64", "--dim", "8",
              "--epochs", "1", "--log-every", "1", "--checkpoint-every", "2",
              "--no-tensorboard", "--threads", "1"]


def _cuda_run(n: int, run: Path, corpus: Path, steps: int) -> None:
    env = {**os.environ, "EMBEDLAB_CUDA_INTERPRET": "1", "TRITON_INTERPRET": "1"}
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node", str(n), "-m", "embedlab", "--"] if n > 1 else \
        [sys.executable, "-m", "embedlab"]
    done = subprocess.run([*launcher, "train", "--run", str(run), "--corpus", str(corpus),
                           *CUDA_FLAGS, "--max-steps", str(steps)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow  # ~100 s in Triton's interpreter on 2 cores
def test_the_cuda_engine_on_two_processes_trains_the_bits_of_one_and_resumes_across(
        corpus: Path, tmp_path: Path) -> None:
    _cuda_run(1, tmp_path / "one", corpus, 4)
    _cuda_run(2, tmp_path / "two", corpus, 4)
    one = _final(tmp_path / "one")
    assert _final(tmp_path / "two") == one
    assert len([r for r in one[1] if "train/loss" in r]) == 4
    # 2 steps on one process, the rest on two: the bits of the uninterrupted run
    _cuda_run(1, tmp_path / "cut", corpus, 2)
    _cuda_run(2, tmp_path / "cut", corpus, 4)
    assert _final(tmp_path / "cut") == one


def _nproc(run: Path, corpus: Path, *extra: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "embedlab", "train", "--nproc", "2", "--run",
                             str(run), "--corpus", str(corpus), *FLAGS, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def _gone(pid: int) -> bool:
    return _state(pid) in ("", "Z")  # ended (perhaps not yet reaped)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP])
def test_nproc_passes_a_signal_sent_to_its_pid_on_once(corpus: Path, tmp_path: Path,
                                                      signum: int) -> None:
    """SIGINT by pid (kill -INT, an IDE's stop button), or SIGHUP (a closed terminal): each
    process saves, and the command ends after them with 128 + the signal, said once."""
    run = tmp_path / "run"
    proc = _nproc(run, corpus)
    _wait_for_step(run, 120, proc)
    proc.send_signal(signum)
    code, out = _finish(proc)
    # after its SIGINT the launcher ends as the signal's default action would ($? 130)
    assert code == (-signum if signum == signal.SIGINT else 128 + signum), out
    step = int(_status(run)["step"])  # type: ignore[call-overload]
    assert _status(run)["status"] == "interrupted"
    assert (run / "checkpoints" / f"ckpt-{step:08d}").is_dir()
    assert f"saved step {step}" in out and "still saving" not in out, out
    if signum == signal.SIGINT:
        assert out.count("SIGINT received") == 1, out


@pytest.mark.slow
def test_nproc_started_with_sigint_ignored_keeps_it_ignored(corpus: Path, tmp_path: Path
                                                            ) -> None:
    """A script's background job ignores SIGINT (the terminal's Ctrl-C for the script): the
    launcher neither takes it nor starts its processes with a handler for it."""
    run = tmp_path / "run"
    proc = _nproc(run, corpus, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    _wait_for_step(run, 120, proc)
    proc.send_signal(signal.SIGINT)
    for rank in (0, 1):
        os.kill(_worker(proc.pid, rank), signal.SIGINT)
    time.sleep(2)
    assert proc.poll() is None and _status(run)["status"] == "running"
    proc.send_signal(signal.SIGTERM)
    code, out = _finish(proc)
    assert code == 128 + signal.SIGTERM, out


@pytest.mark.slow
def test_nproc_processes_end_with_their_launcher(corpus: Path, tmp_path: Path) -> None:
    # a launcher killed outright left its processes training to the end, holding the run
    run = tmp_path / "run"
    proc = _nproc(run, corpus, start_new_session=True)
    _wait_for_step(run, 120, proc)
    workers = [_worker(proc.pid, rank) for rank in (0, 1)]
    proc.kill()
    proc.communicate()
    deadline = time.monotonic() + 60
    while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(pid) for pid in workers)
    status = _status(run)
    assert status["status"] == "interrupted"  # they took it as a SIGTERM: saved, stopped
    assert (run / "checkpoints" / f"ckpt-{int(status['step']):08d}").is_dir()  # type: ignore[call-overload]


@pytest.mark.slow  # ~6 s; ~95 s where process 0 already handles it and waits for process 1
def test_a_sigterm_to_nproc_before_its_processes_can_handle_it_is_said(
        corpus: Path, tmp_path: Path) -> None:
    """As soon as the launcher has started them, the processes are still starting Python: the
    signal's default action ends them. The launcher says so, as one process says a stop
    before training."""
    run = tmp_path / "run"
    proc = _nproc(run, corpus)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, AssertionError):  # not yet started
            _worker(proc.pid, 1)
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    code, out = _finish(proc, timeout=120)
    assert code == 143, out
    assert "stopped by SIGTERM before training began" in out and "Traceback" not in out
    assert not run.exists()


def test_a_signal_to_another_process_is_said_by_process_0(corpus: Path, tmp_path: Path) -> None:
    """Ctrl-C reaches every process of a terminal; a kill of one of them alone stops the run
    too, and the run's output says why, as for a signal of its own."""
    run = tmp_path / "run"
    proc = _nproc(run, corpus)
    _wait_for_step(run, 60, proc)
    os.kill(_worker(proc.pid, 1), signal.SIGINT)
    code, out = _finish(proc, timeout=120)
    assert code == 130, out
    assert "embedlab: SIGINT received by another process of the run; finishing the current " \
           "step and saving" in out
    assert _status(run)["status"] == "interrupted"


@pytest.mark.slow
def test_nproc_returns_when_a_process_hangs(corpus: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # process 0 stopped after the step's limit, but the command waited for the hung one forever
    monkeypatch.setenv("EMBEDLAB_STEP_TIMEOUT", "3")
    run = tmp_path / "run"
    proc = _nproc(run, corpus)
    _wait_for_step(run, 120, proc)
    hung = _worker(proc.pid, 1)
    os.kill(hung, signal.SIGSTOP)
    try:
        code, out = _finish(proc, timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(hung, signal.SIGKILL)
    assert code != 0 and _status(run)["status"] == "interrupted"
    assert "embedlab: error: another process of the run stopped or cannot be reached" in out
    assert "embedlab: process 1 did not end within 33 s of the run's end; stopping them" in out
    assert _gone(hung)


@pytest.mark.parametrize(("size", "settings", "resumed", "message"), [
    # the fixes went round: --micro-batches 2, then "pass --loss neg or --micro-batches 1"
    (2, {"model": {"loss": "hs"}, "engine": "torch"}, False,
     "2 processes train negative sampling or NCE, not hierarchical softmax, which trains in one "
     "process; pass --loss neg, or start one process"),
    # a resumed run's --micro-batches is its own: "pass --micro-batches 4" was refused next
    (4, {"optim": {"micro_batches": 2}, "engine": "torch"}, True,
     "this run trains steps of 2 micro-batches, which 4 processes cannot share; resume it with "
     "a number of processes that divides 2 (1, 2)"),
    (2, {"optim": {"micro_batches": 1}, "engine": "torch"}, True,
     "this run trains steps of 1 micro-batch, which 2 processes cannot share; resume it with a "
     "number of processes that divides 1 (1)"),
    (2, {"optim": {"micro_batches": 3}, "engine": "torch"}, False, INDIVISIBLE.removeprefix(
        "embedlab: error: ")),
])
def test_a_refusal_names_a_fix_the_run_accepts(size: int, settings: dict[str, Any],
                                               resumed: bool, message: str) -> None:
    from embedlab.config import TrainConfig
    from embedlab.errors import InputError
    from embedlab.training.handshake import check_config

    with pytest.raises(InputError) as refused:
        check_config(size, TrainConfig.from_dict(settings), resumed=resumed)
    assert str(refused.value) == message


def _alone(rank: int, port: int, run: Path, corpus: Path) -> subprocess.Popen[str]:
    """One process of a run of two, the other never started."""
    env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
           "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    return subprocess.Popen([sys.executable, "-m", "embedlab", "train", "--run", str(run),
                             "--corpus", str(corpus), *FLAGS], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_a_port_in_use_is_named(corpus: Path, tmp_path: Path) -> None:
    # "cannot join ... (The server socket has failed to listen ...); check torchrun's
    # --rdzv-endpoint": the port taken by another program was not said
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out = _finish(_alone(0, port, tmp_path / "run", corpus), 120)
    assert code == 2
    assert out.strip().splitlines() == [
        f"embedlab: error: cannot open the run's rendezvous at 127.0.0.1:{port}: the port is in "
        "use by another program (The server socket has failed to listen on any local network "
        "address); pass a free port (torchrun's --master-port, or --rdzv-endpoint HOST:PORT)"]
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_process_whose_partners_never_come_says_it_waits(corpus: Path, tmp_path: Path) -> None:
    # it waited in silence (for up to 4 hours)
    proc = _alone(1, _free_port(), tmp_path / "run", corpus)
    try:
        time.sleep(20)
    finally:
        proc.kill()
    out, _ = proc.communicate()
    assert "embedlab: process 1 of 2 is waiting for the run's other processes at 127.0.0.1:" \
        in out, out


@pytest.mark.slow
def test_a_launcher_killed_outright_leaves_one_line_per_process(corpus: Path,
                                                                 tmp_path: Path) -> None:
    # torchrun killed with SIGKILL takes the rendezvous store with it: each heartbeat and
    # exchange then printed a C++ warning of ~20 stack frames before the run's own line
    run = tmp_path / "run"
    proc = _torchrun(2, run, corpus)
    _wait_for_step(run, 120, proc)
    workers = [_worker(proc.pid, rank) for rank in (0, 1)]
    proc.kill()
    out, _ = proc.communicate(timeout=120)  # the workers hold the pipe until they end
    assert all(_gone(pid) for pid in workers)
    assert "frame #" not in out and "Exception raised from" not in out, out
    assert out.count("embedlab: error: another process of the run stopped or cannot be "
                     "reached") == 2, out


def test_after_a_lost_process_sigterm_stays_ignored_until_the_group_is_left() -> None:
    # the set-up's raising handler, put back as its block ended, cut the ignore short (a
    # scheduler's SIGTERM then killed process 0 before its one line), and leaving the group
    # put it back for good
    from embedlab.run.signals import terminate_as_interrupt
    from embedlab.training import distributed

    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with terminate_as_interrupt():
        distributed.finish_exit()  # the run lost a process: this one ends its exit
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN  # until the group is left
    distributed._restore_sigterm()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


@pytest.mark.parametrize(("given", "seconds"), [("", 60.0), ("3", 3.0),
                                                ("inf", 365 * 24 * 3600.0),
                                                ("1e300", 365 * 24 * 3600.0)])
def test_the_step_timeout_from_the_environment(monkeypatch: pytest.MonkeyPatch, given: str,
                                               seconds: float) -> None:
    """'inf' (never) waits a year, which a timedelta holds; an overflow was a traceback."""
    from datetime import timedelta

    from embedlab.training.distributed import step_timeout

    monkeypatch.setenv("EMBEDLAB_STEP_TIMEOUT", given)
    assert step_timeout() == seconds
    timedelta(seconds=2 * step_timeout())  # as the exchange's group asks for it


@pytest.mark.parametrize("given", ["abc", "nan", "0", "-5"])
def test_a_step_timeout_that_is_no_number_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                      given: str) -> None:
    from embedlab.errors import InputError
    from embedlab.training.distributed import step_timeout

    monkeypatch.setenv("EMBEDLAB_STEP_TIMEOUT", given)
    with pytest.raises(InputError, match=rf"^EMBEDLAB_STEP_TIMEOUT must be a number of seconds "
                                         rf"> 0, got '{given}'; unset it for 60, or pass inf"):
        step_timeout()
