"""The native reader gives the Python reader's prepared folders, byte for byte, on any number of
threads."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.data import corpus, native_tokenise
from embedlab.data.preparing import prepare
from embedlab.errors import InputError

pytestmark = [pytest.mark.skipif(native_tokenise.library() is None, reason="no C compiler"),
              pytest.mark.usefixtures("cli_messages")]  # messages as the commands give them


@pytest.fixture(autouse=True)
def native_for_small_corpora(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_tokenise, "MIN_BYTES", 0)


def folder_bytes(folder: Path) -> dict[str, bytes]:
    """The folder's files; meta.json without its creation time."""
    files = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
    meta = json.loads(files.pop("meta.json"))
    meta.pop("created")
    files["meta.json"] = json.dumps(meta, sort_keys=True).encode()
    return files


def prepared_by(source: Path, out: Path, workers: int | None, **options: object) -> object:
    """The folder's bytes, or the error's message; ``workers=None``: the Python reader."""
    try:
        if workers is None:
            with mock.patch.object(native_tokenise, "library", lambda: None):
                prepare(source, out, progress=False, **options)  # type: ignore[arg-type]
        else:
            prepare(source, out, progress=False, workers=workers,
                    **options)  # type: ignore[arg-type]
    except InputError as exc:
        return str(exc)
    return folder_bytes(out)


# pieces of text that exercise the tokeniser: Unicode whitespace (non-breaking, ideographic,
# line separator, NEL), CRLF, upper case with special lowercasing (final sigma, dotted I),
# invalid UTF-8 (lone continuation, truncated sequences, surrogates, overlongs), a BOM
_PARTS = [b"a", b"B", b"cat", b"Dog", b" ", b"  ", b"\t", b"\n", b"\n\n", b"\r\n", b"\x0b",
          b"\x1c", "\u00a0".encode(), "\u3000".encode(), "\u2028".encode(), "\x85".encode(),
          "\u200b".encode(), "ΟΔΟΣ".encode(), "Σ".encode(), "İ".encode(), "é".encode(),
          "É".encode(), "語".encode(), "\ufeff".encode(), b"\x80", b"\xe2\x82", b"\xed\xa0\x80",
          b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xf0\x9f\x98", b"\xff", b"UNK", b"x" * 40]


@st.composite
def corpus_bytes(draw: st.DrawFn) -> bytes:
    head = draw(st.sampled_from([b"", b"\xef\xbb\xbf", b"\xef\xbb"]))
    return head + b"".join(draw(st.lists(st.sampled_from(_PARTS), max_size=60)))


@settings(max_examples=120, deadline=None)
@given(files=st.lists(corpus_bytes(), min_size=1, max_size=3),
       compress=st.sampled_from(["", ".gz", ".bz2", ".xz"]), lowercase=st.booleans(),
       min_count=st.integers(1, 2), unk=st.sampled_from([None, "UNK"]),
       piece=st.sampled_from([4, 9, 64, 1 << 20]),
       max_distinct=st.sampled_from([10_000_000, 1, 2, 3, 6]))
def test_native_folders_equal_the_python_readers(files: list[bytes], compress: str,
                                                 lowercase: bool, min_count: int,
                                                 unk: str | None, piece: int,
                                                 max_distinct: int) -> None:
    """Also with pruning (small --max-distinct): the native reader counts in corpus order."""
    opener = {"": open, ".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}[compress]
    options = {"lowercase": lowercase, "min_count": min_count, "unk": unk,
               "max_distinct": max_distinct}
    with tempfile.TemporaryDirectory() as d:
        source = Path(d) / "corpus"
        source.mkdir()
        for i, data in enumerate(files):
            with opener(source / f"f{i}.txt{compress}", "wb") as f:  # type: ignore[operator]
                f.write(data)
        # small pieces: tokens, lines and UTF-8 sequences meet piece boundaries everywhere
        with mock.patch.object(corpus, "PIECE_BYTES", piece), \
                mock.patch.object(native_tokenise, "PIECE_BYTES", piece):
            expect = prepared_by(source, Path(d) / "py", None, **options)
            for workers in (1, 2, 3):
                got = prepared_by(source, Path(d) / f"n{workers}", workers, **options)
                assert got == expect, workers


def test_the_invalid_utf8_warning_names_the_same_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "corpus"
    source.mkdir()
    for name, bad in (("a.txt", 2), ("b.txt", 0), ("c.txt.gz", 1)):
        data = b"good \xff word " * bad + b"good words\n" * 50
        (source / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    said = []
    for workers in (None, 2):
        prepared_by(source, tmp_path / f"out{workers}", workers, min_count=1)
        said.append(capsys.readouterr().err)
    assert said[0] == said[1] == (
        f"embedlab: warning: replaced 3 invalid UTF-8 sequences in {source} (in a.txt: 2, "
        "c.txt.gz: 1) with U+FFFD (words that differ only there became one word); re-encode the "
        "corpus as UTF-8 if that is wrong\n")


@pytest.mark.parametrize("piece", [3, 1 << 20])
def test_a_long_line_and_a_long_token(tmp_path: Path, piece: int) -> None:
    source = tmp_path / "c.txt"
    source.write_bytes(b"Ab " * 5000 + b"z" * 3000 + b" \xce\xa3\n" + b"q\r\n" * 10)
    with mock.patch.object(native_tokenise, "PIECE_BYTES", piece):
        expect = prepared_by(source, tmp_path / "py", None, lowercase=True, min_count=1)
        for workers in (1, 2, 3):
            assert prepared_by(source, tmp_path / f"n{workers}", workers, lowercase=True,
                               min_count=1) == expect


def test_a_token_too_long_is_left_to_the_python_reader(tmp_path: Path) -> None:
    source = tmp_path / "c.txt"
    source.write_bytes(b"a b " + b"x" * 2000 + b" c\n")
    with mock.patch.object(corpus, "MAX_TOKEN_CHARS", 1000), \
            mock.patch.object(corpus, "PIECE_BYTES", 100):
        message = prepared_by(source, tmp_path / "n", 2, min_count=1)
        assert prepared_by(source, tmp_path / "py", None, min_count=1) == message
    assert isinstance(message, str) and "longer than 1,000 characters" in message


def test_binary_files_are_refused_alike(tmp_path: Path) -> None:
    source = tmp_path / "c.txt"
    source.write_bytes(b"\x00\x01" * 100)
    expect = prepared_by(source, tmp_path / "py", None, min_count=1)
    assert isinstance(expect, str) and "looks binary" in expect
    assert prepared_by(source, tmp_path / "n", 2, min_count=1) == expect


@pytest.mark.parametrize("max_distinct", [1, 3, 50])
def test_pruning_does_not_depend_on_the_workers(tmp_path: Path, max_distinct: int) -> None:
    source = tmp_path / "c.txt"
    words = [f"w{i % 37}" for i in range(0, 4000, 7)] + [f"r{i}" for i in range(60)]
    source.write_text("\n".join(" ".join(words[i:i + 11]) for i in range(0, len(words), 11)),
                      encoding="utf-8")
    expect = prepared_by(source, tmp_path / "py", None, min_count=1, max_distinct=max_distinct)
    for workers in (1, 2, 3):
        assert prepared_by(source, tmp_path / f"n{workers}", workers, min_count=1,
                           max_distinct=max_distinct) == expect


@pytest.mark.parametrize("options", [
    {"max_distinct": 40, "lowercase": True, "min_count": 2},
    {"max_distinct": 300, "unk": "UNK", "min_count": 1, "max_vocab": 50},
    {"max_distinct": 10_000_000, "lowercase": True, "unk": "UNK", "min_count": 2}])
def test_many_pieces_with_pruning(tmp_path: Path, options: dict[str, object]) -> None:
    """A Zipf-like corpus over hundreds of pieces, pruned many times while they are counted."""
    import random

    rng = random.Random(5)
    stems = ["Ab", "é", "ΣΟΦΙΑ", "İs", "Straße", "q", "\u00a0x", "Ω\x80"]
    words = [f"{stems[k % len(stems)]}{k}" for k in range(900)]
    tokens = rng.choices(words, weights=[1 / (k + 1) for k in range(900)], k=12_000)
    lines = (" ".join(tokens[i:i + rng.randint(1, 30)]) for i in range(0, len(tokens), 20))
    source = tmp_path / "c.txt"
    source.write_text("\n".join(lines), encoding="utf-8", errors="surrogateescape")
    with mock.patch.object(native_tokenise, "PIECE_BYTES", 256):
        expect = prepared_by(source, tmp_path / "py", None, **options)
        assert isinstance(expect, dict)
        pruned = json.loads(expect["meta.json"])["pruned"]
        assert (pruned is None) == (options["max_distinct"] == 10_000_000)
        for workers in (1, 2, 3):
            assert prepared_by(source, tmp_path / f"n{workers}", workers, **options) == expect


def test_a_large_vocabulary_is_sorted_alike(tmp_path: Path) -> None:
    """Over 65,536 words are sorted on two threads and merged; ties by count are broken by the
    words' bytes, also beyond their first 8 (words sharing a long prefix, one a prefix of
    another)."""
    words = [f"{'sharedprefix' if k % 2 else 'x'}{k % 7}é{k}" for k in range(70_000)]
    tokens = [w for k, w in enumerate(words) for _ in range(1 + k % 3)] + ["sharedprefix"] * 2
    source = tmp_path / "c.txt"
    source.write_text("\n".join(" ".join(tokens[i:i + 25]) for i in range(0, len(tokens), 25)),
                      encoding="utf-8")
    expect = prepared_by(source, tmp_path / "py", None, min_count=1)
    assert isinstance(expect, dict)
    for workers in (1, 2):
        assert prepared_by(source, tmp_path / f"n{workers}", workers, min_count=1) == expect


def test_the_whitespace_is_pythons() -> None:
    # tk_wide_space in _tokenise.c lists str.isspace()'s code points beyond ASCII
    wide = [c for c in range(0x80, 0x110000) if chr(c).isspace()]
    assert wide == [0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F,
                    0x205F, 0x3000]


def test_small_corpora_are_read_by_the_python_reader(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_tokenise, "MIN_BYTES", 100)
    (tmp_path / "a.txt").write_bytes(b"x " * 40)
    (tmp_path / "b.txt").write_bytes(b"y " * 10)
    assert not native_tokenise.usable([tmp_path / "a.txt"])
    assert native_tokenise.usable([tmp_path / "a.txt", tmp_path / "b.txt"])


def test_default_workers_follow_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(native_tokenise.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setenv("EMBEDLAB_PREPARE_WORKERS", "3")
    assert native_tokenise.default_workers() == 3 and capsys.readouterr().err == ""
    monkeypatch.setenv("EMBEDLAB_PREPARE_WORKERS", "")
    assert native_tokenise.default_workers() == 4  # unset or empty: every core
    # more than the cores: said once, as train says it of --threads
    monkeypatch.setenv("EMBEDLAB_PREPARE_WORKERS", "8")
    assert native_tokenise.default_workers() == 8 == native_tokenise.default_workers()
    assert capsys.readouterr().err == (
        "embedlab: warning: EMBEDLAB_PREPARE_WORKERS=8 is more than the 4 cores this process "
        "may use: the extra threads add no speed, and each holds its own pieces and word table; "
        "set it to 4 or less, or unset it\n")


@pytest.mark.parametrize("value", ["x", "0", "-1", "2.5", "²"])
def test_a_bad_worker_count_is_one_line_naming_the_fix(
        value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from embedlab.cli import main

    (tmp_path / "c.txt").write_text("a b c a b\n" * 20)
    monkeypatch.setenv("EMBEDLAB_PREPARE_WORKERS", value)
    with pytest.raises(SystemExit) as exit_info:
        main(["prepare", str(tmp_path / "c.txt"), "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == (
        f"embedlab: error: EMBEDLAB_PREPARE_WORKERS must be a number of threads >= 1, got "
        f"{value!r}; set it to e.g. 2, or unset it for every core")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", [2.5, "2", True, 0])
def test_prepare_refuses_a_worker_count_that_is_no_whole_number(value: object,
                                                                 tmp_path: Path) -> None:
    """A whole number of threads, or one line saying so, whatever the corpus's size."""
    (tmp_path / "c.txt").write_text("a b c a b\n" * 20)
    with pytest.raises(InputError, match=r"^workers must be (a whole number )?>= 1, got "):
        prepare(tmp_path / "c.txt", tmp_path / "out", workers=value)  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


_SIGTERM_CHILD = """
import os, signal, sys
from embedlab.data import corpus, native_tokenise, native_words
from embedlab.data.preparing import prepare_into
native_tokenise.MIN_BYTES = 0
native_tokenise.PIECE_BYTES = corpus.PIECE_BYTES = 64
fold, calls = native_words._fold, []

def fold_then_stop(*args, **kwargs):  # the threads are tokenising the next pieces
    calls.append(1)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGTERM)
    return fold(*args, **kwargs)

native_words._fold = fold_then_stop
prepare_into(sys.argv[1], sys.argv[2], min_count=1, progress=False, workers=2)
"""


def test_sigterm_while_threads_tokenise_leaves_nothing(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    source = tmp_path / "c.txt"
    source.write_text("the cat sat on the mat\n" * 400, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", _SIGTERM_CHILD, str(source),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]



def test_no_work_runs_once_in_order_is_stopped_even_through_a_second_interrupt(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The work folds words into C tables the caller frees once the generator ends: a Ctrl-C
    that cut the wait for the running work short let them be freed under it (a segmentation
    fault, or a thread spinning in freed memory)."""
    import threading
    import time
    from contextlib import closing

    from embedlab.data.native_tokenise import in_order

    finished: list[int] = []

    def work(piece: int) -> int:
        time.sleep(0.3)
        finished.append(piece)
        return piece

    real_join = threading.Thread.join

    def interrupted_join(self: threading.Thread, timeout: float | None = None) -> None:
        if self.name.startswith("tokenise"):  # the executor's own wait: cut short
            monkeypatch.setattr(threading.Thread, "join", real_join)
            raise KeyboardInterrupt
        real_join(self, timeout)

    with pytest.raises(KeyboardInterrupt), \
            closing(in_order(iter(range(8)), work, 2)) as results:
        for _ in results:  # piece 0 is done; pieces 1 and 2 were started
            monkeypatch.setattr(threading.Thread, "join", interrupted_join)
            raise KeyboardInterrupt  # the user's Ctrl-C
    ended = list(finished)  # as the caller frees the tables
    assert 2 in ended, ended


def test_a_ctrl_c_inside_the_submission_waits_for_the_work_it_queued(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C inside ThreadPoolExecutor.submit must not leave work queued that in_order does
    not wait for: the caller would free the tables under it (a segmentation fault)."""
    import signal
    import time
    from concurrent.futures import ThreadPoolExecutor
    from contextlib import closing

    from embedlab.data.native_tokenise import in_order

    finished: list[int] = []

    def work(piece: int) -> int:
        time.sleep(0.2)
        finished.append(piece)
        return piece

    real_submit = ThreadPoolExecutor.submit

    def submit_then_ctrl_c(self: ThreadPoolExecutor, fn: Any, /, *args: Any) -> Any:
        future = real_submit(self, fn, *args)
        if args == (1,):
            signal.raise_signal(signal.SIGINT)  # handled before submit returns
        return future

    import threading

    real_join = threading.Thread.join

    def interrupted_join(self: threading.Thread, timeout: float | None = None) -> None:
        if self.name.startswith("tokenise"):  # a second Ctrl-C cuts the executor's wait short
            monkeypatch.setattr(threading.Thread, "join", real_join)
            raise KeyboardInterrupt
        real_join(self, timeout)

    monkeypatch.setattr(ThreadPoolExecutor, "submit", submit_then_ctrl_c)
    monkeypatch.setattr(threading.Thread, "join", interrupted_join)
    with pytest.raises(KeyboardInterrupt), \
            closing(in_order(iter(range(8)), work, 2)) as results:
        list(results)
    assert 1 in finished, finished  # done before the generator let its caller go on
    time.sleep(0.5)  # the threads end before the next test
