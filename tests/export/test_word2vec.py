from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path

import numpy as np
import pytest
from gensim.models import KeyedVectors
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from embedlab.errors import InputError
from embedlab.export.word2vec import read_word2vec, write_word2vec

# Words: any non-empty unicode text without whitespace (and no lone surrogates: not UTF-8).
WORD = st.text(st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")), min_size=1,
               max_size=12).filter(lambda w: not any(c.isspace() for c in w))


@st.composite
def vocab_and_matrix(draw: st.DrawFn) -> tuple[list[str], np.ndarray]:
    words = draw(st.lists(WORD, min_size=1, max_size=8, unique=True))
    dim = draw(st.integers(1, 6))
    floats = st.floats(width=32, allow_nan=False, allow_infinity=False)  # non-finite: refused
    matrix = draw(arrays(np.float32, (len(words), dim), elements=floats))
    return words, matrix


@settings(max_examples=60, deadline=None)
@given(data=vocab_and_matrix(), binary=st.booleans())
def test_round_trip_is_exact(data: tuple[list[str], np.ndarray], binary: bool) -> None:
    words, matrix = data
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "v.bin"
        write_word2vec(path, words, matrix, binary=binary)
        got_words, got = read_word2vec(path)
    assert got_words == words
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.int32), matrix.view(np.int32))  # bit-exact, -0.0 too


@pytest.mark.parametrize("binary", [False, True])
def test_gensim_loads_our_files(tmp_path: Path, binary: bool) -> None:
    rng = np.random.default_rng(0)
    words = ["the", "König", "naïve", "東京", "a_b", "x" * 40]
    m = rng.standard_normal((len(words), 7)).astype(np.float32)
    path = tmp_path / ("v.bin" if binary else "v.txt")
    write_word2vec(path, words, m, binary=binary)
    kv = KeyedVectors.load_word2vec_format(str(path), binary=binary)
    assert kv.index_to_key == words
    assert np.array_equal(kv.vectors, m)


@pytest.mark.parametrize("binary", [False, True])
def test_we_load_gensim_files(tmp_path: Path, binary: bool) -> None:
    rng = np.random.default_rng(1)
    words = ["b", "ä", "c", "d"]
    m = rng.standard_normal((4, 5)).astype(np.float32)
    kv = KeyedVectors(5)
    kv.add_vectors(words, m)
    path = tmp_path / "g.w2v"
    kv.save_word2vec_format(str(path), binary=binary)  # gensim's binary has no newlines
    got_words, got = read_word2vec(path)
    assert got_words == words and np.array_equal(got, m)


def test_word2vec_c_text_with_trailing_spaces_and_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("3 2\nthe 0.5 -1 \nof 1e-3 2.0 \nthe 9 9 \n", encoding="utf-8")
    words, m = read_word2vec(path)  # duplicates: first vector wins, as in gensim
    assert words == ["the", "of"]
    assert m.tolist() == [[0.5, -1.0], [np.float32(1e-3), 2.0]]


@pytest.mark.parametrize("content, problem", [
    (b"hello world\n", "first line"),
    (b"", "first line"),
    (b"2 1\nabcdef 1\n", "ends early"),
    (b"1 3\na 1 2\n", "header says 1 words × 3 dims but the file has only 10 bytes"),
    (b"1 3\nabcdefgh 1 2\n", "line 2: word 'abcdefgh' has 2 values, expected 3"),
    (b"1 2\na 1 x\n", "line 2: word 'a' has a non-number value 'x'"),
    (b"1 1\n\xff\xfe 1\n", "header says 1 words × 1 dims but the file has only 9 bytes"),
    (b"1 1\n\xff\xfe\xfd\xfc 1\n", "binary record 1 of 1 is truncated"),
    (b"0 5\n", "0 words"),
])
def test_not_word2vec_is_an_input_error(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(InputError, match="not a word2vec file") as err:
        read_word2vec(path)
    assert problem in str(err.value)
    assert str(err.value).endswith("; pass a word2vec text/binary file, a .npy export, a run "
                                   "folder or a checkpoint folder")


def test_refuses_to_overwrite_and_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "v.txt"
    path.write_text("precious")
    m = np.ones((1, 2), np.float32)
    with pytest.raises(InputError, match="already exists; pass --force to overwrite it or "
                                         "choose another --out"):
        write_word2vec(path, ["a"], m)
    assert path.read_text() == "precious"
    write_word2vec(path, ["a"], m, force=True)
    assert read_word2vec(path)[0] == ["a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.txt"]  # no temporary leftovers


def test_bad_words_fail_before_anything_is_written(tmp_path: Path) -> None:
    path = tmp_path / "v.txt"
    path.write_text("precious")
    with pytest.raises(InputError, match=r"'not ok' is empty or contains whitespace, .*; "
                                         r"rename it in the vocabulary"):
        write_word2vec(path, ["ok", "not ok"], np.ones((2, 2), np.float32), force=True)
    assert path.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.txt"]


def test_missing_folder(tmp_path: Path) -> None:
    folder = tmp_path / "no"
    with pytest.raises(InputError, match=re.escape(f"folder {folder} does not exist; create it "
                                                   f"first (mkdir -p {folder})")):
        write_word2vec(folder / "v.txt", ["a"], np.ones((1, 1), np.float32))
    assert list(tmp_path.iterdir()) == []


def _permission_denied(*args: object, **kwargs: object) -> tuple[int, str]:
    # what mkstemp raises in a read-only folder (we run as root, where chmod would not bite)
    raise PermissionError(13, "Permission denied")


@pytest.mark.parametrize("binary", [False, True])
def test_unwritable_folder_is_one_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              binary: bool) -> None:
    path = tmp_path / "v.txt"
    path.write_text("precious")
    monkeypatch.setattr("embedlab.fsutil.tempfile.mkstemp", _permission_denied)
    with pytest.raises(InputError, match=r"cannot write .*v\.txt \(Permission denied\); "
                                         r"pass --out in a writable folder"):
        write_word2vec(path, ["a"], np.ones((1, 2), np.float32), binary=binary, force=True)
    assert path.read_text() == "precious"


def test_parent_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("precious")
    with pytest.raises(InputError, match=r"f is a file, not a folder\); pass --out in a folder"):
        write_word2vec(tmp_path / "f" / "v.txt", ["a"], np.ones((1, 1), np.float32))
    assert (tmp_path / "f").read_text() == "precious"


@pytest.mark.parametrize("binary", [False, True])
def test_npy_suffix_is_refused(tmp_path: Path, binary: bool) -> None:
    # vectors.load reads any .npy name as an npy export: the file could not be loaded back
    with pytest.raises(InputError, match=r"ends in \.npy.*pass --format npy"):
        write_word2vec(tmp_path / "v.npy", ["a"], np.ones((1, 1), np.float32), binary=binary)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("binary", [False, True])
def test_file_mode_follows_the_umask(tmp_path: Path, binary: bool) -> None:
    old = os.umask(0o022)
    try:
        path = write_word2vec(tmp_path / "v.txt", ["a"], np.ones((1, 1), np.float32),
                              binary=binary)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's 0600


@pytest.mark.parametrize("binary", [False, True])
def test_force_never_replaces_a_fifo(tmp_path: Path, binary: bool) -> None:
    # `export --out /dev/null --force` turned the device into a regular file (not tried on the
    # real /dev/null: the tests run as root)
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as e:
        write_word2vec(fifo, ["a"], np.ones((1, 2), np.float32), binary=binary, force=True)
    assert str(e.value) == (f"{fifo} is not a regular file (it is a FIFO); move it away or "
                            "pick another --out file path")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["fifo.txt"]


def test_force_writes_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    m = np.ones((1, 2), np.float32)
    with pytest.raises(InputError, match="already exists; pass --force"):
        write_word2vec(link, ["a"], m)
    write_word2vec(link, ["a"], m, force=True)
    assert link.is_symlink() and read_word2vec(target)[0] == ["a"]
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to(tmp_path / "gone.txt")
    with pytest.raises(InputError, match=r"dangling\.txt is a symbolic link to .*gone\.txt, "
                                         "which does not exist; move it away or pick another "
                                         "--out file path"):
        write_word2vec(dangling, ["a"], m, force=True)
    assert dangling.is_symlink() and not (tmp_path / "gone.txt").exists()



def _read_error(path: Path, content: bytes) -> str:
    """The one-line message read_word2vec gives for a file holding ``content``."""
    path.write_bytes(content)
    with pytest.raises(InputError) as e:
        read_word2vec(path)
    return str(e.value)

@pytest.mark.parametrize("content", [b"100000000000 3\na 1 2 3\n",
                                     b"100000000 300\na \x00\x00\x80?\n",
                                     b"3 100000000000\na 1 2 3\n"])
def test_a_huge_header_is_refused_before_allocating(tmp_path: Path, content: bytes) -> None:
    # the header's word count was trusted: np.empty(10^11 ...) -> "Unable to allocate 745. GiB"
    path = tmp_path / "huge.bin"
    n, dim = content.split(b"\n")[0].split()
    assert _read_error(path, content) == (
        f"{path} is not a word2vec file (header says {int(n)} words × {int(dim)} dims but the "
        f"file has only {len(content)} bytes); pass a word2vec text/binary file, a .npy export, "
        "a run folder or a checkpoint folder")


@pytest.mark.parametrize(("content", "where"), [
    ("2 3\na 1 2 3\nb 0x10 2 3\n", "line 3: word 'b' has a non-number value '0x10'"),
    ("2 3\na 0x10 2 3\nb 1 2 3\n", "line 2: word 'a' has a non-number value '0x10'"),
    ("2 3\na 1 2 3\n b 1 2 3\n", "line 3 starts with whitespace instead of a word"),
    ("2 3\n a 1 2 3\nb 1 2 3\n", "line 2 starts with whitespace instead of a word"),
    ("2 3\na 1 2\nb 1 2 3\n", "line 2: word 'a' has 2 values, expected 3"),
])
def test_a_bad_text_row_is_named(tmp_path: Path, content: str, where: str) -> None:
    # a malformed first row is named, not read as binary ("binary record 2 of 2 is truncated")
    path = tmp_path / "bad.txt"
    assert _read_error(path, content.encode()) == (
        f"{path} is not a word2vec file ({where}); pass a word2vec text/binary file, a .npy "
        "export, a run folder or a checkpoint folder")


@pytest.mark.parametrize(("content", "where", "value"), [
    (b"2 2\na 1 2\nb nan 1\n", "line 3: the vector of 'b'", "nan"),
    (b"2 2\na 1 -inf\nb 1 1\n", "line 2: the vector of 'a'", "-inf"),
    (b"1 2\na 1 1e39\n", "line 2: the vector of 'a'", "1e39"),  # beyond float32's range
    (b"2 1\na " + np.float32(1).tobytes() + b"\nb " + np.float32("nan").tobytes() + b"\n",
     "record 2: the vector of 'b'", "nan"),
])
def test_non_finite_values_are_refused(tmp_path: Path, content: bytes, where: str,
                                       value: str) -> None:
    # `neighbors nan.txt b` listed b itself at -inf, after a numpy RuntimeWarning
    path = tmp_path / "nan.txt"
    assert _read_error(path, content) == (
        f"{path} {where} holds {value}, not a finite float32 number; fix or remove that row, or "
        "re-export the vectors")


def test_duplicates_warning_is_one_prefixed_line(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "dup.txt"
    path.write_text("3 1\nthe 1\nof 2\nthe 3\n")
    assert read_word2vec(path)[0] == ["the", "of"]
    err = capsys.readouterr().err
    assert err == (f"embedlab: warning: {path}: 1 duplicate words; keeping the first vector of "
                   "each (as gensim does)\n")
