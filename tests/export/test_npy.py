from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from embedlab.errors import InputError
from embedlab.export.npy import read_npy, vocab_path_for, write_npy

from .test_word2vec import WORD


@settings(max_examples=40, deadline=None)
@given(words=st.lists(WORD, min_size=1, max_size=8, unique=True), with_counts=st.booleans(),
       data=st.data())
def test_round_trip_is_exact(words: list[str], with_counts: bool, data: st.DataObject) -> None:
    matrix = data.draw(arrays(np.float32, (len(words), 3),
                              elements=st.floats(width=32, allow_nan=False,
                                                        allow_infinity=False)))
    counts = np.arange(len(words), 0, -1, dtype=np.int64) * 7 if with_counts else None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vectors.npy"
        written = write_npy(path, words, matrix, counts)
        assert written == (path, Path(tmp) / "vectors.vocab.tsv")
        got_words, got, got_counts = read_npy(path)
    assert got_words == words
    assert np.array_equal(got.view(np.int32), matrix.view(np.int32))
    if counts is None:
        assert got_counts is None
    else:
        assert got_counts is not None and np.array_equal(got_counts, counts)


def test_vocab_beside_and_no_pickle(tmp_path: Path) -> None:
    path = tmp_path / "v.npy"
    write_npy(path, ["a", "b"], np.zeros((2, 2), np.float32))
    assert vocab_path_for(path).read_text() == "a\nb\n"
    np.save(path, np.array([{"evil": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match=r"not a readable \.npy matrix \(.*\); re-export it "
                                         r"with 'embedlab export --format npy'"):
        read_npy(path)


def test_errors(tmp_path: Path) -> None:
    m = np.zeros((2, 2), np.float32)
    with pytest.raises(InputError, match=r"must end in \.npy for --format npy; "
                                         r"e\.g\. --out vectors\.npy"):
        write_npy(tmp_path / "v.bin", ["a", "b"], m)
    assert list(tmp_path.iterdir()) == []
    path = tmp_path / "v.npy"
    write_npy(path, ["a", "b"], m)
    with pytest.raises(InputError, match="already exists; pass --force to overwrite it"):
        write_npy(path, ["a", "b"], m)
    vocab_path_for(path).write_text("a\n")
    with pytest.raises(InputError, match=r"lists 1 words but .* has 2 rows; re-export both "
                                         r"files together"):
        read_npy(path)
    vocab_path_for(path).unlink()
    with pytest.raises(InputError, match=r"no vocabulary beside .*; expected v\.vocab\.tsv "
                                         r"\(written by 'embedlab export --format npy'\)"):
        read_npy(path)


def test_unwritable_folder_is_one_input_error(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied")  # mkstemp in a read-only folder

    monkeypatch.setattr("embedlab.fsutil.tempfile.mkstemp", denied)
    with pytest.raises(InputError, match=r"cannot write .*\(Permission denied\); pass --out in "
                                         "a writable folder"):
        write_npy(tmp_path / "v.npy", ["a"], np.zeros((1, 2), np.float32))
    assert list(tmp_path.iterdir()) == []


def test_failed_matrix_keeps_the_old_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "v.npy"
    write_npy(path, ["a", "b"], np.zeros((2, 2), np.float32))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("embedlab.export.npy._save", disk_full)
    with pytest.raises(InputError, match=r"No space left on device\); free disk space"):
        write_npy(path, ["c"], np.ones((1, 2), np.float32), force=True)
    # neither file was replaced: a new vocabulary beside the old matrix would not load
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_matrix_past_the_file_size_limit_is_named_so(tmp_path: Path) -> None:
    """A real EFBIG (ulimit -f) names its cause; np.save's tofile reports "N requested and M
    written" with no errno."""
    import resource

    path = tmp_path / "v.npy"
    write_npy(path, ["a", "b"], np.zeros((2, 2), np.float32))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))  # writes past 100 kB: EFBIG
    try:
        with pytest.raises(InputError, match=r"\(File too large\); raise the file size limit"):
            write_npy(path, [f"w{i}" for i in range(1000)], np.ones((1000, 100), np.float32),
                      force=True)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_the_bytes_are_np_saves(tmp_path: Path) -> None:
    matrix = np.random.default_rng(1).standard_normal((7, 3)).astype(np.float32)
    write_npy(tmp_path / "v.npy", [f"w{i}" for i in range(7)], matrix)
    np.save(tmp_path / "np.npy", matrix, allow_pickle=False)
    assert (tmp_path / "v.npy").read_bytes() == (tmp_path / "np.npy").read_bytes()


def test_an_upper_case_suffix_is_npy(tmp_path: Path) -> None:
    path = tmp_path / "V.NPY"
    assert write_npy(path, ["a", "b"], np.eye(2, dtype=np.float32)) == (
        path, tmp_path / "V.vocab.tsv")
    assert read_npy(path)[0] == ["a", "b"]


def test_file_mode_follows_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        written = write_npy(tmp_path / "v.npy", ["a"], np.zeros((1, 2), np.float32))
    finally:
        os.umask(old)
    assert [stat.S_IMODE(p.stat().st_mode) for p in written] == [0o644, 0o644]


def test_a_text_file_named_npy_is_not_taken_for_a_pickle(tmp_path: Path) -> None:
    # np.load called it "pickled (object) data" and suggested allow_pickle=
    path = tmp_path / "v.npy"
    path.write_text("1 2\na 1 2\n")
    vocab_path_for(path).write_text("a\n")
    with pytest.raises(InputError) as e:
        read_npy(path)
    assert str(e.value) == (f"{path} is not a .npy array file (it does not start with numpy's "
                            "magic bytes); pass a .npy written by 'embedlab export --format npy', "
                            "or give a word2vec file a .txt or .bin name")
    assert "pickle" not in str(e.value)


@pytest.mark.parametrize(("vocab", "problem"), [
    # 2**63 does not fit int64: numpy raised OverflowError
    ("a\t1\nb\t9223372036854775808\n",
     "line 2: count 9223372036854775808 is too large (the most is 9223372036854775807); fix the "
     "count or regenerate the vocabulary file"),
    ("a\t1\nb\t99999999999999999999999\n", "line 2: count 99999999999999999999999 is too large"),
    # over 4,300 digits: int() itself refused it with a ValueError
    ("a\t1\nb\t" + "9" * 5000 + "\n", "line 2: count " + "9" * 30 + "... is too large"),
    ("a\t-1\nb\t1\n", "line 1: count '-1' is not a non-negative integer; expected "
                      "'word<TAB>count'"),
    ("a\t1\nb\t1\t2\n", "line 2: count '1\\t2' is not a non-negative integer"),
    ("a\t1\na\t1\n", "line 2: word 'a' is listed twice (first on line 1); regenerate the "
                     "vocabulary file"),
    ("a\nb c\n", "line 2: word 'b c' contains whitespace; regenerate the vocabulary file"),
    ("a\n\nb\n", "line 2 has no word; regenerate the vocabulary file"),
    # counts on some lines only were dropped for all, silently
    ("a\t5\nb\n", "line 2 has no count, but line 1 has one; give every word its count"),
])
def test_bad_vocabulary_is_one_input_error(tmp_path: Path, vocab: str, problem: str) -> None:
    path = tmp_path / "v.npy"
    np.save(path, np.zeros((2, 2), np.float32))
    vocab_path_for(path).write_text(vocab)
    with pytest.raises(InputError) as e:
        read_npy(path)
    assert str(e.value).startswith(f"{vocab_path_for(path)} {problem}")


def test_windows_line_ends_are_read(tmp_path: Path) -> None:
    # "count '5\r' is not a non-negative integer" for a file saved on Windows
    path = tmp_path / "v.npy"
    np.save(path, np.zeros((2, 2), np.float32))
    vocab_path_for(path).write_bytes(b"a\t5\r\nb\t3\r\n")
    words, _, counts = read_npy(path)
    assert words == ["a", "b"] and counts is not None and counts.tolist() == [5, 3]


def test_largest_int64_count_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "v.npy"
    np.save(path, np.zeros((1, 2), np.float32))
    vocab_path_for(path).write_text("a\t9223372036854775807\n")
    counts = read_npy(path)[2]
    assert counts is not None and counts.tolist() == [2**63 - 1]


def test_non_finite_matrix_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v.npy"
    write_npy(path, ["a", "b"], np.array([[1, 2], [3, np.nan]], np.float32))
    with pytest.raises(InputError) as e:
        read_npy(path)
    assert str(e.value) == (f"{path} row 2: the vector of 'b' holds nan, not a finite float32 "
                            "number; fix or remove that row, or re-export the vectors")


def test_force_never_replaces_a_fifo_beside_the_matrix(tmp_path: Path) -> None:
    path = tmp_path / "v.npy"
    os.mkfifo(vocab_path_for(path))
    with pytest.raises(InputError) as e:
        write_npy(path, ["a"], np.zeros((1, 2), np.float32), force=True)
    assert str(e.value) == (f"{vocab_path_for(path)} is not a regular file (it is a FIFO); move "
                            f"it away (the vocabulary of --out {path} is written there), or pass "
                            "another --out name")
    assert stat.S_ISFIFO(os.lstat(vocab_path_for(path)).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["v.vocab.tsv"]


def test_a_byte_order_mark_before_the_first_word_is_said(tmp_path: Path) -> None:
    """A vocabulary saved by an editor as "UTF-8 with BOM": its first word became '\\ufeffand',
    which a "did you mean" printed looking like 'and'."""
    import embedlab

    path = tmp_path / "v.npy"
    write_npy(path, ["and", "the"], np.zeros((2, 2), np.float32))
    vocab = vocab_path_for(path)
    vocab.write_bytes(b"\xef\xbb\xbf" + vocab.read_bytes())
    with pytest.warns(embedlab.EmbedlabWarning, match=r"v\.vocab\.tsv starts with a UTF-8 "
                      r"byte-order mark \(U\+FEFF\), read as part of its first word "
                      r"'\\ufeffand'; if an editor added it, save the file as UTF-8 without"):
        vectors = embedlab.load(path)
    assert list(vectors.words) == ["\ufeffand", "the"]
