"""``embedlab train`` end to end, in process: layout, bad input, resume rules, --restart/--from.

Every refused command must exit 2 with one ``embedlab: error:`` line, no traceback, and leave
an existing run folder byte for byte as it was.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import re
import shlex
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import embedlab.training.trainer  # noqa: F401  (imported before any capsys test binds stderr)
from embedlab import train as python_train
from embedlab.checkpoint import INDEX_FILE, find_checkpoint, load_checkpoint, read_index
from embedlab.cli import main
from embedlab.data.vocab import Vocab
from embedlab.engines.params import default_init_scale
from embedlab.errors import InputError
from embedlab.run.folder import choose_run_dir
from embedlab.testing import wrap_steps, write_zipf_corpus
from embedlab.training.api import explicit_options

FAST = ["--dim", "8", "--batch-size", "32", "--epochs", "2", "--threads", "1",
        "--no-tensorboard", "--log-every", "1", "--no-progress"]


def write_corpus(path: Path, *, lines: int = 400, **kw: Any) -> Path:
    return write_zipf_corpus(path, lines=lines, **kw)


def train(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    """(exit code, stderr) of ``embedlab train ARGS`` run in this process."""
    capsys.readouterr()
    try:
        main(["train", *(str(a) for a in args)])
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    return code, capsys.readouterr().err


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for folders)."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def assert_refused(code: int, err: str, needle: str = "") -> str:
    assert code == 2, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("embedlab: error:")]
    assert len(errors) == 1, err
    assert err.rstrip("\n").splitlines()[-1] == errors[0]
    assert needle in errors[0], errors[0]
    return errors[0]


def final_bytes(run: Path) -> bytes:
    return (find_checkpoint(run) / "tensors.safetensors").read_bytes()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "c.txt")


@pytest.fixture(scope="module")
def trained(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 2-epoch run with a checkpoint every 10 steps (keep 50). Do not modify."""
    run = tmp_path_factory.mktemp("trained") / "run"
    main(["train", "--run", str(run), "--corpus", str(corpus), *FAST,
          "--checkpoint-every", "10", "--keep", "50", "--best-metric", "loss:max"])
    return run


@pytest.fixture
def copy(trained: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(trained, target)
    return target


# ---- the one-step smoke test -----------------------------------------------------------------

def test_one_step_smoke_and_run_layout(corpus: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    code, err = train(capsys, "--run", run, "--corpus", corpus, "--dim", "8", "--threads", "1",
                      "--max-steps", "1", "--log-every", "1", "--no-progress")
    assert code == 0, err
    assert "stopped at --max-steps 1: step 1" in err
    ckpt = run / "checkpoints" / "ckpt-00000001"
    for name in ("config.json", "env.json", "vocab.tsv", "checkpoint", "metrics.jsonl",
                 "status.json", "prepared", "checkpoints", "checkpoints/ckpt-00000001"):
        assert (run / name).exists(), name
    assert {p.name for p in ckpt.iterdir()} == {"tensors.safetensors", "state.json",
                                                 "MANIFEST.json"}
    assert list(run.glob("events.out.tfevents.*")), "TensorBoard is on by default"
    assert not (run / ".lock").exists()

    config = json.loads((run / "config.json").read_text())
    assert config["model"]["dim"] == 8 and config["model"]["window"] == 5  # defaults spelled out
    assert config["threads"] == 1 and config["data"]["corpus"] == str(corpus)
    env = json.loads((run / "env.json").read_text())
    assert env["threads"] == 1 and env["seed"] == 1 and "init" in env["streams"]
    vocab = Vocab.load_tsv(run / "vocab.tsv")
    tensors, state = load_checkpoint(ckpt)
    assert tuple(tensors["input_embeddings"].shape) == (len(vocab), 8)
    assert state["step"] == 1
    assert read_index(run).latest == 1
    status = json.loads((run / "status.json").read_text())
    assert status["step"] == 1 and status["status"] in ("interrupted", "finished")
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows and math.isfinite(rows[0]["train/loss"]) and rows[0]["step"] == 1


# ---- bad input -------------------------------------------------------------------------------

def _bad_corpora(tmp: Path) -> dict[str, Path]:
    (tmp / "empty.txt").write_text("")
    (tmp / "binary.dat").write_bytes(bytes(range(256)) * 40)
    (tmp / "one.txt").write_text("hello\n")
    (tmp / "blanks.txt").write_text("\n  \n\t\n")
    (tmp / "abc.txt").write_text("a b c\n")
    (tmp / "lines.txt").write_text("a\nb\nc\n" * 20)
    return {p.stem: p for p in tmp.iterdir()}


# Each needle holds the problem and the fix the message names.
BAD = [
    (["--nproc", "0"], "--nproc must be from 1 to 1024, got 0; pass e.g. --nproc 2"),
    # each process imports torch: 2**63 processes were started one after another
    (["--nproc", "1025"], "--nproc must be from 1 to 1024, got 1025; pass e.g. --nproc 2"),
    (["--corpus", "{tmp}/missing.txt"], "missing.txt; pass an existing file or folder"),
    (["--corpus", "{tmp}/empty.txt"],
     "empty.txt holds no tokens; pass a corpus with whitespace-separated words"),
    (["--corpus", "{tmp}/blanks.txt"],
     "blanks.txt holds no tokens; pass a corpus with whitespace-separated words"),
    (["--corpus", "{tmp}/binary.dat"], "looks binary (it contains NUL bytes); pass UTF-8 text"),
    (["--corpus", "{corpus}", "--min-count", "100000"],
     "no word occurs at least --min-count 100000 times (the most frequent, 'w0', occurs 820 "
     "times); lower --min-count, e.g. --min-count 820"),
    (["--corpus", "{tmp}/one.txt", "--min-count", "1"],
     "fewer than a window needs; use a bigger corpus"),
    # these "finished" with untrained vectors and loss n/a
    (["--corpus", "{tmp}/abc.txt", "--min-count", "1"], "too few to form a pair; pass --sample 0"),
    (["--corpus", "{tmp}/lines.txt", "--min-count", "1"],
     "no sentence (line) with two in-vocabulary words, and contexts never cross a line end; "
     "put more than one word per line"),
    (["--corpus", "{corpus}", "--lr", "0"], "--lr must be a finite number > 0, got 0.0; "
                                            "pass e.g. --lr 0.025"),
    (["--corpus", "{corpus}", "--lr", "-1"], "--lr must be a finite number > 0, got -1.0; "
                                             "pass e.g. --lr 0.025"),
    (["--corpus", "{corpus}", "--lr", "nan"], "--lr must be a finite number > 0, got nan; "
                                              "pass e.g. --lr 0.025"),
    (["--corpus", "{corpus}", "--lr", "inf"], "--lr must be a finite number > 0, got inf; "
                                              "pass e.g. --lr 0.025"),
    (["--corpus", "{corpus}", "--dim", "0"], "--dim must be an integer > 0, got 0; "
                                             "pass e.g. --dim 100"),
    (["--corpus", "{corpus}", "--window", "0"], "--window must be an integer > 0, got 0; "
                                                "pass e.g. --window 5"),
    (["--corpus", "{corpus}", "--batch-size", "0"],
     "--batch-size must be an integer > 0, got 0; pass e.g. --batch-size 2048"),
    (["--corpus", "{corpus}", "--epochs", "-1"], "--epochs must be an integer > 0, got -1; "
                                                 "pass e.g. --epochs 5"),
    (["--corpus", "{corpus}", "--sample", "nan"],
     "--sample must be a finite number >= 0, got nan; pass e.g. --sample 0.001"),
    (["--corpus", "{corpus}", "--init-scale", "-1"],
     "--init-scale must be a finite number >= 0, got -1.0; pass e.g. --init-scale 8"),
    (["--corpus", "{corpus}", "--max-steps", "0"],
     "--max-steps must be an integer > 0, got 0; pass e.g. --max-steps 1000"),
    (["--corpus", "{corpus}", "--dim", "abc"],
     "'abc' is not a valid integer. (see 'embedlab train --help')"),
    (["--corpus", "{corpus}", "--restart", "--from", "best"],
     "--restart and --from exclude each other; pass one"),
    (["--corpus", "{corpus}", "--init-from", "{tmp}/nowhere"],
     "nowhere does not exist; pass a run folder, a checkpoint folder or a vectors file"),
    (["--corpus", "{corpus}", "--init-from", "{trained}", "--dim", "4"],
     "has dim 8, this run 4; pass a matching --dim"),
    # refused only once the corpus is read: they must not reach an existing run's config.json
    # first, or every later plain re-run would fail the same way
    (["--corpus", "{corpus}", "--probe", "zzzz"],
     "--probe word(s) not in the vocabulary: zzzz; pick words the corpus has (the most "
     "frequent: w0, w1, w2)"),
    (["--corpus", "{corpus}", "--probe", "W1"],
     "--probe word(s) not in the vocabulary: W1; did you mean w1, w10, w11? pick words"),

    (["--corpus", "{corpus}", "--eval-every", "5"],
     "--eval-every needs --eval-analogies FILE and/or --eval-similarity FILE"),
    (["--corpus", "{corpus}", "--eval-analogies", "{tmp}/nope.txt"],
     "--eval-analogies: analogy file {tmp}/nope.txt does not exist; download word2vec's "
     "questions-words.txt"),
    (["--corpus", "{corpus}", "--eval-similarity", "{tmp}/nope.tsv"],
     "--eval-similarity: similarity file {tmp}/nope.tsv does not exist"),
    # a best metric the run never records kept no best checkpoint (export --best failed later)
    (["--corpus", "{corpus}", "--best-metric", "foo"],
     "--best-metric foo is not a metric this run records; use loss, analogy"),
    (["--corpus", "{corpus}", "--best-metric", "analogy:max"], "pass --eval-analogies FILE"),
    (["--corpus", "{corpus}", "--best-metric", "similarity/ws"], "--eval-similarity ws.tsv"),
    # messages name the flag the user typed and end in a fix
    (["--corpus", "{corpus}", "--eval-restrict-vocab", "0"],
     "--eval-restrict-vocab must be an integer > 0, got 0; pass e.g. "
     "--eval-restrict-vocab 30000"),
    (["--corpus", "{corpus}", "--min-lr-ratio", "0"], "pass e.g. --min-lr-ratio 0.0001"),
    # a threshold on a word's share of the corpus: from 1 on it subsamples nothing
    (["--corpus", "{corpus}", "--sample", "5"], "--sample must be below 1, got 5.0: it is a "
     "threshold on a word's share of the corpus (typically 1e-3 to 1e-5; 0 = off), not a word "
     "count as gensim reads values >= 1; pass e.g. --sample 0.001"),
    (["--corpus", "{corpus}", "--sample", "1"], "--sample must be below 1, got 1.0"),
    (["--corpus", "{corpus}", "--min-lr-ratio", "2"], "pass e.g. --min-lr-ratio 0.0001"),
    (["--corpus", "{corpus}", "--threads", "-1"], "pass e.g. --threads 2"),
    (["--corpus", "{corpus}", "--interleave", "0"],
     "--interleave must be an integer > 0, got 0; pass e.g. --interleave 2"),
]

# On an existing run the resume config check comes first: these rows change a stored key, so
# they are refused there, naming the key(s) and the fix, and never reach the check they are
# named for (test_bad_input_new_run covers each of those on a new run).
CHANGED_ON_RESUME = {
    # a new run's --sample check: an existing run is refused for the change of config instead
    "--corpus {corpus} --sample 5": "--sample (stored 0.001, requested 5.0)",
    "--corpus {corpus} --sample 1": "--sample (stored 0.001, requested 1.0)",
    "--corpus {tmp}/missing.txt": "--corpus (stored '{corpus}', requested '{tmp}/missing.txt')",
    "--corpus {tmp}/empty.txt": "--corpus (stored '{corpus}', requested '{tmp}/empty.txt')",
    "--corpus {tmp}/blanks.txt": "--corpus (stored '{corpus}', requested '{tmp}/blanks.txt')",
    "--corpus {tmp}/binary.dat": "--corpus (stored '{corpus}', requested '{tmp}/binary.dat')",
    "--corpus {corpus} --min-count 100000": "--min-count (stored 5, requested 100000)",
    "--corpus {tmp}/one.txt --min-count 1":
        "--corpus (stored '{corpus}', requested '{tmp}/one.txt'); "
        "--min-count (stored 5, requested 1)",
    "--corpus {tmp}/abc.txt --min-count 1":
        "--corpus (stored '{corpus}', requested '{tmp}/abc.txt'); "
        "--min-count (stored 5, requested 1)",
    "--corpus {tmp}/lines.txt --min-count 1":
        "--corpus (stored '{corpus}', requested '{tmp}/lines.txt'); "
        "--min-count (stored 5, requested 1)",
    "--corpus {corpus} --init-from {tmp}/nowhere": "--init-from (stored None, requested "
                                                   "'{tmp}/nowhere')",
    "--corpus {corpus} --init-from {trained} --dim 4":
        "--init-from (stored None, requested '{trained}'); --dim (stored 8, requested 4)",
}
RESUME_FIX = "Drop those flags to resume, pass --restart to start over, or use another --run"


def test_changed_on_resume_lists_rows_of_bad() -> None:
    assert set(CHANGED_ON_RESUME) <= {" ".join(args) for args, _ in BAD}


@pytest.mark.parametrize(("args", "needle"), BAD)
def test_bad_input_new_run(corpus: Path, trained: Path, tmp_path: Path, args: list[str],
                           needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    _bad_corpora(tmp_path)
    fmt = {"tmp": tmp_path, "corpus": corpus, "trained": trained}
    before = snapshot(trained)
    code, err = train(capsys, "--run", tmp_path / "new", *FAST, *(a.format(**fmt) for a in args))
    assert_refused(code, err, needle.format(**fmt))
    assert "new run" not in err  # the refusal is the only line
    assert snapshot(trained) == before
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(("args", "needle"), BAD)
def test_bad_input_leaves_an_existing_run_untouched(corpus: Path, trained: Path, copy: Path,
                                                    tmp_path: Path, args: list[str],
                                                    needle: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    _bad_corpora(tmp_path)
    fmt = {"tmp": tmp_path, "corpus": corpus, "trained": trained}
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, *FAST, *(a.format(**fmt) for a in args))
    changed = CHANGED_ON_RESUME.get(" ".join(args))
    if changed is None:
        line = assert_refused(code, err, needle.format(**fmt))
        assert "different config" not in line
    else:  # the whole list of changed keys, then the fix
        assert_refused(code, err, f"run {copy} was trained with a different config: "
                                  f"{changed.format(**fmt)}. {RESUME_FIX}")
    assert "resuming" not in err
    assert snapshot(copy) == before
    # ...and the plain command still resumes (nothing of the refused one was kept)
    assert train(capsys, "--run", copy, *FAST)[0] == 0


def test_run_pointing_at_a_file(corpus: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("precious")
    code, err = train(capsys, "--run", f, "--corpus", corpus, *FAST)
    assert_refused(code, err, "notes.txt is a file, not a folder; pass a folder path")
    assert f.read_text() == "precious"


@pytest.mark.parametrize(("first", "fix", "fixed"), [
    (["--min-count", "100000"], "; lower --min-count", []),
    (["--corpus", "{tmp}/one.txt", "--min-count", "1"], "; use a bigger corpus", []),
])
def test_a_refused_new_run_can_be_fixed_by_following_the_message(
        corpus: Path, tmp_path: Path, first: list[str], fix: str, fixed: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    # The error says "lower --min-count" / "use a bigger corpus": doing exactly that, with the
    # same --run, must work - the failed attempt must not have pinned its config to the folder.
    _bad_corpora(tmp_path)
    run = tmp_path / "run"
    args = [a.format(tmp=tmp_path) for a in first]
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, *args)
    assert_refused(code, err, fix)
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "2",
                      *fixed)
    assert code == 0, err


# ---- resume rules ----------------------------------------------------------------------------

def test_changed_dim_is_refused_naming_the_key(copy: Path, corpus: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--dim", "9",
                      "--window", "3")
    line = assert_refused(code, err, "--dim (stored 8, requested 9)")
    assert f"--window (stored 5, requested 3). {RESUME_FIX}" in line
    assert snapshot(copy) == before


def test_lowered_epochs_is_refused(copy: Path, corpus: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--epochs", "1")
    assert_refused(code, err, f"--epochs (stored 2, requested 1: it may be raised to train "
                              f"on, not lowered). {RESUME_FIX}")
    assert snapshot(copy) == before


def test_mutable_flags_are_allowed_on_resume(copy: Path, corpus: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    before = final_bytes(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--max-steps", "1000",
                      "--keep", "2", "--log-every", "7", "--threads", "2",
                      "--checkpoint-every", "3", "--no-tensorboard")
    assert code == 0, err
    # the native engine's bits do not depend on the thread count: nothing to warn about
    assert "warning" not in err
    assert final_bytes(copy) == before  # finished already: nothing more to train


def test_raised_epochs_continue_training(copy: Path, corpus: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    old = json.loads((copy / "status.json").read_text())["step"]
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST[:4], "--epochs", "3",
                      *FAST[6:])
    assert code == 0, err
    status = json.loads((copy / "status.json").read_text())
    assert status["status"] == "finished" and status["step"] > old
    assert json.loads((copy / "config.json").read_text())["optim"]["epochs"] == 3
    # the rate jumps from the floor of 2 epochs' decay to a third of --lr: said, with numbers
    assert (f"embedlab: --epochs 3 (was 2): the learning rate decays to the end of epoch 3 "
            f"from here, 0.00833333 at step {old} (2.5e-06 with 2 epochs)\n") in err


def test_raised_epochs_under_a_constant_rate_say_nothing_decays(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    args = ["--run", run, "--corpus", corpus, *FAST[:4], *FAST[6:], "--min-lr-ratio", "1",
            "--lr", "0.05"]
    assert train(capsys, *args, "--epochs", "1")[0] == 0
    code, err = train(capsys, *args, "--epochs", "2")
    assert code == 0 and ("embedlab: --epochs 2 (was 1): training goes on to the end of epoch 2 "
                          "at the constant rate 0.05\n") in err


def test_raised_epochs_with_no_step_to_train_are_not_announced(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A resume already at --max-steps trains nothing and keeps the run's --epochs: the line
    that says the rate now decays to the new end would announce what does not happen."""
    step = json.loads((copy / "status.json").read_text())["step"]
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST[:4], "--epochs", "3",
                      *FAST[6:], "--max-steps", str(step))
    assert code == 0, err
    assert "(was 2)" not in err and f"stopped at --max-steps {step}: step {step}," in err
    assert json.loads((copy / "config.json").read_text())["optim"]["epochs"] == 2


def test_a_finished_run_names_the_command_that_trains_it_further(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    typed: list[str | Path] = ["--corpus", corpus, "--runs-dir", runs, *FAST]
    code, err = train(capsys, *typed)
    assert code == 0, err
    (run,) = runs.iterdir()
    step = json.loads((run / "status.json").read_text())["step"]
    code, err = train(capsys, *typed)  # the same command again
    assert code == 0, err
    assert "resuming" not in err  # one line says what happened, and it is not a resume
    (line,) = [x for x in err.splitlines() if "already finished" in x]
    assert line == (f"embedlab: {run} already finished at step {step} (2 epochs); to train "
                    f"more: embedlab train --run {run} --epochs N (N > 2); to start over: add "
                    "--restart")
    # the command it names, typed with N = 3, trains the same run on
    named = re.search(r"to train more: embedlab (train .*) --epochs N ", line)
    assert named is not None
    code, err = train(capsys, *shlex.split(named.group(1))[1:], "--epochs", "3")
    assert code == 0, err
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "finished" and status["step"] > step
    assert list(runs.iterdir()) == [run]
    # from Python, the same line names the call
    python_train(run=run)
    assert (f"already finished at step {status['step']} (3 epochs); to train more: "
            f"embedlab.train(run={str(run)!r}, epochs=N) (N > 3); to start over: add "
            "restart=True\n") in capsys.readouterr().err
    # while the same flags with another --epochs name another run, as they always did
    explicit = explicit_options({"corpus": str(corpus), "dim": 8, "batch_size": 32,
                                 "epochs": 4, "threads": 1})
    assert choose_run_dir(runs, explicit, None) == runs / run.name.replace("-e2", "-e4")


class Terminal(io.StringIO):
    """stderr as a terminal shows it: the progress bar is drawn."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("log_every", ["1", "7"])  # the last window full, or partial
def test_the_finished_bar_shows_the_final_loss_and_rate(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log_every: str) -> None:
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    run = tmp_path / "run"
    main(["train", "--run", str(run), "--corpus", str(corpus), *FAST[:-3], "--log-every",
          log_every, "--progress"])
    last_frame = terminal.getvalue().split("\r")[-1]
    assert "100%" in last_frame
    final_loss = json.loads((run / "status.json").read_text())["loss"]
    # --lr 0.025 decays to 0.025 * --min-lr-ratio 0.0001
    assert f"loss={final_loss:.4f}, lr=2.50e-06]" in last_frame, last_frame


def test_same_command_twice_resumes_to_identical_bytes(
        corpus: Path, trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    args: list[str | Path] = ["--run", run, "--corpus", corpus, *FAST, "--checkpoint-every",
                              "10", "--keep", "50", "--best-metric", "loss:max"]
    assert train(capsys, *args, "--max-steps", "33")[0] == 0
    code, err = train(capsys, *args)
    assert code == 0, err
    assert final_bytes(run) == final_bytes(trained)


# ---- tokenising in a child while the torch engine imports torch (embedlab.data.ahead) --------

@pytest.fixture
def child_prepares(monkeypatch: pytest.MonkeyPatch) -> list[bool | str]:
    """Make every new run tokenise in a child (this process has torch imported already, so the
    real policy would say no); returns what each PrepareAhead.take returned or raised."""
    from embedlab.data import tokenise_child as ahead

    taken: list[bool | str] = []
    take = ahead.PrepareAhead.take

    def spy(self: ahead.PrepareAhead, dest: Path) -> bool:
        try:
            result = take(self, dest)
        except InputError:
            taken.append("InputError")
            raise
        taken.append(result)
        return result

    monkeypatch.setattr(ahead, "should_prepare_ahead", lambda data, **kw: True)
    monkeypatch.setattr(ahead.PrepareAhead, "take", spy)
    return taken


def test_a_corpus_tokenised_in_a_child_trains_to_the_same_bytes(
        corpus: Path, trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        child_prepares: list[bool | str]) -> None:
    run = tmp_path / "run"
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--checkpoint-every",
                      "10", "--keep", "50", "--best-metric", "loss:max")
    assert code == 0, err
    assert child_prepares == [True]
    assert final_bytes(run) == final_bytes(trained)
    assert (run / "prepared" / "ids.u32").read_bytes() == \
        (trained / "prepared" / "ids.u32").read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # no private folder left


_SPY = """
import sys
from embedlab.data import tokenise_child as ahead
take = ahead.PrepareAhead.take
def spy(self, dest):
    print("torch imported while the child worked:", "torch" in sys.modules, flush=True)
    result = take(self, dest)
    print("child prepared:", result, flush=True)
    return result
ahead.PrepareAhead.take = spy
from embedlab.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("engine", ["torch", "native"])
def test_a_fresh_process_tokenises_a_big_corpus_in_a_child_for_torch(tmp_path: Path,
                                                                     engine: str) -> None:
    """The real policy in a real process: with the torch engine, torch must not be imported
    before the child starts (an eager torch import on the CLI's path would silently cost the
    overlap); the native engine, which imports no torch, tokenises in-process."""
    import subprocess
    import sys

    from embedlab.data.tokenise_child import MIN_BYTES

    big = write_corpus(tmp_path / "big.txt", lines=30_000, vocab=2000)
    assert big.stat().st_size >= MIN_BYTES
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", _SPY, "train", "--run", str(run), "--corpus",
                           str(big), *FAST, "--max-steps", "1", "--engine", engine],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert ("child prepared: True" in proc.stdout) == (engine == "torch")
    if engine == "torch":  # the point of the child: torch's import runs beside it, not after
        assert "torch imported while the child worked: True" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt", "run"]


def test_a_bad_corpus_tokenised_in_a_child_is_refused_cleanly(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        child_prepares: list[bool | str]) -> None:
    garbage = tmp_path / "data" / "garbage.bin"
    garbage.parent.mkdir()
    garbage.write_bytes(b"\x00\x01" * 5000)
    runs = tmp_path / "runs"
    code, err = train(capsys, "--run", runs / "r", "--corpus", garbage, *FAST)
    assert_refused(code, err, "looks binary (it contains NUL bytes); pass UTF-8 text")
    assert child_prepares == ["InputError"]
    # neither the run nor the child's folder is left, nor runs/, which the command created
    assert not runs.exists()


# ---- --restart / --from / --init-from --------------------------------------------------------

def test_a_resume_that_trains_nothing_keeps_the_runs_config(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A finished run asked for a third epoch but stopped at a --max-steps it has passed: nothing
    is trained, so its config keeps 2 epochs and the command that made it still resumes."""
    before = (copy / "config.json").read_text()
    more = [a if a != "2" else "3" for a in FAST]  # --epochs 3
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *more, "--max-steps", "5")
    assert code == 0 and "already past --max-steps 5" in err, err
    assert (copy / "config.json").read_text() == before
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST)
    assert code == 0, err


def test_restart_starts_over_with_the_runs_own_settings(tmp_path: Path, corpus: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """``--run DIR --restart`` alone: the run as it was set up (not the defaults' demo run);
    flags given override its settings."""
    run = tmp_path / "run"
    setup = ["--corpus", corpus, "--dim", "6", "--window", "2", "--loss", "nce", "--seed", "7",
             "--batch-size", "32", "--epochs", "1", "--threads", "1", "--no-tensorboard",
             "--no-progress"]
    code, err = train(capsys, "--run", run, *setup, "--max-steps", "3")
    assert code == 0, err
    first = json.loads((run / "config.json").read_text())
    code, err = train(capsys, "--run", run, "--restart", "--max-steps", "3")
    assert code == 0, err
    assert "starting over with its settings and the ones given" in err
    again = json.loads((run / "config.json").read_text())
    machine = ("max_steps", "engine", "threads")  # this call's and this machine's
    assert {k: v for k, v in again.items() if k not in machine} == \
        {k: v for k, v in first.items() if k not in machine}
    old = next(tmp_path.glob("run.old-*"))  # the same run again: the same vectors
    assert (run / "checkpoints" / "ckpt-00000003" / "tensors.safetensors").read_bytes() == \
        (old / "checkpoints" / "ckpt-00000003" / "tensors.safetensors").read_bytes()
    code, err = train(capsys, "--run", run, "--restart", "--dim", "4", "--max-steps", "2")
    assert code == 0, err
    third = json.loads((run / "config.json").read_text())
    assert third["model"]["dim"] == 4 and third["model"]["loss"] == "nce"
    assert third["data"]["corpus"] == str(corpus) and third["seed"] == 7


def test_restart_refusals_and_fallbacks(tmp_path: Path, corpus: Path,
                                        monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A damaged config.json is what --restart is for: it starts over from the flags given. A
    corpus the config names by a path that is not found from here is one line naming the fix;
    a run's settings chosen with a value older runs had are its own, and kept."""
    run = tmp_path / "run"
    setup = ["--corpus", corpus.name, "--dim", "6", "--interleave", "1", "--batch-size", "32",
             "--epochs", "1", "--threads", "1", "--no-tensorboard", "--no-progress"]
    monkeypatch.chdir(corpus.parent)
    code, err = train(capsys, "--run", run, *setup, "--max-steps", "2")
    assert code == 0, err
    code, err = train(capsys, "--run", run, "--restart", "--max-steps", "2")
    assert code == 0, err
    assert json.loads((run / "config.json").read_text())["optim"]["interleave"] == 1
    monkeypatch.chdir(tmp_path)  # corpus.name is not found from here, but from the run's folder
    code, err = train(capsys, "--run", run, "--restart", "--max-steps", "2")
    assert code == 0, err
    (run / "config.json").write_text((run / "config.json").read_text().replace(
        str(corpus), "gone.txt"))  # named where it is found from neither
    code, err = train(capsys, "--run", run, "--restart", "--max-steps", "2")
    # (the run was made again from here by the restart above: here is its folder too)
    assert code == 2 and err == (f"embedlab: error: --restart: run {run}'s corpus gone.txt (as its "
                                 f"config.json names it) is not found from {tmp_path}; pass "
                                 "--corpus with its path\n")
    monkeypatch.chdir(corpus.parent)  # from elsewhere, both folders are named
    code, err = train(capsys, "--run", run, "--restart", "--max-steps", "2")
    assert code == 2 and err.endswith(f"is not found from {corpus.parent}, nor from {tmp_path}, "
                                      "where the run was made; pass --corpus with its path\n")
    (run / "config.json").write_text("{damaged")
    # without --corpus, the settings are nowhere: not the built-in demo at the defaults
    code, err = train(capsys, "--run", run, "--restart", "--max-steps", "2")
    assert code == 2 and err == (f"embedlab: error: --restart: run {run} has no readable "
                                 "config.json to take its settings from; pass --corpus and the "
                                 "other settings of the new run\n")
    code, err = train(capsys, "--run", run, "--restart", "--preset", "cs20", "--max-steps", "2")
    assert code == 2 and "has no readable config.json" in err  # cs20 names no corpus either
    (tmp_path / "empty").mkdir()  # no run at all: a new one, as without --restart
    code, err = train(capsys, "--run", tmp_path / "empty", "--restart", "--max-steps", "1",
                      "--threads", "1", "--no-tensorboard", "--no-progress")
    assert code == 0, err
    code, err = train(capsys, "--run", run, "--restart", "--corpus", corpus, "--dim", "5",
                      "--batch-size", "32", "--threads", "1", "--no-tensorboard", "--max-steps",
                      "2", "--no-progress")
    assert code == 0, err
    assert "starting over with its settings" not in err
    assert json.loads((run / "config.json").read_text())["model"]["dim"] == 5


def test_restart_moves_the_old_run_aside(copy: Path, corpus: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--restart",
                      "--dim", "4", "--max-steps", "3")
    assert code == 0, err
    olds = list(copy.parent.glob("run.old-*"))
    assert len(olds) == 1 and f"moved the old run to {olds[0]}" in err
    assert snapshot(olds[0]) == before  # nothing deleted or changed
    assert json.loads((copy / "config.json").read_text())["model"]["dim"] == 4
    assert sorted(p.name for p in (copy / "checkpoints").iterdir()) == ["ckpt-00000003"]


@pytest.mark.parametrize("given", ["ckpt-00000020", "20"])  # a name, or the step alone
def test_from_a_checkpoint_moves_newer_ones_aside_and_replays(
        copy: Path, trained: Path, corpus: Path, capsys: pytest.CaptureFixture[str],
        given: str) -> None:
    newer = sorted(p.name for p in (copy / "checkpoints").iterdir()
                   if p.name > "ckpt-00000020")
    assert newer
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--from", given)
    assert code == 0, err
    abandoned = list(copy.glob("checkpoints-abandoned-*"))
    assert len(abandoned) == 1 and f"moved {len(newer)} newer checkpoint(s)" in err
    assert sorted(p.name for p in abandoned[0].iterdir()) == newer
    # the same run resumed from step 20 replays the same steps: the same final vectors
    assert final_bytes(copy) == final_bytes(trained)


def test_a_from_that_saves_nothing_leaves_an_index_of_what_is_there(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the index still named the moved checkpoints: no latest in the listing, and --best
    # said "ckpt-... is missing"
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--from", "20",
                      "--max-steps", "20")
    assert code == 0, err
    index = read_index(copy)
    assert index.latest == 20 and max(index.ours()) == 20
    assert index.best is not None and index.best <= 20
    assert find_checkpoint(copy, best=True).name == f"ckpt-{index.best:08d}"


def test_from_an_abandoned_branch_is_refused(copy: Path, corpus: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    # resumed from there, metrics.jsonl lost rows and checkpoints/ held two branches' steps
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--from", "20",
                      "--max-steps", "30")
    assert code == 0, err
    branch = next(copy.glob("checkpoints-abandoned-*"))
    moved = sorted(branch.iterdir())[-1]
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--from", moved)
    assert_refused(code, err, f"--from {moved}: {moved} is not one of the run's own "
                              f"checkpoints (in {copy / 'checkpoints'}; a branch --from moved "
                              "aside, or a copy); resume from one of those, or start a new run "
                              "from it with --init-from")
    assert snapshot(copy) == before


def test_from_best(copy: Path, trained: Path, corpus: Path,
                   capsys: pytest.CaptureFixture[str]) -> None:
    best = read_index(copy).best
    assert best is not None and best < read_index(copy).latest  # type: ignore[operator]
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--from", "best")
    assert code == 0, err
    abandoned = next(copy.glob("checkpoints-abandoned-*"))
    steps = sorted(int(p.name.split("-")[1]) for p in abandoned.iterdir())
    assert steps and min(steps) > best
    assert final_bytes(copy) == final_bytes(trained)


@pytest.mark.parametrize("given", ["ckpt-00000007", "²"])  # "²" is a digit, not a step
def test_from_a_missing_checkpoint_is_refused(copy: Path, corpus: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              given: str) -> None:
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--from", given)
    newest = ", ".join(sorted(p.name for p in (copy / "checkpoints").iterdir())[-3:])
    assert_refused(code, err, f"--from {given}: no such checkpoint ({copy} has {newest} "
                              "and older); pass one of them (or its step), 'best', 'latest' or a "
                              f"checkpoint folder (list them: embedlab ckpt {copy})")
    assert snapshot(copy) == before


@pytest.mark.parametrize("bad", [["--lr", "0"], ["--sample", "1.5"], ["--probe", "zzzz"],
                                 ["--best-metric", "foo"], ["--corpus", "{tmp}/missing.txt"]],
                         ids=["flag", "new-run-check", "probe", "best-metric", "corpus"])
def test_a_refused_restart_leaves_the_old_run_in_place(
        copy: Path, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        bad: list[str]) -> None:
    # --restart moved the old run aside first, then the new run was refused: RUN was gone from
    # its path (moved to RUN.old-*) by a command that did nothing else. It now comes back, and
    # says so (the move is announced at once, in case anything else goes wrong later).
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--restart",
                      *(a.format(tmp=tmp_path) for a in bad))
    assert_refused(code, err)
    if bad[0] in ("--lr", "--sample"):  # a bad value is refused before anything moves
        assert err.count("\n") == 1
    else:
        assert f"embedlab: --restart: put the old run back at {copy}\n" in err
        assert "moved the old run to" in err.splitlines()[0]
    assert snapshot(copy) == before
    assert not list(copy.parent.glob("run.old-*"))


@pytest.mark.parametrize("inside", ["", "checkpoints"])
def test_a_restart_warm_started_from_itself_is_refused_first(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str], inside: str) -> None:
    # the run was moved aside, put back, and then "holds no checkpoints", which it does
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--restart",
                      "--init-from", copy / inside)
    assert_refused(code, err, f"--init-from {copy / inside} is inside the run --restart moves "
                              "aside; copy from another run, or restart without --init-from")
    assert "moved the old run" not in err
    assert snapshot(copy) == before


@pytest.mark.parametrize("code, fix", [(errno.ENOSPC, "free disk space"),
                                       (errno.EDQUOT, "free space within your disk quota")])
def test_a_restart_whose_first_save_fails_is_told_to_restart_again(
        copy: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], code: int, fix: str) -> None:
    """The old run is put back: the same command, --restart included, starts over (without
    --restart it would resume the old run)."""
    from embedlab.checkpoint import tensor_file

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(tensor_file, "write", full)
    before = snapshot(copy)
    status, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--restart")
    assert f"put the old run back at {copy}" in err
    assert err.splitlines()[-1] == (
        f"embedlab: error: could not save checkpoint at step 10 in {copy / 'checkpoints'}: "
        f"{os.strerror(code)}; {fix}, then re-run the same command"), err
    assert status == 2 and snapshot(copy) == before


def test_ctrl_c_before_training_puts_a_restarted_run_back(
        copy: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from embedlab.training import setup

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(setup, "open_corpus", interrupted)
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--restart")
    assert code == 130, err
    assert f"put the old run back at {copy}" in err
    assert snapshot(copy) == before
    assert not list(copy.parent.glob("run.old-*"))


def test_ctrl_c_right_after_the_move_puts_a_restarted_run_back(
        copy: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Between the move and the new run (a third of a second loading the trainer) a Ctrl-C
    left the old run aside for good; the command re-run then trained the demo corpus."""
    from embedlab.training import restart

    spell, calls = restart.spell, []

    def ctrl_c_once(*args: Any, **kwargs: Any) -> str:
        calls.append(args)
        if len(calls) == 1:  # the line that says where the old run went
            raise KeyboardInterrupt
        return spell(*args, **kwargs)

    monkeypatch.setattr(restart, "spell", ctrl_c_once)
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--restart")
    assert code == 130, err
    assert f"put the old run back at {copy}" in err
    assert snapshot(copy) == before and not list(copy.parent.glob("run.old-*"))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_while_the_run_is_set_up_puts_a_restarted_run_back(
        copy: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], signum: int) -> None:
    # before the loop took the signals over, SIGTERM killed the process where it stood: the
    # old run stayed moved aside as run.old-*, with no word
    from embedlab.training import setup

    def terminated(*args: object, **kwargs: object) -> None:
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the handler raises before this ends
        raise AssertionError("the signal did not interrupt the set-up")

    monkeypatch.setattr(setup, "open_corpus", terminated)
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--restart")
    assert code == 128 + signum, err
    assert f"put the old run back at {copy}" in err
    assert err.splitlines()[-1] == (f"stopped by {signal.Signals(signum).name} before training "
                                    "began or after it ended; the run's checkpoints are as they "
                                    "were — re-run the same command")
    assert snapshot(copy) == before
    assert not list(copy.parent.glob("run.old-*"))
    assert signal.getsignal(signum) == signal.SIG_DFL  # the handlers are the caller's again


def test_a_signal_before_training_puts_a_restarted_run_back(
        copy: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # SIGTERM while the new run's writers open: nothing trained, the new folder is removed,
    # and the old run must come back (it stayed moved aside as run.old-*)
    from embedlab.testing import signal_while_writers_open

    signal_while_writers_open(monkeypatch, 15)
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--restart")
    assert code == 143, err
    assert "stopped before training began; no checkpoint was saved" in err
    assert f"put the old run back at {copy}" in err
    assert snapshot(copy) == before
    assert not list(copy.parent.glob("run.old-*"))


def test_a_signal_while_setting_up_in_an_existing_folder_binds_no_config(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Ctrl-C before the first step of a new run in a folder that already existed: config.json
    # stayed, and the corrected command was refused as a resume of a different config
    from embedlab.testing import signal_while_writers_open

    run = tmp_path / "mine"
    run.mkdir()
    with monkeypatch.context() as m:
        signal_while_writers_open(m, 2)
        code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST)
    assert code == 130, err
    assert "stopped before training began; no checkpoint was saved" in err
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--dim", "6")
    assert code == 0, err
    assert json.loads((run / "config.json").read_text())["model"]["dim"] == 6


def test_restart_of_the_current_folder(copy: Path, corpus: Path,
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    # "--run ." must not fail in Path.with_name with a traceback
    monkeypatch.chdir(copy)
    code, err = train(capsys, "--run", ".", "--corpus", corpus, *FAST, "--restart",
                      "--max-steps", "2")
    assert code == 0, err
    assert len(list(copy.parent.glob("run.old-*"))) == 1
    assert sorted(p.name for p in (copy / "checkpoints").iterdir()) == ["ckpt-00000002"]


def test_restart_of_a_run_reached_by_a_link_moves_the_run_not_the_link(
        copy: Path, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The run on another disk, a link to it here: the old run goes aside beside itself and the
    new one is made where the link points (the link was moved and the old run left in place)."""
    link = tmp_path / "link"
    link.symlink_to(copy)
    before = snapshot(copy)
    code, err = train(capsys, "--run", link, "--corpus", corpus, *FAST, "--restart",
                      "--max-steps", "2")
    assert code == 0, err
    olds = list(copy.parent.glob("run.old-*"))
    assert len(olds) == 1 and snapshot(olds[0]) == before
    assert link.is_symlink() and link.resolve() == copy.resolve()
    assert sorted(p.name for p in (copy / "checkpoints").iterdir()) == ["ckpt-00000002"]


def test_restart_of_a_run_in_use_is_refused_before_anything_moves(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Moving the folder from under the training process would leave it writing to paths now
    # owned by the new run.
    from embedlab.run.lock import RunLock

    with RunLock(copy, argv=["embedlab", "train", "--run", str(copy)]):
        before = snapshot(copy)
        code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--restart")
        assert_refused(code, err, f"run {copy} is in use by pid {os.getpid()}; wait for it to "
                                  "finish or stop it")
        assert snapshot(copy) == before
    assert not list(copy.parent.glob("run.old-*"))


@pytest.mark.parametrize("flags", [["--dim", "50"], ["--from", "best"]],
                         ids=["other-flags", "from-best"])
def test_a_run_in_use_is_named_before_its_flags_are_compared(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str], flags: list[str]) -> None:
    """A second trainer with other flags was told the config differs; dropping them was then
    refused as "in use": the holder is the obstacle to name first."""
    from embedlab.run.lock import RunLock

    with RunLock(copy, argv=["embedlab", "train", "--run", str(copy)]):
        code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, *flags)
        assert_refused(code, err, f"run {copy} is in use by pid {os.getpid()}; wait for it to "
                                  "finish or stop it")


def test_a_refused_from_leaves_the_newer_checkpoints(copy: Path, corpus: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # --from moved the newer checkpoints aside before the checks that need the corpus ran
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--from",
                      "ckpt-00000020", "--probe", "zzzz")
    assert_refused(code, err, "--probe word(s) not in the vocabulary: zzzz")
    assert "newer checkpoint" not in err
    assert snapshot(copy) == before


def test_a_stop_after_from_moved_the_newer_checkpoints_says_where_they_are(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C after --from moved the newer checkpoints aside but before training began: the
    line says where they went and from which step the run resumes, not that they are as they
    were."""
    import embedlab.training.setup as setup

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(setup, "write_config_json", interrupted)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--from", "20")
    abandoned, = copy.glob("checkpoints-abandoned-*")
    assert code == 130
    assert err.splitlines()[-1] == (
        f"stopped by SIGINT before training began or after it ended; --from had moved "
        f"the checkpoints newer than step 20 to {abandoned}, and the run resumes from step 20 — "
        "re-run the same command")


def test_from_a_step_of_a_run_whose_checkpoints_folder_is_a_link(
        copy: Path, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """RUN/checkpoints moved to another disk and linked back: --from 20 is the run's own."""
    elsewhere = tmp_path / "other-disk" / "ckpts"
    elsewhere.parent.mkdir()
    shutil.move(copy / "checkpoints", elsewhere)
    (copy / "checkpoints").symlink_to(elsewhere)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--from", "20",
                      "--max-steps", "21")
    assert code == 0, err
    assert (elsewhere / "ckpt-00000021").is_dir()


def test_a_stop_after_training_began_from_a_moved_branch_does_not_name_the_move(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once training began the run saves past the --from step: a Ctrl-C then no longer says
    the run resumes from that step."""
    import embedlab.training.loop as loop

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(loop, "_finish", interrupted)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--from", "20")
    assert code == 130 and "--from had moved" not in err, err


def test_from_another_runs_checkpoint_is_refused(copy: Path, trained: Path, corpus: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # It was accepted: the run went on with the other run's weights under its own name, config
    # and history. --init-from is the way to start from other vectors.
    foreign = trained / "checkpoints" / "ckpt-00000020"
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--from", foreign)
    assert_refused(code, err, f"--from {foreign}: {foreign} is not a checkpoint of run {copy}; "
                              f"--from takes the run's own checkpoints (list them: embedlab ckpt "
                              f"{copy}). To start a new run from its vectors, pass --init-from "
                              f"{foreign} with a new --run")
    assert snapshot(copy) == before
    # the run's own checkpoint named by its path is still accepted
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--from",
                      copy / "checkpoints" / "ckpt-00000020")
    assert code == 0, err


@pytest.mark.parametrize("error", [RuntimeError("a bug"), MemoryError()], ids=["bug", "memory"])
def test_a_restart_that_fails_puts_the_old_run_back(
        copy: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], error: BaseException) -> None:
    # Any failure puts it back, not only a refusal or Ctrl-C: a traceback, memory or a full disk
    # must not leave the old run at RUN.old-* and a half-made new one at RUN.
    from embedlab.training import setup

    def failing(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(setup, "NoiseDistribution", failing)
    before = snapshot(copy)
    if isinstance(error, MemoryError):
        code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--restart")
        assert_refused(code, err, "out of memory;")
    else:
        with pytest.raises(RuntimeError, match="a bug"):
            main(["train", "--run", str(copy), "--corpus", str(corpus), *FAST, "--restart"])
        err = capsys.readouterr().err
    assert f"put the old run back at {copy}" in err
    assert snapshot(copy) == before
    assert not list(copy.parent.glob("run.old-*"))


def test_a_new_run_that_fails_before_its_first_checkpoint_leaves_nothing(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # e.g. --batch-size 99999999999: a MemoryError traceback left config.json behind, and the
    # corrected command was then refused as a resume with a different --batch-size
    def out_of_memory(step: Any) -> Any:
        def fail(*a: object) -> float:
            raise MemoryError
        return fail

    run = tmp_path / "runs" / "r"
    with monkeypatch.context() as m:
        wrap_steps(m, out_of_memory)
        code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST)
    assert_refused(code, err, "out of memory;")
    assert not (tmp_path / "runs").exists()
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "2")
    assert code == 0, err


@pytest.fixture
def subset(trained: Path, tmp_path: Path) -> Path:
    out = tmp_path / "subset"
    main(["ckpt", str(trained), "--export-subset", str(out), "--names", "input_embeddings"])
    return out


def test_init_from_a_vectors_file_takes_its_input_vectors(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vectors = tmp_path / "vectors.bin"
    vectors.write_bytes(b"1 2\na " + bytes(8) + b"\n")
    code, err = train(capsys, "--run", tmp_path / "run", "--corpus", corpus, *FAST,
                      "--init-from", vectors)
    assert_refused(code, err, f"--init-from {vectors} holds vectors of dim 2, this run 8; pass "
                              "--dim 2")
    code, err = train(capsys, "--run", tmp_path / "run", "--corpus", corpus, *FAST,
                      "--dim", "2", "--init-from", vectors, "--max-steps", "1")
    assert code == 0, err
    assert f"embedlab: warm start from {vectors}: copied 0 of " in err


def test_init_from_a_subset_without_output_vectors_is_one_line(
        subset: Path, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a documented way to make a checkpoint (ckpt --export-subset); it raised KeyError
    code, err = train(capsys, "--run", tmp_path / "warm", "--corpus", corpus, *FAST,
                      "--init-from", subset)
    ckpt = find_checkpoint(subset)
    assert_refused(code, err, f"--init-from {subset}: checkpoint {ckpt} has no "
                              "output_embeddings (it holds input_embeddings); pass a run or a "
                              "full checkpoint, or export a subset with both")
    assert not (tmp_path / "warm").exists()


def test_init_from_a_run_whose_vocabulary_does_not_fit_is_one_line(
        trained: Path, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # one word too many in vocab.tsv raised IndexError; shifted lines would copy wrong rows
    source = tmp_path / "source"
    shutil.copytree(trained, source)
    vocab = source / "vocab.tsv"
    vocab.write_text("zzfirst\t999\n" + vocab.read_text())
    words = len(Vocab.load_tsv(vocab))
    code, err = train(capsys, "--run", tmp_path / "warm", "--corpus", corpus, *FAST,
                      "--init-from", source)
    assert_refused(code, err, f"{vocab} lists {words} words but checkpoint "
                              f"{find_checkpoint(source)} has {words - 1} rows of input "
                              "embeddings; copy ")
    assert not (tmp_path / "warm").exists()


def test_a_damaged_index_is_refused_before_the_run_is_touched(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # It was noticed only at the first save, after config.json, env.json, status.json and
    # metrics.jsonl had been rewritten, and the message blamed permissions.
    (copy / "checkpoint").write_bytes(b"\xff\xfe garbage \x80")
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--epochs", "3")
    assert_refused(code, err, f"{copy / 'checkpoint'} is damaged (not UTF-8 text); delete it "
                              "(it is rebuilt from the checkpoint folders at the next save)")
    assert snapshot(copy) == before
    (copy / "checkpoint").unlink()  # the fix the message names
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--epochs", "3",
                      "--max-steps", str(read_latest_step(copy) + 1))
    assert code == 0, err
    assert (copy / "checkpoint").is_file()


def read_latest_step(run: Path) -> int:
    return int(find_checkpoint(run).name.split("-")[1])


def resign(ckpt: Path, name: str) -> None:
    """Record file ``name``'s new hash and size in the manifest, as a hand edit would."""
    import hashlib

    manifest = json.loads((ckpt / "MANIFEST.json").read_text())
    data = (ckpt / name).read_bytes()
    manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (ckpt / "MANIFEST.json").write_text(json.dumps(manifest))


def test_a_resigned_state_of_another_shape_is_one_line(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a state.json edited and its manifest re-signed: "cursor": 5 raised TypeError mid-resume
    ckpt = find_checkpoint(copy)
    state = json.loads((ckpt / "state.json").read_text())
    state["cursor"] = 5
    (ckpt / "state.json").write_text(json.dumps(state))
    resign(ckpt, "state.json")
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--epochs", "3")
    assert_refused(code, err, f"checkpoint {ckpt} is damaged: state.json has 'cursor' = 5, not "
                              "an object with epoch, chunk, batch; use another checkpoint")
    assert snapshot(copy) == before


@pytest.mark.parametrize("engine", ["native", "torch"])
@pytest.mark.parametrize("cursor", [{"epoch": 0, "chunk": 0, "batch": 20000},
                                    {"epoch": 0, "chunk": 7, "batch": 0},
                                    {"epoch": 9, "chunk": 0, "batch": 0}])
def test_a_resigned_data_position_outside_the_batches_is_one_line(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: str,
        cursor: dict[str, int]) -> None:
    """A cursor past the chunk's batches would have the native kernel read past its arrays, one
    past the last chunk would end the run as finished: refused, naming the checkpoint, and
    nothing of the run changes."""
    run = tmp_path / "run"
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--engine", engine,
                      "--max-steps", "3")
    assert code == 0, err
    ckpt = find_checkpoint(run)
    state = json.loads((ckpt / "state.json").read_text())
    state["cursor"] = cursor
    (ckpt / "state.json").write_text(json.dumps(state))
    resign(ckpt, "state.json")
    before = snapshot(run)
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--engine", engine)
    line = assert_refused(code, err, f"checkpoint {ckpt} records a data position (epoch "
                                     f"{cursor['epoch']}, chunk {cursor['chunk']}, batch "
                                     f"{cursor['batch']}) outside this run's batches (")
    assert line.endswith(f"its state.json was altered; resume from another checkpoint (--from "
                         f"STEP; list them: embedlab ckpt {run})")
    assert snapshot(run) == before


@pytest.mark.parametrize(("edit", "needle"), [
    ("fewer output rows", "holds output_embeddings of shape"),
    ("float64 input", "dtype F64, but the run's vocabulary × dim needs"),
    ("bfloat16 input", "dtype BF16, but the run's vocabulary × dim needs"),
    ("no output embeddings", "has no output_embeddings (it holds input_embeddings)"),
])
def test_resigned_tensors_the_kernel_cannot_use_are_one_line(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str], edit: str,
        needle: str) -> None:
    # the native kernel indexes rows without bounds checks: a shorter output matrix behind a
    # re-signed manifest would be read (and written) out of bounds
    import torch

    from embedlab.checkpoint import save_tensors

    ckpt = find_checkpoint(copy)
    tensors, _ = load_checkpoint(ckpt, framework="pt")
    if edit == "fewer output rows":
        tensors["output_embeddings"] = tensors["output_embeddings"][:-1].clone()
    elif edit == "float64 input":
        tensors["input_embeddings"] = tensors["input_embeddings"].double()
    elif edit == "bfloat16 input":  # a NumPy load widens it to float32: it must not slip through
        tensors["input_embeddings"] = tensors["input_embeddings"].to(torch.bfloat16)
    else:
        del tensors["output_embeddings"]
    save_tensors(tensors, str(ckpt / "tensors.safetensors"), {})
    resign(ckpt, "tensors.safetensors")
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--epochs", "3")
    line = assert_refused(code, err, needle)
    assert f"checkpoint {ckpt}" in line and "--restart" in line
    assert snapshot(copy) == before


def test_init_from_copies_shared_rows(trained: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.txt"
    text = write_corpus(tmp_path / "a.txt", lines=300, vocab=100, seed=5).read_text()
    text += write_corpus(tmp_path / "b.txt", lines=300, vocab=100, seed=6, prefix="x").read_text()
    other.write_text(text)
    run = tmp_path / "warm"
    # lr 1e-30: the one step cannot move float32 values of size ~1e-2, so step 1 shows the copy
    code, err = train(capsys, "--run", run, "--corpus", other, *FAST, "--init-from", trained,
                      "--max-steps", "1", "--lr", "1e-30")
    assert code == 0, err
    src, _ = load_checkpoint(find_checkpoint(trained))
    dst, _ = load_checkpoint(find_checkpoint(run))
    src_vocab, dst_vocab = Vocab.load_tsv(trained / "vocab.tsv"), Vocab.load_tsv(run / "vocab.tsv")
    shared = [(i, src_vocab.id(w)) for i, w in enumerate(dst_vocab.words)
              if src_vocab.id(w) is not None]
    new = [i for i, w in enumerate(dst_vocab.words) if src_vocab.id(w) is None]
    assert len(shared) > 10 and len(new) > 10
    for i, j in shared:
        assert np.array_equal(dst["input_embeddings"][i], src["input_embeddings"][j])
    # new words are initialised as usual: centred values within ±init_scale/2/dim (dim 8), not
    # copies of anything
    fresh = dst["input_embeddings"][new]
    bound = default_init_scale("skipgram") / 2 / 8
    assert np.abs(fresh).max() <= bound and (fresh < 0).any() and np.abs(fresh).sum() > 0


# ---- divergence ---------------------------------------------------------------------------------

def test_a_diverging_run_stops_with_one_line_and_keeps_its_checkpoints(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [0]

    def nan_at_step_5(step_once: Any) -> Any:
        def step(batch: Any, lr: float) -> float:
            calls[0] += 1
            loss = step_once(batch, lr)
            return float("nan") if calls[0] == 5 else loss
        return step

    wrap_steps(monkeypatch, nan_at_step_5)
    run = tmp_path / "run"
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--checkpoint-every", "3")
    line = assert_refused(code, err, "training diverged at step 5: the loss became nan")
    assert "checkpoints up to step 3 are intact" in line and "--restart --lr 0.00625" in line
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["ckpt-00000003"]
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "failed" and "diverged" in status["error"]


# ---- a prepared folder as --corpus -----------------------------------------------------------

@pytest.fixture(scope="module")
def prepared(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``corpus`` prepared with non-default vocabulary options. Do not modify."""
    out = tmp_path_factory.mktemp("prepared") / "prep"
    main(["prepare", str(corpus), "--out", str(out), "--min-count", "1", "--unk", "<unk>",
          "--lowercase", "--no-progress"])
    return out


def test_a_prepared_folder_brings_its_vocabulary_options(
        prepared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # No vocabulary flags: the folder's options apply instead of the defaults (--min-count 5,
    # no --unk), which would be compared with the folder's and refused.
    run = tmp_path / "run"
    code, err = train(capsys, "--run", run, "--corpus", prepared, *FAST, "--max-steps", "2")
    assert code == 0, err
    data = json.loads((run / "config.json").read_text())["data"]
    assert (data["min_count"], data["unk"], data["lowercase"]) == (1, "<unk>", True)
    assert not (run / "prepared").exists()  # trained from the folder given, not a copy
    vocab = Vocab.load_tsv(prepared / "vocab.tsv", unk="<unk>")
    tensors, _ = load_checkpoint(find_checkpoint(run))
    assert tensors["input_embeddings"].shape[0] == len(vocab)
    # ...and re-running the same command resumes the run
    code, err = train(capsys, "--run", run, "--corpus", prepared, *FAST, "--max-steps", "3")
    assert code == 0, err
    assert find_checkpoint(run).name == "ckpt-00000003"


@pytest.mark.parametrize(("args", "needles"), [
    (["--min-count", "10"], ["--min-count 10 (prepared with --min-count 1); drop those flags or"]),
    # the flags as typed: it said "--lowercase False (prepared with True)"
    (["--no-lowercase"], ["--no-lowercase (prepared with --lowercase)"]),
    (["--preset", "cs20"], ["--max-vocab 50000 (prepared with no --max-vocab)",
                            "drop those flags (--preset cs20 sets some of them) or"]),
])
def test_a_prepared_folder_refuses_other_vocabulary_flags(
        prepared: Path, tmp_path: Path, args: list[str], needles: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(prepared)
    code, err = train(capsys, "--run", tmp_path / "run", "--corpus", prepared, *FAST, *args,
                      "--max-steps", "1")
    line = assert_refused(code, err, "was built with other vocabulary options")
    assert all(n in line for n in needles) and line.endswith(
        "re-run 'embedlab prepare' into it with them and --force")
    assert snapshot(prepared) == before
    assert not (tmp_path / "run").exists()


def _damage_ids(folder: Path) -> None:
    ids = (folder / "ids.u32").read_bytes()
    (folder / "ids.u32").write_bytes(ids[:8] + (4_000_000_000).to_bytes(4, "little") + ids[12:])


def _damage_ends(folder: Path) -> None:
    ends = bytearray((folder / "sentences.i64").read_bytes())
    ends[8:16] = (0).to_bytes(8, "little")  # the second sentence ends before the first
    (folder / "sentences.i64").write_bytes(bytes(ends))


@pytest.mark.parametrize(("damage", "needle"), [
    (_damage_ids, "ids.u32 holds id 4,000,000,000 at position 2, but the vocabulary has"),
    (_damage_ends, "sentences.i64 does not increase strictly at entry 1"),
])
def test_a_damaged_prepared_folder_is_refused_before_training(
        prepared: Path, tmp_path: Path, damage: Any, needle: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The sizes still agree with meta.json; an id past the vocabulary would crash the native
    # kernel (SIGSEGV) or raise IndexError in the batch builder.
    folder = tmp_path / "prep"
    shutil.copytree(prepared, folder)
    damage(folder)
    code, err = train(capsys, "--run", tmp_path / "run", "--corpus", folder, *FAST,
                      "--engine", "native", "--sample", "0", "--max-steps", "5")
    line = assert_refused(code, err, "is not a valid prepared corpus")
    assert needle in line and "--force" in line


# ---- damaged or abandoned run folders --------------------------------------------------------

def test_a_run_whose_checkpoints_are_all_damaged_is_refused(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Falling back past every damaged checkpoint must not start a new run in place, overwriting
    # them and appending a second history to metrics.jsonl.
    for ckpt in (copy / "checkpoints").glob("ckpt-*"):
        tensors = ckpt / "tensors.safetensors"
        tensors.write_bytes(tensors.read_bytes()[:100])
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST)
    line = assert_refused(code, err, "has checkpoints but none of them is intact")
    assert "--restart" in line and "new run" not in err
    assert snapshot(copy) == before


def test_a_new_start_after_a_death_before_the_first_checkpoint_drops_the_old_history(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # kill -9 before any checkpoint: the folder keeps the dead attempt's curves, which the
    # re-run (a new run, from step 0) must not continue.
    shutil.rmtree(copy / "checkpoints")
    (copy / "checkpoint").unlink()
    status = json.loads((copy / "status.json").read_text())  # as it stands before a first save
    del status["checkpoint"]
    (copy / "status.json").write_text(json.dumps({**status, "status": "running"}))
    assert max(json.loads(line)["step"] for line in
               (copy / "metrics.jsonl").read_text().splitlines()) > 3
    (copy / "events.out.tfevents.1.host.1.0").write_bytes(b"stale")
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--max-steps", "3")
    assert code == 0 and "new run" in err, err
    steps = [json.loads(line)["step"] for line in
             (copy / "metrics.jsonl").read_text().splitlines()]
    assert steps and max(steps) <= 3 and steps == sorted(steps)
    assert not (copy / "events.out.tfevents.1.host.1.0").exists()


def test_run_folders_that_cannot_be_runs_are_refused(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("mine")
    cases = [
        (["--run", mine], "is a folder holding other files, not an embedlab run; pass a new "
                          "or empty folder"),
        (["--run", tmp_path / "notes.txt" / "sub" / "run"],
         "which is a file; pass a path whose parents are folders"),
        (["--runs-dir", tmp_path / "notes.txt"],
         f"--runs-dir {tmp_path / 'notes.txt'} is a file, not a folder; pass a folder path"),
    ]
    for args, needle in cases:
        before = snapshot(tmp_path)
        code, err = train(capsys, *args, "--corpus", corpus, *FAST)
        assert_refused(code, err, needle)
        assert snapshot(tmp_path) == before


def test_an_unwritable_run_location_is_one_line(corpus: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # (chmod does not stop root, which runs these tests in CI: the refusal is simulated)
    real_mkdir = Path.mkdir
    locked = tmp_path / "ro"

    def mkdir(self: Path, *args: Any, **kwargs: Any) -> None:
        if self.is_relative_to(locked):
            raise PermissionError(13, "Permission denied", str(self))
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    code, err = train(capsys, "--run", locked / "run", "--corpus", corpus, *FAST)
    assert_refused(code, err, "cannot create the run folder")
    assert "(Permission denied); pass --run (or --runs-dir) in a writable location" in err


def test_a_refused_new_run_leaves_no_runs_dir_behind(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    runs_dir = tmp_path / "new" / "runs"
    code, err = train(capsys, "--runs-dir", runs_dir, "--corpus", tmp_path / "missing.txt",
                      *FAST)
    assert_refused(code, err, "missing.txt; pass an existing file or folder")
    assert not (tmp_path / "new").exists()


def test_ctrl_c_before_training_leaves_no_new_run_behind(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from embedlab.training import setup

    def interrupted_setup(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(setup, "NoiseDistribution", interrupted_setup)  # mid-way through setup
    code, err = train(capsys, "--run", tmp_path / "runs" / "r", "--corpus", corpus, *FAST)
    assert code == 130 and err == ("stopped by SIGINT before training began or after it ended; "
                                   "the run's checkpoints are as they were — re-run the same "
                                   "command\n")  # as SIGTERM's, not click's bare "interrupted"
    assert not (tmp_path / "runs").exists()


def test_a_resume_already_past_max_steps_says_so(corpus: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "4")[0] == 0
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "2")
    assert code == 0
    assert "already past --max-steps 2: step 4" in err and "stopped at" not in err


def test_a_stored_best_metric_the_run_never_records_can_be_fixed_on_resume(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # written by an embedlab that accepted it: the config must still load, and the flag that
    # the refusal suggests must work on resume
    config = json.loads((copy / "config.json").read_text())
    config["checkpoint"]["best_metric"] = "analogy:max"
    (copy / "config.json").write_text(json.dumps(config))
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--epochs", "3")
    assert_refused(code, err, "--best-metric analogy is not a metric this run records; "
                              "pass --eval-analogies FILE")
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--epochs", "3",
                      "--best-metric", "loss")
    assert code == 0, err
    assert json.loads((copy / "config.json").read_text())["checkpoint"]["best_metric"] == "loss"


def test_a_leftover_prepared_folder_is_not_reused_for_other_data_flags(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # an attempt refused after tokenising leaves RUN/prepared but no config.json; the next
    # command, with other flags, is a new run and must not train on the old vocabulary
    corpus = write_corpus(tmp_path / "c.txt")
    run = tmp_path / "run"
    run.mkdir()
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--min-count", "1",
                      "--probe", "zzzz")
    assert_refused(code, err, "--probe word(s) not in the vocabulary: zzzz; pick words")
    assert (run / "prepared").is_dir() and not (run / "config.json").exists()
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--min-count", "3",
                      "--max-steps", "2")
    assert code == 0, err
    meta = json.loads((run / "prepared" / "meta.json").read_text())
    assert meta["min_count"] == 3
    assert json.loads((run / "config.json").read_text())["data"]["min_count"] == 3


def test_a_run_refused_as_busy_is_never_cleaned_up(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Two commands racing to create the same new run both find it missing; the one refused
    # because the other holds the lock must not delete the other's live run folder.
    import embedlab.training.trainer as trainer
    from embedlab.run.lock import RunLock

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("{}\n")  # the other process's files
    monkeypatch.setattr(trainer, "missing_folders", lambda path: [run])  # "it was missing"
    with RunLock(run, argv=["other"]):
        code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST)
        assert_refused(code, err, "is in use by pid")
        assert "; wait for it to finish or stop it" in err
        assert (run / "metrics.jsonl").read_text() == "{}\n"


# ---- --device and the cuda engine, on a machine without a GPU ------------------------------

def _no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from embedlab.engines import cuda

    monkeypatch.setattr(cuda, "gpu_present", lambda: False)
    monkeypatch.setattr(cuda, "interpreted", lambda: False)
    monkeypatch.setattr(cuda, "unavailable_reason", lambda: "no CUDA device was found")


@pytest.mark.parametrize(("flags", "message"), [
    (["--engine", "cuda"], "--engine cuda is unavailable: no CUDA device was found; "),
    (["--device", "cuda"], "--device cuda is unavailable: no CUDA device was found; train on a "
                           "machine with an NVIDIA GPU, or pass --device cpu"),
    (["--device", "cuda", "--engine", "native"],
     "--device cuda and --engine native contradict each other; pass one of them"),
    (["--device", "cpu", "--engine", "cuda"],
     "--device cpu and --engine cuda contradict each other; pass one of them"),
    (["--device", "cuda", "--loss", "hs"],  # not --engine native, which --device contradicts
     "--loss hs does not train on the cuda engine, which trains negative sampling and NCE "
     "only; pass --device cpu for it"),
    (["--engine", "cuda", "--loss", "hs"],
     "--loss hs does not train on the cuda engine, which trains negative sampling and NCE "
     "only; pass --engine native or --engine torch for it"),
    (["--engine", "cuda", "--micro-batches", "2"],  # the native engine trains no micro-batches
     "--engine cuda is unavailable: no CUDA device was found; train on a machine with an "
     "NVIDIA GPU, or pass --engine torch"),
])
def test_the_cuda_engine_without_a_gpu_is_one_line(
        flags: list[str], message: str, corpus: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _no_gpu(monkeypatch)
    code, err = train(capsys, "--run", tmp_path / "run", "--corpus", corpus, *FAST, *flags)
    assert assert_refused(code, err).startswith(f"embedlab: error: {message}")
    assert not (tmp_path / "run").exists()


def test_device_cpu_trains_with_the_cpu_engines_choice(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _no_gpu(monkeypatch)
    run = tmp_path / "run"
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "1",
                      "--device", "cpu")
    assert code == 0, err
    assert "note:" not in err
    assert json.loads((run / "config.json").read_text())["engine"] == "native"
    assert json.loads((run / "env.json").read_text())["device"] == "cpu"
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "2",
                      "--device", "auto", "--engine", "native")  # the same run, resumed
    assert code == 0 and "resuming" in err and "warning" not in err, err


def test_nproc_is_taken_out_of_the_command_torchrun_repeats() -> None:
    from embedlab.cli.train import _without_nproc

    assert _without_nproc(["train", "--nproc", "2", "--dim", "8"]) == ["train", "--dim", "8"]
    assert _without_nproc(["train", "--nproc=4", "--run", "r"]) == ["train", "--run", "r"]


def test_nproc_that_cannot_split_the_micro_batches_is_refused_before_any_process(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Each process imports torch: 4 of them started on 2 cores to refuse would take seconds,
    and warn about the cores beside a fix that keeps 4."""
    from embedlab.training import launch

    def started(*args: object) -> int:
        raise AssertionError("processes were started")

    monkeypatch.setattr(launch, "run_processes", started)
    code, err = train(capsys, "--run", tmp_path / "run", "--corpus", corpus, "--nproc", "4",
                      "--micro-batches", "2", "--engine", "torch")
    assert_refused(code, err, "embedlab: error: 4 processes share a step of 2 micro-batches, "
                              "which they cannot split evenly; pass --micro-batches 4")
    assert not (tmp_path / "run").exists()



@pytest.mark.parametrize(("limit", "message"), [
    ([], "uses words outside the vocabulary ("),  # its one question
    (["--eval-restrict-vocab", "3"], "uses words outside the first 3 words of the vocabulary; "
                                     "check the file's language/case or raise "
                                     "--eval-restrict-vocab"),
])
def test_analogies_all_unknown_name_trains_own_flag(corpus: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    limit: list[str], message: str) -> None:
    # the advice was eval's --restrict-vocab, which train does not take, and to raise a limit
    # that already covered the whole vocabulary
    questions = tmp_path / "q.txt"
    questions.write_text(": s\nw1 w2 w3 zzzz\n" if limit else ": s\nzz1 zz2 zz3 zz4\n")
    code, err = train(capsys, "--run", tmp_path / "run", "--corpus", corpus, *FAST,
                      "--eval-analogies", questions, *limit)
    assert_refused(code, err, message)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_more_threads_than_cores_is_one_warning(corpus: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # --threads 1000 on 2 cores was taken without a word, and trained far slower
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0})
    code, err = train(capsys, "--run", tmp_path / "run", "--corpus", corpus, *FAST,
                      "--threads", "2", "--max-steps", "1")  # the last --threads counts
    assert code == 0, err
    warned = [line for line in err.splitlines() if "warning" in line]
    assert warned == ["embedlab: warning: --threads 2 is more than the 1 cores this process may "
                      "use: the threads take turns on them, which is slower; the vectors are the "
                      "same with --threads 1"]
    code, err = train(capsys, "--run", tmp_path / "other", "--corpus", corpus, *FAST,
                      "--max-steps", "1")
    assert code == 0 and "warning" not in err, err


def test_threads_of_every_process_on_the_machine_count_against_its_cores(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """'--nproc 2 --threads 2' on 2 cores runs 4 threads: said, as --threads 3 in one is."""
    from embedlab.training.trainer import _warn_about_threads

    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    _warn_about_threads(2, "native")
    assert capsys.readouterr().err == (
        "embedlab: warning: --threads 2 in each of the 2 processes on this machine is 4 "
        "threads, more than its 2 cores: the threads take turns on them, which is slower; the "
        "vectors are the same with --threads 1\n")
    _warn_about_threads(1, "native")
    assert capsys.readouterr().err == ""
    # more processes than cores: no "--threads 1" advice to a run that has it
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    _warn_about_threads(1, "native")
    assert capsys.readouterr().err == (
        "embedlab: warning: the 3 processes on this machine are more than its 2 cores: they take "
        "turns on them, which is slower; start at most 2 processes per machine\n")


def test_a_run_resumes_from_a_folder_with_a_corpus_of_the_same_name(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Made in `here` with --corpus prep; `there` has a prep/ of its own. From there, the plain
    resume's refusal names the run's prep, and passing it is the run's corpus, not "another
    config" (every way out was refused but a cd back)."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    monkeypatch.chdir(here)
    main(["prepare", str(corpus), "--out", "prep"])
    run = tmp_path / "run"
    code, err = train(capsys, "--run", run, "--corpus", "prep", *FAST, "--max-steps", "2")
    assert code == 0, err
    monkeypatch.chdir(there)
    other = there / "other.txt"
    other.write_text("alpha beta gamma delta\n" * 50)
    main(["prepare", str(other), "--out", "prep"])
    code, err = train(capsys, "--run", run, "--max-steps", "4")
    assert_refused(code, err, f"pass the corpus the run was trained on (the run was made in "
                              f"{here}, where prep is {here / 'prep'}: --corpus "
                              f"{here / 'prep'}), or --restart")
    for step, given in ((4, str(here / "prep")), (6, "../here/prep")):
        code, err = train(capsys, "--run", run, "--corpus", given, "--max-steps", str(step))
        assert code == 0 and f"step {step}," in err, err
    code, err = train(capsys, "--run", run, "--max-steps", "8")  # recorded: a plain resume
    assert code == 0 and "step 8," in err, err


def test_a_run_resumes_from_another_working_folder(corpus: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # the config held "prep" as typed: from another folder it was "corpus not found", its
    # absolute path "a different config", and a folder named prep there would have been read
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    monkeypatch.chdir(here)
    main(["prepare", str(corpus), "--out", "prep"])
    (here / "q.txt").write_text(": s\nw1 w2 w3 w4\n")
    run = tmp_path / "run"
    code, err = train(capsys, "--run", run, "--corpus", "prep", *FAST, "--max-steps", "2",
                      "--eval-analogies", "q.txt")
    assert code == 0, err
    monkeypatch.chdir(there)
    for step, given in ((4, []), (6, ["--corpus", str(here / "prep")]),
                        (8, ["--corpus", "../here/prep/"])):
        code, err = train(capsys, "--run", run, *given, "--max-steps", str(step))
        assert code == 0 and f"step {step}," in err, err
    stored = json.loads((run / "config.json").read_text())
    assert stored["data"]["corpus"] == str(here / "prep")
    assert stored["eval"]["analogies"] == str(here / "q.txt")
    # beside a run made in `here` with the corpus as typed there, the corpus is no difference
    from embedlab.track.runs import differing_keys, run_info
    from embedlab.track.tensorboard import table_hparams

    monkeypatch.chdir(here)
    code, err = train(capsys, "--run", tmp_path / "other", "--corpus", "prep", *FAST,
                      "--max-steps", "2", "--lr", "0.05")
    assert code == 0, err
    infos = [run_info(r, tmp_path) for r in (run, tmp_path / "other")]
    assert differing_keys(infos) == ["optim.lr"] and infos[0].hparams["data.corpus"] == "prep"
    assert {table_hparams(json.loads((r / "config.json").read_text()), r)["data.corpus"]
            for r in (run, tmp_path / "other")} == {f"here/prep in {tmp_path}"}
    monkeypatch.chdir(there)
    (there / "prep").mkdir()  # another folder of that name: not the run's corpus
    code, err = train(capsys, "--run", run, "--corpus", "prep", "--max-steps", "10")
    assert_refused(code, err, f"--corpus (stored '{here / 'prep'}', requested 'prep')")


def test_a_corpus_prepared_again_from_other_text_is_refused_on_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # the same lines shuffled give the same vocabulary: the resume trained on other data
    monkeypatch.chdir(tmp_path)
    lines = write_corpus(tmp_path / "c.txt").read_text().splitlines()
    (tmp_path / "shuffled.txt").write_text("\n".join(lines[1:] + lines[:1]) + "\n")
    main(["prepare", "c.txt", "--out", "prep"])
    code, err = train(capsys, "--run", "run", "--corpus", "prep", *FAST, "--max-steps", "2")
    assert code == 0, err
    shutil.rmtree("prep")
    main(["prepare", "c.txt", "--out", "prep"])  # the same text again: the same corpus
    code, err = train(capsys, "--run", "run", "--corpus", "prep", "--max-steps", "4")
    assert code == 0, err
    shutil.rmtree("prep")
    main(["prepare", "shuffled.txt", "--out", "prep"])
    saved = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    code, err = train(capsys, "--run", "run", "--corpus", "prep", "--max-steps", "6")
    assert_refused(code, err, "the corpus prep is not the one ckpt-00000004 was trained on (its "
                              "vocabulary, sentences or token ids differ: prepared again from "
                              "other text?); pass the corpus the run was trained on, or "
                              "--restart to start over on this one")
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == saved


def test_a_corpus_prepared_again_with_more_words_is_named_not_the_checkpoints_shape(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Other text has another vocabulary size too: the corpus is what changed, not the
    checkpoint ("resume from another checkpoint" cannot help: they all have that shape)."""
    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path / "c.txt")
    more = (tmp_path / "c.txt").read_text() + "zebra okapi " * 6 + "\n"
    (tmp_path / "more.txt").write_text(more)
    main(["prepare", "c.txt", "--out", "prep"])
    code, err = train(capsys, "--run", "run", "--corpus", "prep", *FAST, "--max-steps", "2")
    assert code == 0, err
    main(["prepare", "more.txt", "--out", "prep", "--force"])
    code, err = train(capsys, "--run", "run", "--corpus", "prep", "--max-steps", "4")
    assert_refused(code, err, "the corpus prep is not the one ckpt-00000002 was trained on")


def test_a_corpus_prepared_again_with_other_options_names_the_folder_not_the_flags(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A resume passes no vocabulary flag: the refusal names the folder, not flags to drop."""
    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path / "c.txt")
    main(["prepare", "c.txt", "--out", "prep"])
    code, err = train(capsys, "--run", "run", "--corpus", "prep", *FAST, "--max-steps", "2")
    assert code == 0, err
    main(["prepare", "c.txt", "--out", "prep", "--force", "--min-count", "2"])  # the default: 5
    code, err = train(capsys, "--run", "run", "--max-steps", "4")
    assert_refused(code, err, "embedlab: error: prepared corpus prep was prepared again since "
                              "this run trained on it, with other vocabulary options: the run's "
                              "--min-count 5 (prepared with --min-count 2); re-run 'embedlab "
                              "prepare' into it with the run's options and --force, or pass "
                              "--restart to start over on it as it is")
    # the fix it names works: the run's other settings, the folder's vocabulary options
    code, err = train(capsys, "--run", "run", "--max-steps", "4", "--restart")
    assert code == 0, err
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["data"]["min_count"] == 2 and config["model"]["dim"] == 8


def test_a_damaged_prepared_copy_of_the_run_is_named_with_its_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """RUN/prepared is the run's own: "pass the corpus the run was trained on" cannot help
    when the corpus is that one; deleting the copy makes it again, to the same bits."""
    import numpy as np

    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path / "c.txt")
    code, err = train(capsys, "--run", "run", "--corpus", "c.txt", *FAST, "--max-steps", "2")
    assert code == 0, err
    ids_file = tmp_path / "run" / "prepared" / "ids.u32"
    good = ids_file.read_bytes()
    ids = np.frombuffer(good, dtype=np.uint32).copy()
    first_other = int(np.flatnonzero(ids != ids[0])[0])
    ids[[0, first_other]] = ids[[first_other, 0]]
    ids_file.write_bytes(ids.tobytes())
    code, err = train(capsys, "--run", "run", "--corpus", "c.txt", "--max-steps", "4")
    assert_refused(code, err, "embedlab: error: the run's prepared copy "
                              f"{Path('run') / 'prepared'} of its corpus is not what "
                              "ckpt-00000002 was trained on (its vocabulary, sentences or token "
                              "ids differ: damaged or replaced?); delete run/prepared to prepare "
                              "it again from c.txt, or pass --restart to start over")
    shutil.rmtree(tmp_path / "run" / "prepared")
    code, err = train(capsys, "--run", "run", "--corpus", "c.txt", "--max-steps", "4")
    assert code == 0, err
    assert ids_file.read_bytes() == good


@pytest.mark.parametrize("written_by", ["today", "older"])
def test_a_run_whose_checkpoints_and_index_are_both_gone_is_refused(
        trained: Path, corpus: Path, tmp_path: Path, written_by: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """rm -rf RUN/checkpoint*: a start over in place as a new run would overwrite the run's
    metrics and events; status.json says a checkpoint was saved (a status written before that
    field says so by "finished"), so the run is refused, as with its index alone."""
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    status = json.loads((run / "status.json").read_text())
    assert status["checkpoint"] == status["step"] and status["status"] == "finished"
    if written_by == "older":
        del status["checkpoint"]
        (run / "status.json").write_text(json.dumps(status))
    shutil.rmtree(run / "checkpoints")
    (run / "checkpoint").unlink()
    metrics = (run / "metrics.jsonl").read_bytes()
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST)
    assert_refused(code, err, f"embedlab: error: run {run} saved a checkpoint at step "
                              f"{status['step']} (its status.json says so), but its checkpoints/ "
                              "folder and index are gone: moved or deleted; restore them, or "
                              "pass --restart to start over (the old folder is moved aside)")
    assert (run / "metrics.jsonl").read_bytes() == metrics


@pytest.mark.parametrize("damage", ["no config", "no checkpoints", "checkpoints is a file"])
def test_a_run_missing_its_config_or_checkpoints_is_refused_not_restarted(
        trained: Path, corpus: Path, tmp_path: Path, damage: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    # without config.json the flags given would become the run's (--lr 0.5 going on from its
    # checkpoint); without checkpoints/ a start over in place would overwrite its metrics
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    if damage == "no config":
        (run / "config.json").unlink()
    else:
        shutil.rmtree(run / "checkpoints")
        if damage == "checkpoints is a file":
            (run / "checkpoints").write_text("")
    metrics = (run / "metrics.jsonl").read_bytes()
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--lr", "0.5")
    if damage == "no config":
        assert_refused(code, err, f"run {run} has checkpoints but no config.json, which holds "
                                  "its settings; restore config.json from a backup, or pass "
                                  "--restart to start over (the old folder is moved aside)")
    else:
        assert_refused(code, err, f"run {run} has no checkpoints, but its index "
                                  f"({run / 'checkpoint'}) lists ")
        assert "the checkpoints/ folder was moved or deleted; restore it, or pass --restart" in err
    assert (run / "metrics.jsonl").read_bytes() == metrics


def test_checkpoints_that_cannot_be_written_are_refused_before_training(
        copy: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # a read-only checkpoints/ was found at the first save, after minutes of training
    import errno

    real = Path.touch

    def read_only(self: Path, *args: Any, **kwargs: Any) -> None:
        if self.name.startswith(".write-test-"):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "touch", read_only)
    metrics = (copy / "metrics.jsonl").read_bytes()
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--epochs", "3")
    assert_refused(code, err, f"cannot write checkpoints into {copy / 'checkpoints'} (Read-only "
                              "file system); make it writable (or pass another --run), then "
                              "re-run the same command")
    assert (copy / "metrics.jsonl").read_bytes() == metrics


def test_the_same_command_resumes_the_same_named_run_again_and_again(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # a resume wrote the corpus's absolute path into config.json, and the next run of the same
    # command (no --run: the run found by its name and settings) started a new run "-2"
    monkeypatch.chdir(tmp_path)
    shutil.copy(corpus, tmp_path / "c.txt")
    for steps in (2, 4, 6):
        code, err = train(capsys, "--runs-dir", "runs", "--corpus", "c.txt", *FAST,
                          "--max-steps", str(steps))
        assert code == 0, err
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["c-sg-d8-b32-e2"]
    run = tmp_path / "runs" / "c-sg-d8-b32-e2"
    assert json.loads((run / "config.json").read_text())["data"]["corpus"] == "c.txt"
    # a copy of the project, its own corpus beside it, resumes with the same command too
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copytree(tmp_path / "runs", copy / "runs")
    shutil.copy(tmp_path / "c.txt", copy / "c.txt")
    monkeypatch.chdir(copy)
    code, err = train(capsys, "--runs-dir", "runs", "--corpus", "c.txt", *FAST,
                      "--max-steps", "8")
    assert code == 0 and "resuming" in err and "step 8," in err, err


def test_from_a_run_that_does_not_exist_says_so(corpus: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, err = train(capsys, "--run", tmp_path / "new", "--corpus", corpus, *FAST, "--from", "500")
    assert_refused(code, err, f"--from 500: run {tmp_path / 'new'} does not exist; --from resumes "
                              "an existing run from one of its checkpoints (leave it out to "
                              "start the run)")
    assert not (tmp_path / "new").exists()
    code, err = train(capsys, "--run", tmp_path / "new", *FAST, "--from", "500")  # no --corpus
    assert_refused(code, err, f"--from 500: run {tmp_path / 'new'} does not exist")
    assert "demo corpus" not in err  # no note of a new run that is then refused
    for role in ("best", "latest"):  # the run's absence, not "pass a checkpoint folder"
        code, err = train(capsys, "--run", tmp_path / "new", "--corpus", corpus, *FAST,
                          "--from", role)
        assert_refused(code, err, f"--from {role}: run {tmp_path / 'new'} does not exist; --from "
                                  "resumes an existing run")
    assert not (tmp_path / "new").exists()


def test_from_latest_is_where_a_plain_resume_starts(corpus: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`ckpt` lists a checkpoint's role 'latest'; --from takes it as it takes 'best'."""
    for name in ("a", "b"):
        code, _ = train(capsys, "--run", tmp_path / name, "--corpus", corpus, *FAST,
                        "--checkpoint-every", "2", "--keep", "5", "--max-steps", "5")
        assert code == 0
    code, err = train(capsys, "--run", tmp_path / "a", *FAST, "--from", "latest")
    assert code == 0 and "from ckpt-00000005" in err, err
    code, _ = train(capsys, "--run", tmp_path / "b", *FAST)
    assert code == 0 and final_bytes(tmp_path / "a") == final_bytes(tmp_path / "b")
    # found as that resume finds it: without the index, and past a damaged newest checkpoint
    for name in ("c", "d"):
        code, _ = train(capsys, "--run", tmp_path / name, "--corpus", corpus, *FAST,
                        "--checkpoint-every", "2", "--keep", "5", "--max-steps", "5")
    (tmp_path / "c" / INDEX_FILE).unlink()
    (tmp_path / "d" / "checkpoints" / "ckpt-00000005" / "tensors.safetensors").write_bytes(b"x")
    for name, start in (("c", "ckpt-00000005"), ("d", "ckpt-00000004")):
        code, err = train(capsys, "--run", tmp_path / name, *FAST, "--from", "latest",
                          "--max-steps", "6")
        assert code == 0 and f"from {start}" in err, err
    empty = tmp_path / "empty"
    (empty / "checkpoints").mkdir(parents=True)
    code, err = train(capsys, "--run", empty, "--corpus", corpus, *FAST, "--from", "latest")
    assert_refused(code, err, f"--from latest: {empty} has no checkpoints; leave --from out to "
                              "start the run")


@pytest.mark.parametrize("flags", [
    ["--model", "cbow", "--loss", "nce", "--window", "3", "--lr", "0.05", "--interleave", "1"],
    ["--loss", "hs", "--negative", "0", "--lowercase", "--min-count", "2", "--seed", "7"],
    ["--preset", "cs20", "--max-steps", "5"],  # the batch's mean loss, and the preset's stop
    # the preset's --init-scale 1 must not be written beside --init uniform (a new run
    # refuses the pair)
    ["--preset", "cs20", "--init", "uniform", "--max-steps", "5"],
    ["--engine", "torch", "--threads", "2"],  # its sums depend on the threads
    ["--log-every", "3"],  # the logged loss is its window's mean
])
def test_env_json_records_a_command_that_trains_the_same_run(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    """What made a run, as one command: run from scratch, it gives the same bits."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(corpus, tmp_path / "c.txt")
    code, err = train(capsys, "--run", "a", "--corpus", "c.txt", *FAST, *flags)
    assert code == 0, err
    env = json.loads((tmp_path / "a" / "env.json").read_text())
    assert env["streams"] == ["init", "batches"] and env["step"] == 0
    if "torch" in flags:  # no native kernel; the threads are part of the command
        assert "kernel" not in env and "--threads 2" in env["command"]
    else:
        assert env["kernel"]["build"].startswith("w2v-") and env["executable"]
    argv = shlex.split(env["command"])
    assert argv[:4] == ["embedlab", "train", "--run", "a"]
    code, err = train(capsys, "--run", "b", *argv[4:])  # the same line, another --run
    assert code == 0, err
    assert final_bytes(tmp_path / "b") == final_bytes(tmp_path / "a")
    status = [json.loads((tmp_path / r / "status.json").read_text()) for r in ("a", "b")]
    assert status[0]["loss"] == status[1]["loss"]  # the numbers it reports are the same too


def test_a_resume_on_a_kernel_built_otherwise_says_its_bits_may_differ(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "3")
    assert code == 0, err
    env = json.loads((run / "env.json").read_text())
    env["kernel"] = {**env["kernel"], "build": "w2v-0000", "step": "0000", "compiler": "cc 1.0"}
    (run / "env.json").write_text(json.dumps(env))
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "5")
    assert code == 0, err
    compiler = json.loads((run / "env.json").read_text())["resumes"][-1]["kernel"]["compiler"]
    assert (f"embedlab: warning: the native kernel is built otherwise than the one {run} last "
            f"trained with (compiler cc 1.0 -> {compiler}): its result may differ in the last "
            "bits from an uninterrupted run's") in err
    # the same compiler and command: what else differs is named
    env = json.loads((run / "env.json").read_text())
    env["resumes"][-1]["kernel"]["step"] = "1111"
    (run / "env.json").write_text(json.dumps(env))
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "6")
    assert code == 0 and "(the same compiler and command: another CPU, or another embedlab's " \
        "kernel sources)" in err
    resumed = json.loads((run / "env.json").read_text())["resumes"]
    assert resumed[0]["step"] == 3 and resumed[0]["kernel"]["build"] != "w2v-0000"
    assert "command" not in resumed[0]  # how the run started is the first record's
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "7")
    assert code == 0 and "native kernel" not in err  # the last start's kernel is this one
    # another library (the tokeniser's or the histograms' sources changed), the same step
    env = json.loads((run / "env.json").read_text())
    env["resumes"][-1]["kernel"]["build"] = "w2v-2222"
    (run / "env.json").write_text(json.dumps(env))
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "8")
    assert code == 0 and "native kernel" not in err
    # a record from before "step": its "build" is compared
    env = json.loads((run / "env.json").read_text())
    env["resumes"][-1]["kernel"] = {k: v for k, v in env["resumes"][-1]["kernel"].items()
                                    if k != "step"} | {"build": "w2v-3333"}
    (run / "env.json").write_text(json.dumps(env))
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "9")
    assert code == 0 and "the native kernel is built otherwise" in err


def _here_and_there(tmp_path: Path, corpus: Path,
                    monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two working folders, the corpus as c.txt in the first, which is the current one."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    shutil.copy(corpus, here / "c.txt")
    monkeypatch.chdir(here)
    return here, there


def test_restart_from_another_working_folder_finds_the_runs_corpus(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """As a resume does: the corpus typed as relative is read from the run's creation folder."""
    here, there = _here_and_there(tmp_path, corpus, monkeypatch)
    code, err = train(capsys, "--run", "source", "--corpus", "c.txt", *FAST)
    assert code == 0, err
    code, err = train(capsys, "--run", "run", "--corpus", "c.txt", *FAST, "--init-from",
                      "source")
    assert code == 0, err
    before = final_bytes(here / "run")
    monkeypatch.chdir(there)
    code, err = train(capsys, "--run", "../here/run", "--restart")
    assert code == 0, err
    assert final_bytes(here / "run") == before  # the same settings, the same corpus: same bits
    config = json.loads((here / "run" / "config.json").read_text())
    assert (config["data"]["corpus"], config["init_from"]) == (str(here / "c.txt"),
                                                               str(here / "source"))


def test_a_closed_pipe_ends_the_command_as_sigpipe_would(trained: Path, tmp_path: Path
                                                          ) -> None:
    """``embedlab train --run RUN 2>&1 | head -1``: the reader is gone after one line. The
    command ends quietly, with the status of a program SIGPIPE stops (141), not click's 1."""
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # gone before the first line: every write meets the closed pipe
    proc = subprocess.Popen([sys.executable, "-m", "embedlab", "train", "--run", str(trained)],
                            stdout=write, stderr=write)
    os.close(write)
    assert proc.wait(timeout=60) == 128 + signal.SIGPIPE


def test_the_finished_runs_hint_names_the_command_as_it_was_run(trained: Path) -> None:
    """From 'python -m embedlab' (or .venv/bin/embedlab off the PATH), 'embedlab train' would
    name a command the shell does not find: the hint names the interpreter that ran it."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "embedlab", "train", "--run", str(trained)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    on_path = shutil.which("python")  # the shell's python, when it is this interpreter
    python = "python" if on_path and os.path.abspath(on_path) == os.path.abspath(sys.executable) \
        else shlex.quote(sys.executable)
    assert f"to train more: {python} -m embedlab train --run {trained} --epochs N" in proc.stderr
    # a process 'train --nproc' started runs as 'python -m embedlab': the name typed is handed
    proc = subprocess.run([sys.executable, "-m", "embedlab", "train", "--run", str(trained)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "EMBEDLAB_PROGRAM": "embedlab"})
    assert f"to train more: embedlab train --run {trained} --epochs N" in proc.stderr


def test_a_run_folder_that_is_no_run_without_a_corpus_says_it_trains_the_demo(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``train --run DIR`` is how a run resumes; with a mistyped DIR it starts a new run on the
    built-in demo, and says so first. An existing run, or a --corpus given, needs no such line."""
    code, err = train(capsys, "--run", tmp_path / "typo", *FAST, "--max-steps", "1")
    assert code == 0 and err.splitlines()[:2] == [
        f"embedlab: note: {tmp_path / 'typo'} is no run yet and no --corpus was given: a new run "
        "on the built-in demo corpus (pass --corpus to train on yours, or check the path of the "
        "run you meant to resume)", f"embedlab: new run {tmp_path / 'typo'}"]
    code, err = train(capsys, "--run", tmp_path / "typo", *FAST, "--max-steps", "2")
    assert code == 0 and "note:" not in err
    code, err = train(capsys, "--run", tmp_path / "mine", "--corpus", corpus, *FAST,
                      "--max-steps", "1")
    assert code == 0 and "note:" not in err


def test_a_deleted_latest_checkpoint_is_said_before_the_older_one_resumes(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The index lists the newest checkpoint, its folder is gone: the resume from the one
    before says how many steps are trained again, as it says of a damaged one it skips."""
    steps = sorted(int(p.name.split("-")[1]) for p in (copy / "checkpoints").iterdir())
    shutil.rmtree(copy / "checkpoints" / f"ckpt-{steps[-1]:08d}")
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--epochs", "3",
                      "--max-steps", str(steps[-1]))
    assert code == 0, err
    assert err.splitlines()[0] == (
        f"embedlab: warning: the index of {copy} lists ckpt-{steps[-1]:08d}, which is not in "
        f"{copy / 'checkpoints'} (deleted?): resuming from ckpt-{steps[-2]:08d}, the "
        f"{steps[-1] - steps[-2]} step(s) after it are trained again")


def test_checkpoints_moved_aside_by_from_are_not_called_deleted(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--from moves newer checkpoints into checkpoints-abandoned-<time>/ and the index still
    names them until the next save: a resume in between warns of no deletion."""
    run = tmp_path / "run"
    args = ["--run", run, "--corpus", corpus, *FAST, "--checkpoint-every", "2"]
    assert train(capsys, *args, "--max-steps", "6")[0] == 0
    code, err = train(capsys, *args, "--from", "2", "--max-steps", "2")
    assert code == 0 and "moved 2 newer checkpoint(s)" in err
    code, err = train(capsys, *args, "--max-steps", "3")
    assert code == 0 and "deleted?" not in err and "warning" not in err


def test_a_probe_refusal_never_suggests_the_unk_token(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """UNK is word 0 of a vocabulary with --unk: no word to probe."""
    code, err = train(capsys, "--run", tmp_path / "run", "--corpus", corpus, *FAST, "--unk",
                      "UNK", "--max-vocab", "6", "--probe", "zzzz")
    assert_refused(code, err, "--probe word(s) not in the vocabulary: zzzz; pick words the "
                              "corpus has (the most frequent: w0, w1, w2)")
    code, err = train(capsys, "--run", tmp_path / "run", "--corpus", corpus, *FAST, "--unk",
                      "UNK", "--max-vocab", "6", "--probe", "unk")
    line = assert_refused(code, err, "--probe word(s) not in the vocabulary: unk; ")
    assert "UNK" not in line


def test_ctrl_c_while_set_up_under_torchrun_is_said_by_one_process(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every process of a torchrun run gets the Ctrl-C; the first of the machine says it."""
    from embedlab.errors import TrainingInterrupted
    from embedlab.training import api, setup

    def interrupted_setup(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(setup, "NoiseDistribution", interrupted_setup)
    for another, printed in ((True, True), (False, False)):
        monkeypatch.setattr(api, "said_by_another_process", lambda a=another: a)
        with pytest.raises(TrainingInterrupted) as e:
            python_train(corpus=corpus, run=tmp_path / "r", dim=8, threads=1)
        assert e.value.printed_by_another is printed and e.value.exit_code == 130


def test_a_resume_without_env_json_is_refused_not_guessed(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """env.json records the batch generator a run started with; without it a resume would
    guess, and a run started before the batch specification would finish otherwise."""
    (copy / "env.json").unlink()
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--epochs", "3")
    assert_refused(code, err, f"{copy / 'env.json'} is missing or unreadable; it records how "
                              "the run started (its batch generator), which a resume must "
                              "keep: restore it from a backup, or pass --restart to start over")
    assert snapshot(copy) == before


def test_a_checkpoint_without_a_fingerprint_checks_the_vocabulary(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A checkpoint saved before corpus fingerprints, its RUN/prepared lost and the corpus at
    the same path holding other text: its rows would belong to other words."""
    text = write_corpus(tmp_path / "c.txt")
    run = tmp_path / "run"
    assert train(capsys, "--run", run, "--corpus", text, *FAST, "--max-steps", "3")[0] == 0
    ckpt = find_checkpoint(run)
    state = json.loads((ckpt / "state.json").read_text())
    del state["corpus"]
    (ckpt / "state.json").write_text(json.dumps(state))
    resign(ckpt, "state.json")
    shutil.rmtree(run / "prepared")
    write_corpus(text, seed=7)  # the same name, other text: another order of counts
    before = snapshot(run)
    code, err = train(capsys, "--run", run, "--corpus", text, *FAST)
    assert_refused(code, err, f"the corpus {text} gives another vocabulary than the one "
                              "ckpt-00000003 was trained with")
    assert {k: v for k, v in snapshot(run).items() if not k.startswith("prepared")} == \
        {k: v for k, v in before.items() if not k.startswith("prepared")}


def test_a_damaged_prepared_copy_of_a_run_names_the_run_s_folder(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """RUN/prepared without its meta.json: train has no --out to name; removing the folder
    prepares the corpus again."""
    (copy / "prepared" / "meta.json").unlink()
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--epochs", "3")
    assert_refused(code, err, f"the run's prepared corpus {copy / 'prepared'} is damaged (no "
                              f"valid meta.json); remove {copy / 'prepared'} to prepare the "
                              "corpus again, or restore it from a backup")
    shutil.rmtree(copy / "prepared")
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--epochs", "3")
    assert code == 0, err


def _run_whose_corpus_moved(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run trained 2 steps from tmp_path/made on c.txt, without RUN/prepared, its corpus
    moved to tmp_path/moved.txt, and the working folder tmp_path."""
    (tmp_path / "made").mkdir()
    text = write_corpus(tmp_path / "made" / "c.txt")
    monkeypatch.chdir(tmp_path / "made")
    run = tmp_path / "run"
    assert train(capsys, "--run", run, "--corpus", "c.txt", *FAST, "--max-steps", "2")[0] == 0
    shutil.rmtree(run / "prepared")
    monkeypatch.chdir(tmp_path)
    text.rename(tmp_path / "moved.txt")
    return run


def test_a_trained_run_without_its_prepared_copy_or_corpus_names_both(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The corpus not found from here and RUN/prepared gone: the fix is the corpus's path
    (text8 or demo would be another corpus), and following it resumes the run on the moved
    file, recorded under its new path; another text at a new path is refused by the
    checkpoint's fingerprint of the corpus."""
    run = _run_whose_corpus_moved(tmp_path, capsys, monkeypatch)
    code, err = train(capsys, "--run", run, *FAST)
    assert_refused(code, err, f"run {run}'s corpus c.txt (as its config.json names it) is not "
                              f"found from {tmp_path}, nor from {tmp_path / 'made'}, where the "
                              f"run was made, and the run keeps no prepared copy of it "
                              f"({run / 'prepared'}); pass --corpus with its path")
    other = tmp_path / "other.txt"
    other.write_text("".join(reversed((tmp_path / "moved.txt").read_text().splitlines(True))))
    code, err = train(capsys, "--run", run, "--corpus", other, *FAST)
    assert_refused(code, err, f"the corpus {other} is not the one ckpt-00000002 was trained on")
    assert not (run / "prepared").exists()  # made from other.txt, not left as the run's copy
    code, err = train(capsys, "--run", run, "--corpus", "moved.txt", *FAST)
    assert code == 0, err
    assert f"embedlab: note: run {run}'s corpus c.txt is not found; reading moved.txt in its " \
        "place" in err
    # recorded as the absolute path: a relative one is read from where the run was made
    assert json.loads((run / "config.json").read_text())["data"]["corpus"] == \
        str(tmp_path / "moved.txt")
    assert "resuming" in err and "ckpt-00000002" in err


def test_a_moved_corpus_of_a_run_without_fingerprints_is_asked_back_in_its_place(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # checkpoints of an earlier version hold no fingerprint: --corpus at a new path is refused
    # as another config, so "pass --corpus with its path" led nowhere
    import embedlab.run.folder

    run = _run_whose_corpus_moved(tmp_path, capsys, monkeypatch)
    monkeypatch.setattr(embedlab.run.folder, "holds_corpus_fingerprints", lambda run_dir: False)
    code, err = train(capsys, "--run", run, *FAST)
    assert_refused(code, err, f"the run keeps no prepared copy of it ({run / 'prepared'}); move "
                              f"it back to {tmp_path / 'made' / 'c.txt'}: the run's checkpoints, "
                              "made by an earlier version, hold no fingerprint of their corpus "
                              "by which another path could stand for it")
    (tmp_path / "moved.txt").rename(tmp_path / "made" / "c.txt")
    code, err = train(capsys, "--run", run, *FAST, "--max-steps", "4")
    assert code == 0 and "resuming" in err, err


def test_a_damaged_prepared_copy_names_deleting_it_as_the_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """'embedlab prepare CORPUS --out RUN/prepared --force' would make it with prepare's
    defaults, not the run's options; the resume makes it again with them."""
    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path / "c.txt")
    assert train(capsys, "--run", "run", "--corpus", "c.txt", *FAST, "--min-count", "2",
                 "--max-steps", "2")[0] == 0
    ids = tmp_path / "run" / "prepared" / "ids.u32"
    good = ids.read_bytes()
    ids.write_bytes(good[:-2])
    code, err = train(capsys, "--run", "run", "--max-steps", "4")
    assert_refused(code, err, f"; delete {Path('run') / 'prepared'}: resuming the run prepares "
                              "it again from its corpus")
    shutil.rmtree(tmp_path / "run" / "prepared")
    assert train(capsys, "--run", "run", "--max-steps", "4")[0] == 0
    assert ids.read_bytes() == good


def test_a_changed_raw_corpus_is_said_and_the_run_keeps_its_copy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = write_corpus(tmp_path / "c.txt")
    assert train(capsys, "--run", "run", "--corpus", "c.txt", *FAST, "--max-steps", "2")[0] == 0
    code, err = train(capsys, "--run", "run", "--corpus", "c.txt", "--max-steps", "3")
    assert code == 0 and "changed" not in err, err
    elsewhere = tmp_path / "elsewhere"  # a copy of the project (cp -a): the same corpus
    elsewhere.mkdir()
    shutil.copy2(text, elsewhere / "c.txt")
    shutil.copytree(tmp_path / "run", elsewhere / "run", copy_function=shutil.copy2)
    monkeypatch.chdir(elsewhere)
    code, err = train(capsys, "--run", "run", "--corpus", "c.txt", "--max-steps", "3")
    assert code == 0 and "changed" not in err, err
    # a resume of the original run from a folder whose c.txt is other text: named as another
    # file than the one the copy was made from, not as the corpus having changed
    (elsewhere / "c.txt").write_text("other words entirely\n")
    code, err = train(capsys, "--run", tmp_path / "run", "--max-steps", "3")
    assert code == 0, err
    assert (f"embedlab: note: c.txt ({elsewhere / 'c.txt'}) differs from {tmp_path / 'c.txt'}, "
            f"which the run prepared its copy ({tmp_path / 'run' / 'prepared'}) from; the run "
            f"goes on training on that copy — pass --restart to start over on "
            f"{elsewhere / 'c.txt'}") in err
    monkeypatch.chdir(tmp_path)
    copy = (tmp_path / "run" / "prepared" / "ids.u32").read_bytes()
    text.write_text(text.read_text() + "new words here\n")
    code, err = train(capsys, "--run", "run", "--corpus", "c.txt", "--max-steps", "4")
    assert code == 0, err
    assert (f"embedlab: note: c.txt changed since the run prepared its copy of it "
            f"({Path('run') / 'prepared'}); the run goes on training on that copy — pass "
            "--restart to start over on the new text") in err
    assert (tmp_path / "run" / "prepared" / "ids.u32").read_bytes() == copy


def test_a_corpus_only_touched_is_said_to_have_a_new_time_not_new_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """touch, or a copy without -p: the same bytes were said to have "changed"."""
    import os

    monkeypatch.chdir(tmp_path)
    text = write_corpus(tmp_path / "c.txt")
    assert train(capsys, "--run", "run", "--corpus", "c.txt", *FAST, "--max-steps", "2")[0] == 0
    stat = text.stat()
    os.utime(text, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    code, err = train(capsys, "--run", "run", "--corpus", "c.txt", "--max-steps", "3")
    assert code == 0 and "changed since" not in err, err
    assert (f"embedlab: note: c.txt has another modification time than when the run prepared "
            f"its copy of it ({Path('run') / 'prepared'}), with the same size; the run goes on "
            "training on that copy — if the text changed, pass --restart to start over on it"
            ) in err


def test_a_changed_corpus_folder_holding_a_link_out_of_it_is_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A corpus folder may hold a symbolic link to a file elsewhere, recorded by that file's own
    path: a change of the folder's other files is said as for any folder."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_corpus(folder / "a.txt")
    write_corpus(tmp_path / "outside.txt")
    (folder / "link.txt").symlink_to(tmp_path / "outside.txt")
    assert train(capsys, "--run", "run", "--corpus", "corpus", *FAST, "--max-steps", "2")[0] == 0
    code, err = train(capsys, "--run", "run", "--max-steps", "3")
    assert code == 0 and "changed" not in err, err
    with (folder / "a.txt").open("a") as f:
        f.write("more words here\n")
    code, err = train(capsys, "--run", "run", "--max-steps", "4")
    assert code == 0 and "embedlab: note: corpus changed since the run prepared its copy" in err


def test_a_run_of_an_earlier_version_is_not_pointed_at_another_corpus(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Its checkpoints hold no fingerprint of the corpus, so nothing would tell the moved
    corpus from other text with the same words: another --corpus stays another config."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_runs" / "skipgram-hs"
    run = tmp_path / "hs"
    shutil.copytree(fixture, run)
    shutil.rmtree(run / "prepared")
    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path / "other.txt")
    code, err = train(capsys, "--run", run, "--corpus", "other.txt", "--max-steps", "20")
    assert_refused(code, err, f"run {run} was trained with a different config: --corpus")
    assert "note:" not in err


def test_a_moved_prepared_corpus_is_passed_by_its_new_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path / "c.txt")
    main(["prepare", "c.txt", "--out", "prep"])
    assert train(capsys, "--run", "run", "--corpus", "prep", *FAST, "--max-steps", "2")[0] == 0
    (tmp_path / "prep").rename(tmp_path / "prep_moved")
    code, err = train(capsys, "--run", "run", "--max-steps", "4")
    assert_refused(code, err, "pass --corpus with its path")
    code, err = train(capsys, "--run", "run", "--corpus", "prep_moved", "--max-steps", "4")
    assert code == 0, err
    assert "resuming run from ckpt-00000002" in err
    code, err = train(capsys, "--run", "run", "--max-steps", "6")  # recorded: found again
    assert code == 0 and "resuming run from ckpt-00000004" in err, err


def test_settings_no_engine_of_the_run_trains_are_refused_as_another_config(
        copy: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--micro-batches on a native run: "pass --engine torch" would then be refused as another
    config; the resume's refusal names the setting."""
    before = snapshot(copy)
    code, err = train(capsys, "--run", copy, "--corpus", corpus, *FAST, "--micro-batches", "4")
    assert_refused(code, err, "was trained with a different config: --micro-batches (stored 1, "
                              "requested 4). Drop those flags to resume")
    assert snapshot(copy) == before


def test_another_programs_files_are_no_run_to_write_among(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A metrics.jsonl, vocab.tsv or config.json of another program's: the run would overwrite
    them; refused, and nothing in the folder changes."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("notes\n")
    (theirs / "metrics.jsonl").write_text('{"epoch": 1, "acc": 0.93}\n')
    (theirs / "vocab.tsv").write_text("hello\t3\n")
    (theirs / "config.json").write_text("{}")
    before = snapshot(theirs)
    code, err = train(capsys, "--run", theirs, "--corpus", corpus, *FAST, "--max-steps", "2")
    assert_refused(code, err, "is a folder holding other files, not an embedlab run")
    assert snapshot(theirs) == before


def test_a_config_json_edited_since_the_checkpoint_is_refused(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A checkpoint records the settings it was trained with: config.json edited by hand
    (another --lr) would change the run half-way while env.json's command says otherwise;
    raising the epochs there stays allowed, as --epochs may be raised."""
    run = tmp_path / "run"
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "3")
    assert code == 0, err
    config = json.loads((run / "config.json").read_text())
    config["optim"]["lr"] = 0.05
    (run / "config.json").write_text(json.dumps(config))
    before = snapshot(run)
    code, err = train(capsys, "--run", run, "--max-steps", "6")
    assert_refused(code, err, f"{run / 'config.json'} does not hold the settings ckpt-00000003 "
                              "was trained with: optim.lr (config.json 0.05, checkpoint 0.025); "
                              "put the checkpoint's values back (an edit would change the run "
                              "half-way), or pass --restart to start over with the new ones")
    assert snapshot(run) == before
    config["optim"]["lr"], config["optim"]["epochs"] = 0.025, 3
    (run / "config.json").write_text(json.dumps(config))
    code, err = train(capsys, "--run", run, "--max-steps", "6")
    assert code == 0 and "resuming" in err, err


@pytest.mark.parametrize("name", ["metrics.jsonl", "status.json", "vocab.tsv"])
def test_a_run_file_in_the_way_is_refused_before_the_resume_is_recorded(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    """A folder where a run file belongs stops the resume before config.json and env.json are
    rewritten: found by the loop's first write, the refused resume was recorded in them."""
    run = tmp_path / "run"
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "3")
    assert code == 0, err
    (run / name).unlink()
    (run / name).mkdir()
    before = snapshot(run)
    code, err = train(capsys, "--run", run, "--max-steps", "6", "--keep", "3")
    assert_refused(code, err, f"{run / name} is not a regular file (it is a folder); move it "
                              "out of the run folder, then re-run the same command")
    assert snapshot(run) == before


@pytest.mark.parametrize("flag", ["--run", "--runs-dir"])
def test_an_empty_run_folder_is_refused_not_taken_for_the_working_folder(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], flag: str) -> None:
    """--run "$RUN" with RUN unset: the working folder would become the run (or the parent of
    auto-named runs)."""
    monkeypatch.chdir(tmp_path)
    code, err = train(capsys, flag, "", "--corpus", corpus, *FAST, "--max-steps", "1")
    example = "runs/exp1" if flag == "--run" else "runs"
    assert_refused(code, err, f"{flag} is empty (an unset variable?); pass a folder, e.g. "
                              f"{flag} {example}")
    assert list(tmp_path.iterdir()) == []


def test_a_resume_removes_the_temporaries_a_killed_write_left(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A kill in the middle of an atomic write (status.json, the index, the projector's files)
    leaves its temporary beside the file; the next start of the run, holding its lock, removes
    them, and nothing else."""
    run = tmp_path / "run"
    summaries = [flag for flag in FAST if flag != "--no-tensorboard"]  # the projector's files
    code, err = train(capsys, "--run", run, "--corpus", corpus, *summaries, "--max-steps", "3")
    assert code == 0, err
    projector, = run.glob("[0-9]*/input_embeddings")
    left = [run / ".status.json.tmp-abc123", run / ".projector_config.pbtxt.tmp-x",
            projector / ".tensors.tsv.tmp-y"]
    for path in left:
        path.write_text("half")
    (run / ".notes").write_text("mine")  # a hidden file of the user's: not a temporary
    code, err = train(capsys, "--run", run, "--max-steps", "4")
    assert code == 0, err
    assert not any(path.exists() for path in left)
    assert (run / ".notes").read_text() == "mine"


def test_a_demo_run_whose_vocabulary_lost_the_planted_words_still_succeeds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the run finished and saved, then its report's analogy file (a temporary one the user
    # never named) was refused: exit 2
    from embedlab.testing import run_cli

    code, out, err = run_cli(["train", "--corpus", "demo", "--run", str(tmp_path / "r"),
                              "--epochs", "1", "--max-vocab", "50", "--threads", "1",
                              "--no-tensorboard", "--no-progress"], capsys)
    assert code == 0 and "finished" in err and "planted analogies (3CosAdd)" not in out
    assert "warning: the demo's report is left out: the vocabulary (50 words) holds none of " \
           "the planted analogies' words" in err


def test_a_negative_group_that_does_not_divide_the_batch_is_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the group is gcd(--negative-group, --batch-size): 33 and 64 give groups of one centre
    corpus = write_corpus(tmp_path / "c.txt", lines=60)
    base = ["--corpus", corpus, *FAST, "--max-steps", "1"]
    code, err = train(capsys, *base, "--run", tmp_path / "a", "--negative-group", "33",
                      "--batch-size", "64")
    assert code == 0
    assert ("embedlab: warning: --negative-group 33 does not divide --batch-size 64: groups of "
            "gcd(33, 64) = 1 centre share noise words, more draws and a slower step; pass a "
            "divisor of --batch-size, e.g. --negative-group 32\n") in err
    code, err = train(capsys, *base, "--run", tmp_path / "b", "--batch-size", "200")
    assert code == 0 and "gcd(32, 200) = 8 centres" in err and "--negative-group 25" in err
    for name, flags in (("c", ["--negative-group", "16", "--batch-size", "64"]),
                        ("d", ["--batch-size", "8"]),  # a group is at most the batch
                        ("e", ["--negative-group", "33", "--loss", "hs"])):
        code, err = train(capsys, *base, "--run", tmp_path / name, *flags)
        assert code == 0 and "does not divide" not in err, name
    # said for a new run, where the choice is made, not at every resume
    code, err = train(capsys, "--corpus", corpus, *FAST, "--max-steps", "2", "--run",
                      tmp_path / "a", "--negative-group", "33", "--batch-size", "64")
    assert code == 0 and "resuming" in err and "does not divide" not in err


def test_a_fresh_start_where_an_older_start_saved_nothing_resumes_to_the_same_bits(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a start of an older step revision that died before its first checkpoint left env.json:
    # the fresh start kept that first record, and its first resume cut batches the old way
    from embedlab.engines import STEP_REVISION

    corpus = write_corpus(tmp_path / "c.txt")
    dead = tmp_path / "dead"
    assert train(capsys, "--corpus", corpus, "--run", dead, *FAST, "--max-steps", "1")[0] == 0
    for name in ("checkpoints", "checkpoint", "status.json"):  # killed before its first save
        path = dead / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    env = json.loads((dead / "env.json").read_text())
    (dead / "env.json").write_text(json.dumps({**env, "step_revision": 5}))
    shutil.copytree(dead, tmp_path / "once")
    shutil.copytree(dead, tmp_path / "twice")
    code, err = train(capsys, "--run", tmp_path / "once", *FAST, "--max-steps", "8")
    assert code == 0 and "new run" in err
    for steps in ("4", "8"):
        assert train(capsys, "--run", tmp_path / "twice", *FAST, "--max-steps", steps)[0] == 0
    assert (find_checkpoint(tmp_path / "once") / "tensors.safetensors").read_bytes() == \
        (find_checkpoint(tmp_path / "twice") / "tensors.safetensors").read_bytes()
    env = json.loads((tmp_path / "twice" / "env.json").read_text())
    assert env["step_revision"] == STEP_REVISION and len(env["resumes"]) == 1


def test_restart_of_a_run_older_than_some_settings_names_the_defaults_it_takes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a config.json without init_scale and interleave: the run trained with 1 and 1, and the
    # restart takes today's defaults for them, which "with its settings" alone did not say
    corpus = write_corpus(tmp_path / "c.txt")
    run = tmp_path / "run"

    def made_before_them() -> None:
        assert train(capsys, "--corpus", corpus, "--run", run, *FAST, "--max-steps", "1")[0] == 0
        cfg = json.loads((run / "config.json").read_text())
        del cfg["model"]["init_scale"], cfg["optim"]["interleave"]
        (run / "config.json").write_text(json.dumps(cfg))

    made_before_them()
    code, err = train(capsys, "--run", run, "--restart", *FAST, "--max-steps", "1")
    assert code == 0
    assert ("; starting over with its settings and the ones given, and today's defaults for "
            "those added since it was made (pass --init-scale 1 --interleave 1 to keep its "
            "own)\n") in err
    shutil.rmtree(run)
    made_before_them()
    code, err = train(capsys, "--run", run, "--restart", *FAST, "--max-steps", "1",
                      "--interleave", "1")
    assert code == 0 and "(pass --init-scale 1 to keep its own)\n" in err


def test_probe_and_projector_flags_without_tensorboard_are_said_to_do_nothing(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """They log to TensorBoard alone: with --no-tensorboard the run logged nothing of them,
    silently."""
    code, err = train(capsys, "--run", tmp_path / "run", "--corpus", corpus, *FAST,
                      "--probe", "w0", "--projector-each-checkpoint")  # FAST: --no-tensorboard
    assert code == 0
    assert ("embedlab: warning: --probe and --projector-each-checkpoint log to TensorBoard "
            "alone, which --no-tensorboard turns off: they do nothing in this run; drop "
            "--no-tensorboard to log them") in err
    logged = [a for a in FAST if a != "--no-tensorboard"]
    code, err = train(capsys, "--run", tmp_path / "on", "--corpus", corpus, *logged,
                      "--probe", "w0")
    assert code == 0 and "warning" not in err


def test_a_resume_that_leaves_out_tensorboard_says_it_stays_off(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    base = ["--run", run, "--corpus", corpus, *[f for f in FAST if f != "--no-tensorboard"]]
    code, err = train(capsys, *base, "--max-steps", "2")
    assert code == 0 and "TensorBoard is off" not in err
    code, err = train(capsys, *base, "--max-steps", "4", "--no-tensorboard")
    assert code == 0 and "TensorBoard is off" not in err  # asked for in this command
    code, err = train(capsys, *base, "--max-steps", "6")  # the same command as at first
    assert code == 0 and ("embedlab: note: TensorBoard is off for this run (--no-tensorboard "
                          "is stored in its config.json); pass --tensorboard to write its "
                          "events again") in err
    code, err = train(capsys, *base, "--max-steps", "8", "--tensorboard")
    assert code == 0 and "TensorBoard is off" not in err
    code, err = train(capsys, *base, "--max-steps", "10")
    assert code == 0 and "TensorBoard is off" not in err


def _evaluated_run_whose_file_is_gone(capsys: pytest.CaptureFixture[str], corpus: Path,
                                      tmp_path: Path, *flags: str) -> Path:
    """A run of 2 steps evaluated on an analogy file at every step, the file deleted since."""
    questions = tmp_path / "q.txt"
    questions.write_text(": s\nw1 w2 w3 w4\nw5 w6 w7 w8\n", encoding="utf-8")
    run = tmp_path / "run"
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "2",
                      "--eval-every", "1", "--eval-analogies", questions, *flags)
    assert code == 0, err
    questions.unlink()
    return run


def test_a_resumed_run_drops_its_evaluation_and_probes(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # an evaluation file moved or deleted since stopped every resume, and no flag dropped it
    # (config.json had to be edited by hand)
    run = _evaluated_run_whose_file_is_gone(capsys, corpus, tmp_path, "--probe", "w1")
    code, err = train(capsys, "--run", run, "--max-steps", "3")
    line = assert_refused(code, err, "analogy file")
    assert line.endswith("(or pass --no-eval to resume without the run's evaluation)")
    code, err = train(capsys, "--run", run, "--max-steps", "3", "--no-eval", "--eval-every", "2")
    assert_refused(code, err, "--no-eval drops the run's evaluation, and --eval-every sets it; "
                              "pass one or the other")
    code, err = train(capsys, "--run", run, "--max-steps", "3", "--no-probe", "--probe", "w2")
    assert_refused(code, err, "--no-probe drops the run's probe words, and --probe sets them")
    code, err = train(capsys, "--run", run, "--max-steps", "3", "--no-eval", "--no-probe")
    assert code == 0, err
    stored = json.loads((run / "config.json").read_text(encoding="utf-8"))
    assert stored["eval"] == {"every_steps": None, "analogies": None, "similarity": [],
                              "restrict_vocab": 30000}
    assert stored["track"]["probe_words"] == []
    assert read_index(run).latest == 3
    code, err = train(capsys, "--run", run, "--max-steps", "4")  # and it stays dropped
    assert code == 0, err


def test_a_new_run_without_its_evaluation_file_is_not_told_to_drop_it(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = train(capsys, "--run", tmp_path / "run", "--corpus", corpus, *FAST,
                      "--eval-analogies", tmp_path / "nope.txt")
    assert "--no-eval" not in assert_refused(code, err, "analogy file")


def test_a_kill_after_the_final_commit_is_finished_in_the_index_and_status(
        copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # killed between the final checkpoint's commit and its index rewrite: the next command said
    # "already finished", yet the index kept naming the checkpoint before as the latest and
    # status.json the step it had saved before
    final = read_index(copy).latest
    assert final is not None
    steps = sorted(int(p.name.split("-")[1]) for p in (copy / "checkpoints").iterdir())
    before = steps[-2]
    index = (copy / "checkpoint").read_text(encoding="utf-8")
    (copy / "checkpoint").write_text(index.replace(f"latest: ckpt-{final:08d}",
                                                   f"latest: ckpt-{before:08d}"),
                                     encoding="utf-8")
    status = json.loads((copy / "status.json").read_text(encoding="utf-8"))
    finished = dict(status)
    status.update(status="running", checkpoint=before, raw_words=1)
    (copy / "status.json").write_text(json.dumps(status), encoding="utf-8")
    code, err = train(capsys, "--run", copy, *FAST, "--checkpoint-every", "10", "--keep", "50",
                      "--best-metric", "loss:max")
    assert code == 0 and "already finished" in err, err
    assert read_index(copy).latest == final
    now = json.loads((copy / "status.json").read_text(encoding="utf-8"))
    for key in ("status", "checkpoint", "step", "raw_words", "words_seen"):
        assert now[key] == finished[key], key


@pytest.mark.parametrize("name", ["status.json", "metrics.jsonl", "checkpoint", "config.json"])
def test_a_run_record_that_is_a_link_is_refused_and_its_target_untouched(
        copy: Path, tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    # a run folder from someone else with status.json -> ~/.bashrc: the resume rewrote that
    # file (metrics.jsonl's was emptied)
    victim = tmp_path / "victim.txt"
    victim.write_bytes((copy / name).read_bytes())
    before = victim.read_bytes()
    (copy / name).unlink()
    (copy / name).symlink_to(victim)
    code, err = train(capsys, "--run", copy, "--epochs", "3", "--max-steps", "1000")
    assert_refused(code, err, f"{copy / name} is a symbolic link (to {victim}), and training "
                              "rewrites the run's records in place")
    assert victim.read_bytes() == before


def test_a_larger_epochs_that_trains_nothing_leaves_a_finished_run_as_it_was(
        copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --epochs raised with a --max-steps already reached: the final/* rows and events were
    # dropped and the run called interrupted, for a call that trained nothing
    metrics = (copy / "metrics.jsonl").read_bytes()
    config = (copy / "config.json").read_bytes()
    status = json.loads((copy / "status.json").read_text(encoding="utf-8"))
    code, err = train(capsys, "--run", copy, "--epochs", "3", "--max-steps", str(status["step"]))
    assert code == 0, err
    assert (copy / "metrics.jsonl").read_bytes() == metrics
    assert b"final/" in metrics
    assert (copy / "config.json").read_bytes() == config
    assert json.loads((copy / "status.json").read_text(encoding="utf-8"))["status"] == "finished"


def test_a_checkpoint_altered_to_hold_nan_is_refused_at_resume(
        copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # resumed, it "diverged at step N", with the fix of a learning rate too high
    import hashlib

    from safetensors.numpy import load_file, save_file

    status = json.loads((copy / "status.json").read_text(encoding="utf-8"))
    ckpt = find_checkpoint(copy)
    tensors = load_file(str(ckpt / "tensors.safetensors"))
    tensors["input_embeddings"][3] = np.nan
    save_file(tensors, str(ckpt / "tensors.safetensors"), metadata={"step": str(status["step"])})
    manifest = json.loads((ckpt / "MANIFEST.json").read_text(encoding="utf-8"))
    for name in manifest["files"]:  # re-signed, as by someone who altered it
        data = (ckpt / name).read_bytes()
        manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (ckpt / "MANIFEST.json").write_text(json.dumps(manifest), encoding="utf-8")
    code, err = train(capsys, "--run", copy, "--epochs", "3")
    assert_refused(code, err, f"checkpoint {ckpt} holds nan or inf values in input_embeddings "
                              "(vectors that overflowed, saved by an older version, or a file "
                              "altered behind a re-signed manifest), from which no step can "
                              "train")


def test_a_kill_after_the_max_steps_commit_is_repaired_by_the_same_command(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # killed after --max-steps' checkpoint was committed, before the status said so: the
    # same command again trains nothing, and now says the run is interrupted, not "running"
    run = tmp_path / "run"
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "5")
    assert code == 0, err
    status = json.loads((run / "status.json").read_text(encoding="utf-8"))
    status.update(status="running", pid=2**22 + 7)
    (run / "status.json").write_text(json.dumps(status), encoding="utf-8")
    code, err = train(capsys, "--run", run, "--corpus", corpus, *FAST, "--max-steps", "5")
    assert code == 0, err
    now = json.loads((run / "status.json").read_text(encoding="utf-8"))
    assert (now["status"], now["checkpoint"], now["step"]) == ("interrupted", 5, 5)


def test_a_corpus_given_as_an_argument_is_told_to_come_with_corpus(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # prepare takes CORPUS as its argument, train --corpus: the slip is told the flag
    corpus = write_corpus(tmp_path / "my c.txt")
    code, err = train(capsys, corpus)
    assert (code, err) == (2, "embedlab: error: Got unexpected extra argument "
                              f"({corpus}): the corpus comes with --corpus, e.g. --corpus "
                              f"'{corpus}' (see 'embedlab train --help')\n")
    for args in (["--corpus", corpus, corpus], [f"--corpus={corpus}", corpus],
                 ["--probe", "w1", "w2"]):  # a corpus given, or no file named
        code, err = train(capsys, *args)
        assert code == 2 and "e.g. --corpus" not in err, err


@pytest.mark.parametrize(("args", "said"), [
    # its own fix, --eval-analogies FILE, is what --no-eval refuses
    (["--no-eval", "--best-metric", "analogy"],
     "--no-eval drops the run's evaluation, and --best-metric analogy chooses the best "
     "checkpoint by it; pass --best-metric loss, or drop --no-eval"),
    (["--probe", ""], "--probe words must be non-empty tokens without spaces, got ''; pass "
                      "e.g. --probe king"),
])
def test_contradicting_or_empty_settings_get_a_fix_that_works(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str) -> None:
    corpus = write_corpus(tmp_path / "c.txt")
    code, err = train(capsys, "--corpus", corpus, "--run", tmp_path / "r", *args)
    assert (code, err) == (2, f"embedlab: error: {said}\n")
    assert not (tmp_path / "r").exists()


def test_the_same_command_with_relative_paths_resumes_from_another_folder(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # --corpus c.txt names nothing from there, and the run's corpus from the folder the run
    # was made in: the same run, as the docs say, and the same analogy file
    here, there = _here_and_there(tmp_path, corpus, monkeypatch)
    (here / "q.txt").write_text(": s\nw1 w2 w3 w4\n")
    same = ["--run", tmp_path / "run", "--corpus", "c.txt", *FAST, "--eval-analogies", "q.txt"]
    code, err = train(capsys, *same, "--max-steps", "2")
    assert code == 0, err
    monkeypatch.chdir(there)
    code, err = train(capsys, *same, "--max-steps", "4")
    assert code == 0 and "step 4," in err, err


def test_a_run_whose_best_is_by_analogy_is_told_both_flags_that_drop_its_evaluation(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --no-eval alone is refused: its best checkpoint is chosen by the analogy accuracy
    run = _evaluated_run_whose_file_is_gone(capsys, corpus, tmp_path, "--best-metric",
                                            "analogy")
    code, err = train(capsys, "--run", run, "--max-steps", "3")
    line = assert_refused(code, err, "analogy file")
    assert line.endswith("(or pass --no-eval --best-metric loss to resume without the run's "
                         "evaluation)")
    code, err = train(capsys, "--run", run, "--max-steps", "3", "--no-eval", "--best-metric",
                      "loss")
    assert code == 0, err
