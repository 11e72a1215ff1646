"""`embedlab prepare`: success summary, and one-line errors with exit code 2 for bad input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from embedlab.data.prepared import PreparedCorpus
from embedlab.testing import run_cli


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_cli(argv, capsys)


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("embedlab: error: ")
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    p = tmp_path / "corpus.txt"
    p.write_text("the quick brown fox\njumps over the lazy dog\n" * 5, encoding="utf-8")
    return p


def test_prepare_prints_a_summary(corpus: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "prep"
    code, stdout, err = run(["prepare", str(corpus), "--out", str(out), "--min-count", "5",
                             "--no-progress"], capsys)
    assert code == 0 and err == ""
    assert stdout.startswith(f"prepared {out}: 45 tokens read, 45 kept, 10 sentences (lines), "
                             "8 words in the vocabulary (")
    pc = PreparedCorpus.open(out)
    assert pc.vocab.words[0] == "the" and pc.meta["min_count"] == 5
    one = tmp_path / "one.txt"
    one.write_text("a\n")
    code, stdout, _ = run(["prepare", str(one), "--out", str(tmp_path / "p1"), "--min-count", "1",
                           "--no-progress"], capsys)
    assert code == 0 and stdout.startswith(f"prepared {tmp_path / 'p1'}: 1 token read, 1 kept, "
                                           "1 sentence (lines), 1 word in the vocabulary (")


def test_options_reach_the_vocabulary(corpus: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "prep"
    code, _, _ = run(["prepare", str(corpus), "--out", str(out), "--min-count", "1",
                      "--max-vocab", "3", "--unk", "<unk>", "--lowercase", "--no-progress"],
                     capsys)
    assert code == 0
    pc = PreparedCorpus.open(out)
    assert pc.vocab.words == ("<unk>", "the", "brown")
    assert pc.meta["lowercase"] and pc.meta["unk"] == "<unk>" and pc.meta["max_vocab"] == 3


def test_no_lowercase_is_taken_as_train_takes_it(corpus: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A train refused on a folder prepared with --lowercase names --no-lowercase and says to
    re-run prepare with it: prepare takes it."""
    out = tmp_path / "prep"
    code, _, err = run(["prepare", str(corpus), "--out", str(out), "--no-lowercase",
                        "--no-progress"], capsys)
    assert (code, err) == (0, "")
    assert PreparedCorpus.open(out).meta["lowercase"] is False


def test_force_replaces(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "prep"
    assert run(["prepare", str(corpus), "--out", str(out), "--no-progress"], capsys)[0] == 0
    code, _, err = run(["prepare", str(corpus), "--out", str(out), "--no-progress"], capsys)
    assert_one_line_error(code, err, "already holds a prepared corpus", "--force")
    code, _, _ = run(["prepare", str(corpus), "--out", str(out), "--min-count", "1", "--force",
                      "--no-progress"], capsys)
    assert code == 0 and PreparedCorpus.open(out).meta["min_count"] == 1


def test_missing_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["prepare", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "o")],
                       capsys)
    assert_one_line_error(code, err, "corpus not found", "nope.txt", "pass an existing")
    assert not (tmp_path / "o").exists()


def test_empty_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    code, _, err = run(["prepare", str(tmp_path / "empty.txt"), "--out", str(tmp_path / "o")],
                       capsys)
    assert_one_line_error(code, err, "empty.txt holds no tokens",
                          "; pass a corpus with whitespace-separated words")
    assert not (tmp_path / "o").exists()


def test_binary_garbage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "garbage.bin").write_bytes(bytes(range(256)) * 40)
    code, _, err = run(["prepare", str(tmp_path / "garbage.bin"), "--out", str(tmp_path / "o")],
                       capsys)
    assert_one_line_error(code, err, "garbage.bin looks binary", "UTF-8 text")  # NUL bytes
    assert not (tmp_path / "o").exists()


def test_min_count_too_high(corpus: Path, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["prepare", str(corpus), "--out", str(tmp_path / "o"),
                        "--min-count", "1000"], capsys)
    assert_one_line_error(code, err, "no word occurs at least --min-count 1000 times",
                          "lower --min-count")
    assert not (tmp_path / "o").exists()


def test_out_is_a_file(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "o").write_text("keep me")
    code, _, err = run(["prepare", str(corpus), "--out", str(tmp_path / "o")], capsys)
    assert_one_line_error(code, err, "is a file", "; pass a new folder name")
    assert (tmp_path / "o").read_text() == "keep me"


def test_out_inside_a_file_or_empty_is_named_so(corpus: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "o").write_text("keep me")
    code, _, err = run(["prepare", str(corpus), "--out", str(tmp_path / "o" / "x")], capsys)
    assert_one_line_error(code, err, f"cannot create --out {tmp_path / 'o' / 'x'}: "
                                     f"{tmp_path / 'o'} is a file, not a folder; pass a folder "
                                     "path")
    monkeypatch.chdir(tmp_path)  # "--out $DIR" with DIR unset: not the working folder
    code, _, err = run(["prepare", str(corpus), "--out", ""], capsys)
    assert_one_line_error(code, err, "--out is empty (an unset variable?); pass a new folder, "
                                     "e.g. --out data/prepared")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["o", corpus.name])


def test_out_is_a_foreign_folder(corpus: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "x").write_text("keep me")
    code, _, err = run(["prepare", str(corpus), "--out", str(tmp_path / "o"), "--force"], capsys)
    assert_one_line_error(code, err, "not empty", "; pass a new or empty folder")
    assert (tmp_path / "o" / "x").read_text() == "keep me"


@pytest.mark.parametrize("flags,needle", [
    (["--min-count", "0"], "--min-count must be an integer > 0, got 0; "
                           "pass e.g. --min-count 5 (--min-count 1 keeps every word, as "
                           "gensim's min_count=0 does)"),
    (["--min-count", "x"], "'--min-count': 'x' is not a valid integer. "
                           "(see 'embedlab prepare --help')"),
    # no fix clause in this message (config.py): only the problem is checked
    (["--max-vocab", "1", "--unk", "UNK"], "--max-vocab must be >= 2 when --unk is set"),
    ([], "Missing option '--out'. (see 'embedlab prepare --help')"),
    (["--workers", "2"], "No such option '--workers': prepare tokenises with a thread per core "
                         "this process may use; set EMBEDLAB_PREPARE_WORKERS=N in the "
                         "environment for another number")])
def test_bad_flags(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                   flags: list[str], needle: str) -> None:
    argv = ["prepare", str(corpus), *flags]
    if flags:
        argv += ["--out", str(tmp_path / "o")]
    code, _, err = run(argv, capsys)
    assert_one_line_error(code, err, needle)
    assert not (tmp_path / "o").exists()


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["prepare", "--help"], capsys)
    assert code == 0
    for flag in ("--out", "--lowercase", "--min-count", "--max-vocab", "--unk",
                 "--max-distinct", "--force"):
        assert flag in out


def test_real_process_exit_code_and_stderr(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("embedlab")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "embedlab"]
    garbage = tmp_path / "g.dat"
    garbage.write_bytes(b"\x00" * 100)
    proc = subprocess.run([*cmd, "prepare", str(garbage), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "looks binary" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_failed_prepare_removes_the_parent_folders_it_made(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["prepare", str(tmp_path / "nope.txt"), "--out",
                        str(tmp_path / "a" / "b" / "out")], capsys)
    assert_one_line_error(code, err, "corpus not found")
    assert not (tmp_path / "a").exists()
    # inside the corpus folder: refused, and the folder holds only what it held before
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "c.txt").write_bytes(corpus.read_bytes())
    code, _, err = run(["prepare", str(folder), "--out", str(folder / "new" / "deeper" / "out")],
                       capsys)
    assert_one_line_error(code, err, "is inside the corpus folder",
                          "; the output would be read as corpus text — pass a folder outside it")
    assert sorted(p.name for p in folder.iterdir()) == ["c.txt"]
    # a parent that existed before stays
    (tmp_path / "kept").mkdir()
    run(["prepare", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "kept" / "o")], capsys)
    assert (tmp_path / "kept").is_dir()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_once_the_folder_is_complete_is_named_as_it_came(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, signum: int) -> None:
    """SIGTERM or SIGHUP after the commit keeps the complete folder as Ctrl-C does, and names
    itself; before the commit it leaves nothing and exits 128 + its number."""
    import time

    from embedlab.data import preparing

    def late(*args: object) -> None:  # runs after the folder is committed
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the handler raises first
        raise AssertionError("the signal did not stop the command")

    monkeypatch.setattr(preparing, "_warn_about", late)
    code, out, _ = run_cli(["prepare", str(corpus), "--out", str(tmp_path / "p")], capsys)
    name = signal.Signals(signum).name
    assert code == 0 and out.rstrip().endswith(f"; {name} came once it was complete, and it "
                                               "is kept"), out
    PreparedCorpus.open(tmp_path / "p")
    monkeypatch.setattr(preparing, "commit_folder", late)
    code, _, err = run_cli(["prepare", str(corpus), "--out", str(tmp_path / "q")], capsys)
    assert (code, err) == (128 + signum, f"embedlab: terminated ({name}); the partial output is "
                                         "removed\n")
    assert not (tmp_path / "q").exists()
    assert signal.getsignal(signum) == signal.SIG_DFL


def test_ctrl_c_once_the_folder_is_complete_keeps_it_and_says_so(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C in the moment after the commit finds the folder complete: it is kept and said
    so (exit 0), since a re-run would be refused as --out already prepared; before the commit
    it leaves nothing (exit 130)."""
    from embedlab.data import preparing

    def late_ctrl_c(*args: object) -> None:  # runs after the folder is committed
        raise KeyboardInterrupt

    monkeypatch.setattr(preparing, "_warn_about", late_ctrl_c)
    code, out, _ = run_cli(["prepare", str(corpus), "--out", str(tmp_path / "p")], capsys)
    assert code == 0 and out.startswith(f"prepared {tmp_path / 'p'}: ")
    assert out.rstrip().endswith("; Ctrl-C came once it was complete, and it is kept")
    PreparedCorpus.open(tmp_path / "p")

    def early_ctrl_c(tmp: Path, out: Path) -> None:  # before the commit: nothing is left
        raise KeyboardInterrupt

    monkeypatch.setattr(preparing, "commit_folder", early_ctrl_c)
    code, _, err = run_cli(["prepare", str(corpus), "--out", str(tmp_path / "q")], capsys)
    assert (code, err) == (130, "embedlab: interrupted (SIGINT); nothing half-written is left\n")
    assert not (tmp_path / "q").exists()
    # --force over a complete folder, stopped before its commit: the old folder is not "new"
    code, _, err = run_cli(["prepare", str(corpus), "--out", str(tmp_path / "p"), "--force"],
                           capsys)
    assert code == 130 and "interrupted" in err


def test_counting_again_with_pruning_is_said_where_progress_is_shown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The reading bar starts over at 0 % for the pruned passes: a note says why."""
    corpus = tmp_path / "many.txt"
    corpus.write_text("".join(" ".join(f"w{(i * 7 + j) % 300}" for j in range(10)) + "\n"
                              for i in range(200)))
    code, _, err = run_cli(["prepare", str(corpus), "--out", str(tmp_path / "p"),
                            "--max-distinct", "100", "--min-count", "1"], capsys)
    assert code == 0, err
    assert "embedlab: note: the corpus holds more than 100 distinct words (--max-distinct): " \
           "reading it again, counting with word2vec's pruning" in err
    code, _, err = run_cli(["prepare", str(corpus), "--out", str(tmp_path / "q"),
                            "--max-distinct", "100", "--min-count", "1", "--no-progress"],
                           capsys)
    assert code == 0 and "reading it again" not in err
