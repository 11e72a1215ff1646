"""embedlab.cli.main's error handling: what reaches the user as one line, what stays a bug."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from embedlab.cli import main


def test_an_unusable_path_anywhere_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # the net under the specific messages: an OSError naming a path the user can fix
    import embedlab.cli.query as query

    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "/some/where")

    monkeypatch.setattr(query, "_load", denied)
    with pytest.raises(SystemExit) as exit_info:
        main(["neighbors", "runs/x", "king"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err == ("embedlab: error: cannot use /some/where (Permission denied); give your "
                   "user permission to read it, or, for a file being made, to write in its "
                   "folder\n")  # permissions alone: no full disk or missing parent to check

    def missing(*args: object, **kwargs: object) -> None:
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", "/some/file/x")

    monkeypatch.setattr(query, "_load", missing)
    with pytest.raises(SystemExit):
        main(["neighbors", "runs/x", "king"])
    assert capsys.readouterr().err.startswith(
        "embedlab: error: cannot use /some/file/x (Not a directory); check that the path")


def test_too_many_open_files_names_the_limit_not_the_path(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """ulimit -n 10: a traceback ending in "OSError: [Errno 24] Too many open files"."""
    import embedlab.cli.query as query

    def no_descriptors(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EMFILE, "Too many open files", "/some/prep/ids.u32")

    monkeypatch.setattr(query, "_load", no_descriptors)
    with pytest.raises(SystemExit) as exit_info:
        main(["neighbors", "runs/x", "king"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "embedlab: error: cannot use /some/prep/ids.u32 (Too many open files); raise the "
        "open-file limit (ulimit -n 1024 or more) and re-run the command\n")


def test_an_oserror_without_a_path_stays_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    import embedlab.cli.query as query

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("something internal")

    monkeypatch.setattr(query, "_load", broken)
    with pytest.raises(OSError, match="something internal"):
        main(["neighbors", "runs/x", "king"])


@pytest.mark.parametrize(("error", "needle"), [
    # a full disk hit by a write that names no file (os.write, fsync, TensorBoard's writer)
    (OSError(errno.ENOSPC, "No space left on device"),
     "a write failed (No space left on device); free space on the disk and re-run the same "
     "command: what was saved before is intact, and a training run resumes from its last "
     "checkpoint"),
    (OSError(errno.EROFS, "Read-only file system"), "a write failed (Read-only file system); "
     "make the disk writable (it is mounted read-only) and re-run"),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), "a write failed (Disk quota exceeded); free "
     "space within your disk quota and re-run"),
    # a failing disk or a network file system gone: no traceback either
    (OSError(errno.EIO, "Input/output error"), "a read or write failed (Input/output error); "
     "check the disk (an input/output error: a failing disk, or a network file system that "
     "went away) and re-run"),
    (OSError(errno.ENOSPC, "No space left on device", "runs/x/status.json"),
     "a write to runs/x/status.json failed (No space left on device); free space on the disk"),
    (MemoryError(), "out of memory; free memory or, for train, lower --dim, --batch-size, "
                    "--window or --max-vocab, and re-run: what was saved before is intact"),
    # torch's failed CPU allocation is a RuntimeError
    (RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate "
                  "memory: you tried to allocate 4000000000000 bytes."), "out of memory;"),
    (RuntimeError("can't start new thread"), "cannot start a thread: the limit on the user's "
     "processes (ulimit -u) or on memory (ulimit -v) is reached; raise it or, for train, lower "
     "--threads, and re-run: what was saved before is intact"),
    # a shared library that cannot be mapped under ulimit -v
    (ImportError("/x/_imaging.cpython-311-x86_64-linux-gnu.so: failed to map segment from "
                 "shared object"), "out of memory;"),
], ids=["disk-full", "read-only", "quota", "io-error", "disk-full-file", "MemoryError",
        "torch-alloc", "no-thread", "import-mmap"])
def test_a_full_disk_or_memory_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str],
                                           error: BaseException, needle: str) -> None:
    import embedlab.cli.query as query

    def failing(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(query, "_load", failing)
    with pytest.raises(SystemExit) as exit_info:
        main(["neighbors", "runs/x", "king"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"embedlab: error: {needle}")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_standard_output_is_said_as_such(tmp_path: Path) -> None:
    # an export done, its last line to a stdout on a full disk: "a write failed ... re-run the
    # same command", which the finished export then refused
    import subprocess
    import sys

    import numpy as np

    from embedlab.vectors import Vectors

    Vectors(["a", "b"], np.eye(2, dtype=np.float32)).to_word2vec(tmp_path / "v.txt")
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "embedlab", "export", str(tmp_path / "v.txt"),
                               "--out", str(tmp_path / "out.txt")], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr == ("embedlab: error: cannot write to standard output (No space left on "
                           "device): what the command printed there is incomplete, the files it "
                           "wrote are complete; send the output where there is room\n")
    assert (tmp_path / "out.txt").read_text().startswith("2 2\n")


def test_a_terminal_that_went_away_is_not_called_a_full_disk(tmp_path: Path) -> None:
    import pty
    import subprocess
    import sys

    import numpy as np

    from embedlab.vectors import Vectors

    Vectors(["a", "b"], np.eye(2, dtype=np.float32)).to_word2vec(tmp_path / "v.txt")
    controller, terminal = pty.openpty()
    os.close(controller)  # the window closed: writes to the terminal fail with EIO
    try:
        done = subprocess.run([sys.executable, "-m", "embedlab", "neighbors",
                               str(tmp_path / "v.txt"), "a"], stdout=terminal,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(terminal)
    assert done.returncode == 2
    assert done.stderr == ("embedlab: error: cannot write to standard output (Input/output "
                           "error): what the command printed there is incomplete, the files it "
                           "wrote are complete; send the output to a terminal or a disk that "
                           "works\n")


def test_other_import_errors_stay_bugs(monkeypatch: pytest.MonkeyPatch) -> None:
    import embedlab.cli.query as query

    def broken(*args: object, **kwargs: object) -> None:
        raise ImportError("cannot import name 'x' from 'y'")

    monkeypatch.setattr(query, "_load", broken)
    with pytest.raises(ImportError, match="cannot import name"):
        main(["neighbors", "runs/x", "king"])


def test_other_runtime_errors_stay_bugs(monkeypatch: pytest.MonkeyPatch) -> None:
    import embedlab.cli.query as query

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(query, "_load", broken)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        main(["neighbors", "runs/x", "king"])


@pytest.mark.parametrize(("given", "expected"), [
    ({}, "2000"),  # nothing chosen: a short spin
    ({"GOMP_SPINCOUNT": "1000000"}, "1000000"),  # the user's own choice stays
    ({"OMP_WAIT_POLICY": "active"}, None),  # ... and so does a wait policy (it implies a count)
])
def test_openmp_spinning_is_limited_unless_the_user_chose(
        monkeypatch: pytest.MonkeyPatch, given: dict[str, str], expected: str | None) -> None:
    import os

    for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        monkeypatch.setenv(name, "x")  # recorded, so that what main() sets is undone after
        monkeypatch.delenv(name)
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    main(["--version"])
    assert os.environ.get("GOMP_SPINCOUNT") == expected


@pytest.mark.parametrize("engine", ["native", "torch"])
def test_openmp_spinning_is_set_before_libgomp_loads(tmp_path: Path, engine: str) -> None:
    # libgomp reads GOMP_SPINCOUNT once, when it is loaded (with the native kernel, or with
    # torch): the variable must be in the environment before either loads, or it has no effect.
    # A fresh process runs a one-step training with spies that check the variable then.
    import subprocess
    import sys

    from embedlab.testing import write_zipf_corpus

    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=50)
    code = ("import ctypes, os, sys\n"
            "os.environ.pop('GOMP_SPINCOUNT', None); os.environ.pop('OMP_WAIT_POLICY', None)\n"
            "class Spy:\n"  # on sys.meta_path: sees every import, importlib's included
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'torch':\n"
            "            assert os.environ.get('GOMP_SPINCOUNT') == '2000', 'torch came first'\n"
            "        return None\n"
            "sys.meta_path.insert(0, Spy())\n"
            "loaded = []\n"
            "class CDLL(ctypes.CDLL):\n"
            "    def __init__(self, name, *args, **kwargs):\n"
            "        if 'w2v-' in str(name):\n"
            "            assert os.environ.get('GOMP_SPINCOUNT') == '2000', 'kernel came first'\n"
            "            loaded.append(name)\n"
            "        super().__init__(name, *args, **kwargs)\n"
            "ctypes.CDLL = CDLL\n"
            "from embedlab.cli import main\n"
            f"main(['train', '--corpus', {str(corpus)!r}, '--run', {str(tmp_path / 'run')!r},\n"
            "      '--min-count', '1', '--dim', '4', '--max-steps', '1', '--no-progress',\n"
            f"      '--no-tensorboard', '--threads', '1', '--engine', {engine!r}])\n"
            f"assert ('torch' in sys.modules) == {engine == 'torch'}\n"
            f"assert bool(loaded) == {engine == 'native'}\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=200)
    assert out.returncode == 0, out.stderr
    assert "stopped at --max-steps 1" in out.stderr


def test_a_mistyped_command_names_the_closest_one() -> None:
    import subprocess
    import sys

    typed = subprocess.run([sys.executable, "-m", "embedlab", "trian", "--corpus", "demo"],
                           capture_output=True, text=True, timeout=60)
    assert typed.returncode == 2 and typed.stdout == ""
    assert typed.stderr == ("embedlab: error: No such command 'trian'; did you mean 'train'? "
                            "(see 'embedlab --help')\n")


@pytest.mark.parametrize("typed, hint", [("nieghbors", "; did you mean 'neighbors'?"),
                                         ("rus", "; did you mean 'runs'?"),
                                         ("zzz", ". (see")])
def test_only_a_close_command_is_suggested(typed: str, hint: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([typed])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"No such command '{typed}'{hint}" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["--size", "100"], "No such option '--size'; did you mean --dim? (see 'embedlab train "
                        "--help')"),
    (["--workers", "4"], "No such option '--workers'; did you mean --threads? "),
    (["--hs", "1"], "No such option '--hs'; did you mean --loss (-hs 1 is --loss hs, -hs 0 "
                    "the default --loss neg; a run trains one loss, not word2vec.c's -hs 1 with "
                    "-negative 5 together)? "),
    (["--sg", "1"], "did you mean --model (-sg 1 is --model skipgram, -sg 0 --model cbow)? "),
    (["--corpus", "c.txt", "-size", "100"],
     "-size is word2vec.c's flag; did you mean --dim? (embedlab's flags start with two dashes"),
    (["-train", "c.txt", "-cbow", "1"],
     "word2vec.c's flags, with embedlab's meanings: -train is --corpus; -cbow is --model "),
    (["-cbow", "0"], "did you mean --model (-cbow 1 is --model cbow, -cbow 0 --model "
                     "skipgram, embedlab's default where word2vec.c's is -cbow 1; word2vec.c's "
                     "CBOW starts at -alpha 0.05, embedlab's --lr at 0.025 for both)? "),
    (["-threads", "4"], "-threads is word2vec.c's flag; did you mean --threads? "),
    (["--no-progress", "-size", "100"], "-size is word2vec.c's flag; did you mean --dim? "),
    (["-output", "vec.bin"], "-output is word2vec.c's flag: the vectors stay in the run folder "
                             "--run RUN, and 'embedlab export RUN --out vectors.bin' writes a "
                             "file (see 'embedlab train --help')"),
    (["--output", "vec.bin"], "No such option '--output': the vectors stay in the run folder"),
    (["-binary", "1"], "-binary is word2vec.c's flag: the --out name of 'embedlab export RUN' "
                       "picks it: vectors.bin is binary"),
    (["--save-vocab", "v.txt"], "every run writes its vocabulary to RUN/vocab.tsv"),
    (["-read-vocab", "v.txt"], "pass --corpus DIR: its vocabulary is reused"),
    (["-classes", "500"], "word classes (k-means) are not offered"),
    (["-hs", "0"], "did you mean --loss (-hs 1 is --loss hs, -hs 0 the default --loss neg; "
                   "a run trains one loss, not word2vec.c's -hs 1 with -negative 5 together)? "),
    # the CS20 lecture's constants, as a student types them
    (["--embed-size", "128"], "did you mean --dim? "),
    (["--num-sampled", "64"], "did you mean --negative (noise words per (centre, context) "
                              "pair)? "),
    (["--skip-step", "5000"], "did you mean --log-every (the steps between loss reports)? "),
    (["--learning-rate", "1.0"], "did you mean --lr? "),
    (["--vocab-size", "50000"], "did you mean --max-vocab (with --unk UNK the other words "
                                "become UNK, as in the lecture; --preset cs20 sets both)? "),
    # a ported gensim call's names typed as flags: all of them at once too
    (["--sg", "1", "--vector-size", "50", "--workers=1"],
     "gensim's or word2vec.c's flags, with embedlab's meanings: --sg is --model (-sg 1 is "
     "--model skipgram, -sg 0 --model cbow); --vector-size is --dim; --workers is --threads "
     "(see 'embedlab train --help')"),
    (["--shrink-windows", "0"], "No such option '--shrink-windows': windows always shrink as "
                                "word2vec's do (each centre draws 1 to --window)"),
    (["--batch-words", "100"], "here the threads share each step, whose size --batch-size sets "
                               "in centre words (it changes the vectors, not only the speed)"),
    # a pasted word2vec.c command line is told all its flags at once, in one line
    (["-train", "t.txt", "-output", "v.bin", "-size", "200", "-iter", "15"],
     "word2vec.c's flags, with embedlab's meanings: -train is --corpus; -output: the vectors "
     "stay in the run folder --run RUN, and 'embedlab export RUN --out vectors.bin' writes a "
     "file; -size is --dim; -iter is --epochs (embedlab's flags start with two dashes; see "
     "'embedlab train --help')"),
])
def test_gensim_and_word2vec_c_names_are_told_embedlabs(
        argv: list[str], message: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A word2vec.c or gensim user's flags are refused naming the flag that means the same, not
    flags spelled alike (click suggests --seed for --size), and nothing is written."""
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--run", str(tmp_path / "run"), *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("embedlab: error: ") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["prepare", "c.txt", "--out", "d", "-min-count", "3"],
     "-min-count is a flag with one dash; did you mean --min-count? (embedlab's flags start with "
     "two dashes; see 'embedlab prepare --help')"),
    (["eval", "v.bin", "-analogies", "q.txt", "-restrict-vocab", "9"],
     "flags with one dash, with embedlab's meanings: -analogies is --analogies; -restrict-vocab "
     "is --restrict-vocab (embedlab's flags start with two dashes; see 'embedlab eval --help')"),
    # word2vec.c's and compute-accuracy's names, told where they are typed to other commands
    (["eval", "v.bin", "-threshold", "30000"],
     "-threshold is word2vec.c's flag; did you mean --restrict-vocab (compute-accuracy's "
     "threshold)? (embedlab's flags start with two dashes; see 'embedlab eval --help')"),
    (["eval", "v.bin", "--threshold", "30000"],
     "No such option '--threshold'; did you mean --restrict-vocab (compute-accuracy's "
     "threshold)? (see 'embedlab eval --help')"),
    (["prepare", "-train", "c.txt", "--out", "d"],
     "-train is word2vec.c's flag: the corpus is prepare's argument (embedlab prepare CORPUS "
     "--out DIR) (see 'embedlab prepare --help')"),
    (["prepare", "c.txt", "-output", "d"],
     "-output is word2vec.c's flag; did you mean --out? (embedlab's flags start with two "
     "dashes; see 'embedlab prepare --help')"),
    (["tensorboard", "--logdir", "runs"],
     "No such option '--logdir': the folder of runs is the argument (embedlab tensorboard DIR) "
     "(see 'embedlab tensorboard --help')"),
    (["tensorboard", "-logdir", "runs"],
     "-logdir is TensorBoard's flag: the folder of runs is the argument (embedlab tensorboard "
     "DIR) (see 'embedlab tensorboard --help')"),
    # gensim's names for prepare's options, and a flag of the command typed with underscores
    (["prepare", "c.txt", "--out", "d", "--max-vocab-size", "9"],
     "No such option '--max-vocab-size'; did you mean --max-distinct? (see 'embedlab prepare "
     "--help')"),
    (["prepare", "c.txt", "--out", "d", "--max-final-vocab", "9", "--max-vocab-size", "9"],
     "gensim's or word2vec.c's flags, with embedlab's meanings: --max-final-vocab is "
     "--max-vocab; --max-vocab-size is --max-distinct (see 'embedlab prepare --help')"),
    (["prepare", "c.txt", "--out", "d", "--min_count", "3"],
     "No such option '--min_count'; did you mean --min-count? (see 'embedlab prepare --help')"),
    (["eval", "v.bin", "--analogies", "q.txt", "--restrict_vocab", "3"],
     "No such option '--restrict_vocab'; did you mean --restrict-vocab? (see 'embedlab eval "
     "--help')"),
    (["export", "run", "--binary", "1", "--out", "v.bin"],
     "No such option '--binary': the --out name picks it (vectors.bin: binary, vectors.txt: "
     "text), or --format word2vec-binary (see 'embedlab export --help')"),
    # word2vec.c's vocabulary flags, where they belong
    (["prepare", "c.txt", "--out", "d", "-save-vocab", "v.txt"],
     "-save-vocab is word2vec.c's flag: prepare writes the vocabulary, with its counts, to "
     "DIR/vocab.tsv (see 'embedlab prepare --help')"),
    (["prepare", "c.txt", "--out", "d", "--read-vocab", "v.txt"],
     "No such option '--read-vocab': train reads a prepared folder's vocabulary with --corpus "
     "DIR (see 'embedlab prepare --help')"),
    (["prepare", "-train", "c.txt", "-save-vocab", "v.txt", "-min-count", "1"],
     "word2vec.c's flags, with embedlab's meanings: -train: the corpus is prepare's argument "
     "(embedlab prepare CORPUS --out DIR); -save-vocab: prepare writes the vocabulary, with its "
     "counts, to DIR/vocab.tsv; -min-count is --min-count (embedlab's flags start with two "
     "dashes; see 'embedlab prepare --help')"),
    # a one-dash name that is no flag anywhere is named as typed, not as a short option (-t)
    (["train", "--corpus", "c.txt", "-thread", "1"],
     "No such option '-thread'; did you mean --threads? (embedlab's flags start with two "
     "dashes; see 'embedlab train --help')"),
    (["train", "--corpus", "c.txt", "-thread", "1", "-size", "3"],
     "word2vec.c's flags, with embedlab's meanings: -size is --dim; -thread: no such flag (did "
     "you mean --threads?) (embedlab's flags start with two dashes; see 'embedlab train "
     "--help')"),
    (["neighbors", "v.txt", "-kk", "3", "w"],
     "No such option '-kk'; did you mean -k? (see 'embedlab neighbors --help')"),
    (["neighbors", "v.txt", "-ly"],
     "No such option '-ly' (embedlab's flags start with two dashes; a word that starts with - "
     "goes after --, as in '-- -ly'; see 'embedlab neighbors --help')"),
    (["neighbours", "v.txt", "-ly"],  # the alias: the same words, naming the command
     "No such option '-ly' (embedlab's flags start with two dashes; a word that starts with - "
     "goes after --, as in '-- -ly'; see 'embedlab neighbors --help')"),
])
def test_a_long_flag_with_one_dash_is_named_with_two(argv: list[str], message: str,
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # click read -min-count as -m and said "No such option '-m'"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == f"embedlab: error: {message}\n"
    assert list(tmp_path.iterdir()) == []


def test_short_options_run_together_are_left_to_click(
        capsys: pytest.CaptureFixture[str]) -> None:
    main(["neighbors", "v.txt", "-hk", "1"])  # -h -k 1: the help
    assert "Usage: embedlab neighbors" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["prepare", "c.txt", "--out", "d", "--threads", "4"],  # not train's: click's own words
    ["train", "--probe", "-window", "--corpus", "nowhere.txt"],  # a value, not a flag
])
def test_train_names_are_not_hinted_elsewhere(argv: list[str], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        main(argv)
    err = capsys.readouterr().err
    assert "did you mean --threads" not in err and "word2vec.c's flag" not in err, err


def test_commands_other_than_train_speak_inside_a_torchrun_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # a train process that is not its machine's first leaves shared lines to that one; an
    # 'embedlab eval' run inside someone's distributed job exited 2 without a word
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", str(tmp_path / "missing.txt"), "--analogies", "q.txt"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("embedlab: error: ")


@pytest.mark.parametrize("argv, command", [(["runs", "x", "--sort"], "runs"),
                                           (["neighbours", "x", "--metric"], "neighbours"),
                                           (["export", "x", "--out"], "export")])
def test_an_option_missing_its_value_points_to_its_commands_help(
        argv: list[str], command: str, capsys: pytest.CaptureFixture[str]) -> None:
    # click's parser raises it without a context: the hint named 'embedlab --help'
    from embedlab.testing import run_cli

    code, _, err = run_cli(argv, capsys)
    assert code == 2 and err == (f"embedlab: error: Option '{argv[-1]}' requires an argument. "
                                 f"(see 'embedlab {command} --help')\n")


def test_sigterm_to_a_writing_command_removes_its_partial_output(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # SIGTERM's default action ended export where it stood: a hidden .out.bin.tmp-* as big as
    # the export stayed behind, and nothing was said
    import contextlib
    import os
    import signal

    import numpy as np

    import embedlab
    from embedlab.export import word2vec

    source = embedlab.Vectors(("a", "b", "c"), np.eye(3, dtype=np.float32)).to_word2vec(
        tmp_path / "v.txt")
    opened = word2vec._compressing

    @contextlib.contextmanager
    def killed_while_writing(raw: Any, path: Path) -> Iterator[Any]:
        with opened(raw, path) as fh:
            fh.write(b"3 3\n")
            os.kill(os.getpid(), signal.SIGTERM)
            yield fh

    monkeypatch.setattr(word2vec, "_compressing", killed_while_writing)
    with pytest.raises(SystemExit) as e:
        main(["export", str(source), "--out", str(tmp_path / "out.bin")])
    assert e.value.code == 128 + signal.SIGTERM
    assert capsys.readouterr().err.endswith(
        "embedlab: terminated (SIGTERM); the partial output is removed\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.txt"]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("metrics.jsonl", "[" * 5000 + "]" * 5000 + "\n",
     "a JSON file the command read nests too deeply to be read"),
    ("metrics.jsonl", '{"step": ' + "9" * 5000 + "}\n",
     "a file the command read holds a number of thousands of digits"),
])
def test_crafted_json_in_a_run_is_one_line(tmp_path: Path, name: str, content: str,
                                           needle: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # a run folder from someone else: RecursionError and int()'s digit limit were tracebacks
    import json

    from embedlab.config import TrainConfig

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(TrainConfig().to_dict()))
    (run / name).write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        main(["runs", str(tmp_path)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert err.count("\n") == 1 and err.startswith(f"embedlab: error: {needle}")
