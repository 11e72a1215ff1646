from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gensim.models import KeyedVectors
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from embedlab.errors import InputError
from embedlab.export import word2vec
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
    (b"1 3\nabcdefgh 1 2\n", "line 2: word 'abcdefgh' has 2 values, expected 3"),
    (b"1 2\na 1 x\n", "line 2: word 'a' has a non-number value 'x'"),
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
    for word, flaw in [("not ok", "contains a space"), ("tab\tword", "contains a tab"),
                       ("", "is empty"), ("cr\rword", "contains a carriage return (\\r)"),
                       ("\x0cff", "starts with whitespace ('\\x0c')")]:
        with pytest.raises(InputError) as e:
            write_word2vec(path, ["ok", word], np.ones((2, 2), np.float32), force=True)
        assert str(e.value) == (f"word #1 {word!r} {flaw}, which the word2vec formats cannot "
                                "store; give it another name where the words come from")
    assert path.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.txt"]


@pytest.mark.parametrize("name, binary", [("v.txt", False), ("v.bin", True)])
def test_words_with_other_whitespace_round_trip_as_in_gensim(
        tmp_path: Path, name: str, binary: bool) -> None:
    """word2vec.c ends a word at a space, tab or newline only: a no-break space, U+2028, a form
    feed or a form's separator are part of a word in its files, in gensim's, and in embedlab's;
    only a vocab.tsv (.npy export) refuses them, naming the format that keeps them."""
    from gensim.models import KeyedVectors

    from embedlab.export.npy import write_npy

    words = ["new\xa0york", "x\u2028y", "a\x85b", "u\x1cv", "ideo\u3000graphic", "form\x0cfeed",
             "v\x0btab\x0c"]
    m = np.arange(14, dtype=np.float32).reshape(7, 2)
    path = write_word2vec(tmp_path / name, words, m, binary=binary)
    got, matrix = read_word2vec(path)
    assert list(got) == words and np.array_equal(matrix, m)
    assert KeyedVectors.load_word2vec_format(path, binary=binary).index_to_key == words
    with pytest.raises(InputError, match=r"^word #0 'new\\xa0york' contains whitespace "
                                         r"\('\\xa0'\), which a vocab.tsv cannot store; export "
                                         r"it as a word2vec file \(.txt or .bin\)"):
        write_npy(tmp_path / "v.npy", words, m)
    with pytest.raises(InputError, match=r"^word #0 '' is empty, which a vocab.tsv and the "
                                         r"word2vec formats cannot store; give it another name"):
        write_npy(tmp_path / "v.npy", ["", "b"], m[:2])  # no way out named that is none


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
                                     b"100000000 300\na \x00\x00\x80?\n"])
def test_a_huge_header_is_refused_before_allocating(tmp_path: Path, content: bytes) -> None:
    # the header's word count was trusted: np.empty(10^11 ...) -> "Unable to allocate 745. GiB"
    path = tmp_path / "huge.bin"
    n, dim = content.split(b"\n")[0].split()
    assert _read_error(path, content) == (
        f"{path} has {len(content):,} bytes, too few for the {int(n):,} words × {int(dim)} dims "
        "its header promises: the file is cut short, or the header's count is wrong; export the "
        "vectors again, or make the header's first number the count of rows")


@pytest.mark.parametrize("content", [
    b"3 2\na 1.5 2.5\nb 1.5 2.5\n",  # text
    b"3 1\nabcdefgh " + np.float32(1).tobytes() + b"\nijklmnop " + np.float32(2).tobytes(),
])
def test_a_file_cut_short_is_told_so(tmp_path: Path, content: bytes) -> None:
    """A word2vec file that ends before its header's count is named as cut short (with the
    header fix), not as something other than a word2vec file."""
    path = tmp_path / "cut.bin"
    assert _read_error(path, content) == (
        f"{path} ends after 2 of the 3 words its header promises: the file is cut short, or the "
        "header's count is wrong; export the vectors again, or make the header's first number 2")


def test_a_file_cut_in_the_middle_is_told_so(tmp_path: Path) -> None:
    """A download or copy cut short ends inside a record or a row: named as cut short (with
    the header's fix) wherever the cut falls, not as a malformed row."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(100)]
    whole = tmp_path / "whole"
    write_word2vec(whole.with_suffix(".txt"), words, rng.standard_normal((100, 10)))
    write_word2vec(whole.with_suffix(".bin"), words, rng.standard_normal((100, 10)))
    for suffix in (".txt", ".bin"):
        data = whole.with_suffix(suffix).read_bytes()
        last_word = data.rindex(b"w99 ") + 4  # inside the last row or record
        for cut in (len(data) // 2, last_word + 3):
            path = tmp_path / f"cut{cut}{suffix}"
            message = _read_error(path, data[:cut])
            assert "the file is cut short, or the header's count is wrong; export the vectors " \
                   "again" in message, message


@pytest.mark.parametrize("content", [
    b"2 2\na 1 2\nb 3 4\nc 5 6\n",
    b"2 1\n" + b"".join(w + b" " + np.float32(v).tobytes() + b"\n"
                        for w, v in ((b"a", 1), (b"b", 3), (b"c", 5))),  # binary
])
def test_rows_beyond_the_header_are_read_as_gensim_reads_them_with_a_warning(
        tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "more.bin"
    path.write_bytes(content)
    words, matrix = read_word2vec(path)
    assert capsys.readouterr().err == (
        f"embedlab: warning: {path}: the file goes on after the 2 words its header says; read "
        "those 2 (make the header's first number the count of rows to read them all)\n")
    assert words == ["a", "b"]
    assert matrix[:, 0].tolist() == [1, 3]
    binary = not content.endswith(b"5 6\n")
    assert words == list(KeyedVectors.load_word2vec_format(path, binary=binary).index_to_key)


def test_rows_beyond_the_header_are_said_wherever_a_block_of_rows_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "more.txt"
    path.write_bytes(b"2 1\na 1\nb 2\nc 3\n")
    monkeypatch.setattr(word2vec, "_TEXT_BLOCK", 8)  # a block ends with the header's last row
    assert read_word2vec(path)[0] == ["a", "b"]
    assert "the file goes on after the 2 words its header says" in capsys.readouterr().err


@pytest.mark.parametrize("binary", [False, True])
def test_a_limit_reads_the_first_records_and_not_the_rest(
        tmp_path: Path, binary: bool, capsys: pytest.CaptureFixture[str]) -> None:
    # gensim's limit=: a big file's first words, without reading (or judging) what follows
    def record(word: bytes, value: float) -> bytes:
        return word + (b" " + np.float32(value).tobytes() if binary else b" %g" % value) + b"\n"

    path = tmp_path / ("v.bin" if binary else "v.txt")
    path.write_bytes(b"4 1\n" + record(b"a", 1) + record(b"b", 2) + b"c")  # cut short
    words, matrix = read_word2vec(path, limit=2)
    assert words == ["a", "b"] and matrix[:, 0].tolist() == [1, 2]
    theirs = KeyedVectors.load_word2vec_format(path, binary=binary, limit=2)
    assert words == theirs.index_to_key
    assert capsys.readouterr().err == ""  # not "the file goes on after the 2 words"
    with pytest.raises(InputError, match="the file is cut short"):  # the whole file
        read_word2vec(path)


def test_a_byte_order_mark_before_the_header_is_read_past(tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf2 2\na 1 2\nb 3 4\n")  # an editor's UTF-8 with BOM
    assert word2vec.is_word2vec_file(path)
    words, matrix = read_word2vec(path)
    assert words == ["a", "b"] and matrix.tolist() == [[1, 2], [3, 4]]


@pytest.mark.parametrize(("content", "where"), [
    ("2 3\n\nb 1.5 2.5 3.5\n", "line 2 is empty instead of a word and its values"),
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


@pytest.mark.parametrize("rows", [
    "the  0.5  -1\nof  2  3\n",                 # runs of spaces
    "the\t0.5 -1\nof\t2\t3\n",               # tabs
    "the 0.5 -1\r\nof 2 3\r\n",               # CRLF
    "the   0.500000 -1.000000\nof   2.000000  3.000000\n",  # %10.6f columns
])
def test_text_rows_with_other_spacing_are_read(tmp_path: Path, rows: str) -> None:
    # the strict parse failed on these, and the binary reader then read them as garbage words
    path = tmp_path / "v.txt"
    path.write_text("2 2\n" + rows)
    words, m = read_word2vec(path)
    assert words == ["the", "of"] and m.tolist() == [[0.5, -1.0], [2.0, 3.0]]


@pytest.mark.parametrize(("content", "where"), [
    (b"2 3\nthe  1  2  3  4\nof  1  2  3  4\n", "line 2: word 'the' has 4 values, expected 3"),
    (b"2 2\nthe  x  1\nof  1  2\n", "line 2: word 'the' has a non-number value 'x'"),
    (b"2 2\nthe 1 2\nof  1  y\n", "line 3: word 'of' has a non-number value 'y'"),
    (b"2 3\nthe 1 2 3 4 5\nof 1 2 3 4 5\n", "line 2: word 'the' has 5 values, expected 3"),
])
def test_text_that_fails_to_parse_is_named_not_read_as_binary(tmp_path: Path, content: bytes,
                                                              where: str) -> None:
    path = tmp_path / "v.txt"
    assert _read_error(path, content) == (
        f"{path} is not a word2vec file ({where}); pass a word2vec text/binary file, a .npy "
        "export, a run folder or a checkpoint folder")


@pytest.mark.parametrize("binary", [False, True])
def test_words_that_are_not_utf8_are_replaced_with_one_warning(
        tmp_path: Path, binary: bool, capsys: pytest.CaptureFixture[str]) -> None:
    # word2vec.c cuts words at 99 bytes, which can split a character: its own output
    cut, whole = b"a" + "é".encode()[:1], b"b"
    path = tmp_path / "cut.bin"
    if binary:
        values = np.array([1, 2], "<f4").tobytes()
        rows = [w + b" " + values + b"\n" for w in (cut, whole, cut + b"x")]
    else:
        rows = [w + b" 1 2\n" for w in (cut, whole, cut + b"x")]
    path.write_bytes(b"3 2\n" + b"".join(rows))
    words, m = read_word2vec(path)
    assert words == ["a\ufffd", "b", "a\ufffdx"] and m.tolist() == [[1, 2]] * 3
    assert capsys.readouterr().err == (f"embedlab: warning: {path}: 2 words are not valid UTF-8; "
                                       "their bad bytes read as U+FFFD\n")


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
@pytest.mark.parametrize("binary", [False, True])
def test_compressed_files_are_written_and_read(tmp_path: Path, suffix: str, binary: bool) -> None:
    words = ["the", "König", "of"]
    m = np.random.default_rng(3).standard_normal((3, 5)).astype(np.float32)
    path = tmp_path / (("v.bin" if binary else "v.txt") + suffix)
    write_word2vec(path, words, m, binary=binary)
    assert not path.read_bytes().startswith(b"3 5")  # compressed, not plain
    got_words, got = read_word2vec(path)
    assert got_words == words and np.array_equal(got, m)
    kv = KeyedVectors.load_word2vec_format(str(path), binary=binary)  # gensim, by the suffix
    assert kv.index_to_key == words and np.array_equal(kv.vectors, m)
    first = path.read_bytes()
    write_word2vec(path, words, m, binary=binary, force=True)
    assert path.read_bytes() == first  # no time stamp or name in the header: same bytes


def test_gensims_gzip_is_read_whatever_its_name(tmp_path: Path) -> None:
    kv = KeyedVectors(2)
    kv.add_vectors(["x", "y"], np.eye(2, dtype=np.float32))
    path = tmp_path / "GoogleNews-like.bin.gz"
    kv.save_word2vec_format(str(path), binary=True)
    renamed = path.rename(tmp_path / "vectors")  # detected by its first bytes, not its name
    words, m = read_word2vec(renamed)
    assert words == ["x", "y"] and np.array_equal(m, np.eye(2))


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
@pytest.mark.parametrize("binary", [False, True])
def test_a_limit_decompresses_only_as_far_as_its_records(
        tmp_path: Path, suffix: str, binary: bool) -> None:
    # gensim's habit load_word2vec_format("GoogleNews-vectors-negative300.bin.gz", limit=N):
    # the first N of 3M records, not the whole 3.6 GB decompressed first. A stream damaged
    # after the first records shows whether the rest was decompressed.
    words = [f"w{i}" for i in range(300)]
    m = np.random.default_rng(5).standard_normal((300, 20)).astype(np.float32)
    name = "v.bin" if binary else "v.txt"
    write_word2vec(tmp_path / name, words, m, binary=binary)
    write_word2vec(tmp_path / "first", words[:100], m[:100], binary=binary)
    first = (tmp_path / "first").read_bytes().split(b"\n", 1)[1]
    plain = (tmp_path / name).read_bytes()
    cut = plain.index(b"\n") + 1 + len(first)  # where record 101 starts
    module = {".gz": gzip, ".bz2": bz2, ".xz": lzma}[suffix]
    rest = module.compress(plain[cut:])
    path = tmp_path / (name + suffix)  # a first stream, then a second that ends early
    path.write_bytes(module.compress(plain[:cut]) + rest[:len(rest) // 2])
    got_words, got = read_word2vec(path, limit=10)
    assert got_words == words[:10] and np.array_equal(got, m[:10])
    # gensim's own binary reader reads ahead into the damage; on the whole file, its 10 words
    (tmp_path / ("whole" + suffix)).write_bytes(module.compress(plain))
    theirs = KeyedVectors.load_word2vec_format(str(tmp_path / ("whole" + suffix)),
                                               binary=binary, limit=10)
    assert theirs.index_to_key == got_words and np.array_equal(theirs.vectors, got)
    with pytest.raises(InputError, match="is a damaged"):  # the whole file: its damage is seen
        read_word2vec(path)


@pytest.mark.parametrize("binary", [False, True])
def test_a_limit_reads_compressed_records_across_many_beginnings(
        tmp_path: Path, binary: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # each beginning ends at a line break (text is never cut inside "König"), and records cut
    # at its end are read whole from the next, twice as long
    monkeypatch.setattr(word2vec, "_FIRST_PREFIX", 16)
    words = [f"König{i}" for i in range(200)]
    m = np.random.default_rng(6).standard_normal((200, 7)).astype(np.float32)
    path = tmp_path / ("v.bin.gz" if binary else "v.txt.gz")
    write_word2vec(path, words, m, binary=binary)
    for limit in (1, 37, 199, 200, 500):
        got_words, got = read_word2vec(path, limit=limit)
        assert got_words == words[:limit] and np.array_equal(got, m[:limit])


def test_a_limit_beyond_a_cut_compressed_file_names_the_records_it_has(tmp_path: Path) -> None:
    path = tmp_path / "v.txt.gz"
    path.write_bytes(gzip.compress(b"5 1\na 1\nb 2\n"))
    with pytest.raises(InputError, match=r"too few for the first 4 words × 1 dims asked for: "
                                         "the file is cut short"):
        read_word2vec(path, limit=4)


@pytest.mark.parametrize("damage", ["cut", "flipped"])
def test_a_damaged_compressed_file_is_one_line(tmp_path: Path, damage: str) -> None:

    path = tmp_path / "v.txt.gz"
    good = gzip.compress(b"2 1\na 1\nb 2\n" * 50)
    # a cut stream ends early (EOFError); flipped bytes break the deflate stream (zlib.error,
    # which was a traceback)
    bad = good[:15] if damage == "cut" else good[:12] + bytes(b ^ 0xFF for b in good[12:40]) + \
        good[40:]
    message = _read_error(path, bad)
    assert message.startswith(f"{path} is a damaged gzip file (") and message.endswith(
        "); download or export it again")


@pytest.mark.parametrize("binary", [False, True])
def test_reading_holds_the_matrix_and_a_block_not_the_file(tmp_path: Path, binary: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # one Python object per text value took ~10 times the file, and the binary gather's index
    # array 8 times the matrix: a 3.6 GB GoogleNews file needed tens of GB
    import tracemalloc

    monkeypatch.setattr(word2vec, "_TEXT_BLOCK", 1 << 16)
    monkeypatch.setattr(word2vec, "_GATHER_BYTES", 1 << 14)
    n, dim = 4000, 50
    m = np.random.default_rng(4).standard_normal((n, dim)).astype(np.float32)
    path = tmp_path / "v.bin"
    write_word2vec(path, [f"w{i}" for i in range(n)], m, binary=binary)
    tracemalloc.start()
    try:
        words, got = read_word2vec(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(got, m) and len(words) == n
    # the matrix (800 kB), the words (~60 B each), and a block's worth of values
    assert peak < m.nbytes + n * 120 + (1 << 20), peak


def test_a_bin_file_of_text_with_a_wrong_header_names_the_row(tmp_path: Path) -> None:
    # tried as binary first (its name), the records' words held line breaks: the rows are named
    path = tmp_path / "v.bin"
    assert "(line 2: word 'the' has 5 values, expected 3)" in _read_error(
        path, b"2 3\nthe 1 2 3 4 5\nof 1 2 3 4 5\n")


def test_whitespace_other_than_spaces_and_tabs_stays_in_a_word(tmp_path: Path) -> None:
    # word2vec.c splits rows at spaces, tabs and newlines only; \x0b and \x0c are word bytes
    path = tmp_path / "v.txt"
    path.write_bytes(b"2 1\na\x0bb 1\nc\x0cd 2\n")
    words, m = read_word2vec(path)
    assert words == ["a\x0bb", "c\x0cd"] and m.tolist() == [[1.0], [2.0]]


def test_a_file_that_cannot_be_mapped_is_read(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import mmap

    class Unmappable(mmap.mmap):
        def __new__(cls, *args: object, **kwargs: object) -> Unmappable:
            raise OSError(errno.ENODEV, "No such device")  # a FUSE file system with direct_io

    monkeypatch.setattr(mmap, "mmap", Unmappable)
    words = ["a", "b"]
    m = np.arange(4, dtype=np.float32).reshape(2, 2)
    for binary in (False, True):
        path = tmp_path / ("v.bin" if binary else "v.txt")
        write_word2vec(path, words, m, binary=binary)
        got_words, got = read_word2vec(path)
        assert got_words == words and np.array_equal(got, m)


@pytest.mark.parametrize(("name", "content", "message"), [
    ("g.txt", b"the 1 2 3\nof 4 5 6\n",
     "{path} has no 'VOCAB_SIZE DIM' first line: its first line is a word and 3 values, as in "
     "GloVe's files; add that line, e.g. (echo \"$(wc -l < {path}) 3\"; cat {path}) > "
     "vectors.txt, and pass that"),
    ("wd.txt", b"2 300\nthe 1 2 3\nof 4 5 6\n",
     "{path} line 2: word 'the' has 3 values, but the header says 300 per word; make the "
     "header's second number 3"),
    ("sp.txt", b"3 2\nb 3 4\nnew york 1 2\nc 5 6\n",
     "{path} line 3: the word 'new york' holds a space, which word2vec text files cannot store "
     "(the values are the line's last 2); join its parts, e.g. 'new_york'"),
    ("cr.txt", b"3 2\rx 1 2\ry 2 3\rz 3 3\r",
     "{path}'s lines end in a carriage return alone (old Mac line ends); convert them with "
     "tr '\\r' '\\n' < {path} > vectors.txt, and pass that"),
    ("v.zip", b"PK\x03\x04" + bytes(40),
     "{path} is a zip archive, not a word2vec file; unzip it and pass the file inside "
     "(unzip -l {path} lists it)"),
    ("u16.txt", "2 2\na 1 2\nb 2 3\n".encode("utf-16"),
     "{path} is UTF-16 text; word2vec files are UTF-8: convert it with iconv -f UTF-16 -t UTF-8 "
     "{path} > vectors.txt, and pass that"),
])
def test_a_file_of_another_shape_is_named_with_its_fix(tmp_path: Path, name: str,
                                                       content: bytes, message: str) -> None:
    # GloVe's header-less files, a header of the wrong dimension (it was "cut short"), a word
    # with a space (it was "has 3 values"), zip archives and UTF-16 (they were "the first line
    # must be 'VOCAB_SIZE DIM'")
    path = tmp_path / name
    assert _read_error(path, content) == message.format(path=path)


def test_binary_records_whose_words_hold_a_nul_name_the_header_dimension(tmp_path: Path) -> None:
    # gensim 4's layout (no newline after a record) with 3 values a record under a header of
    # 2: the records' float bytes were read as words, exit 0
    records = b"".join(w + b" " + np.array(v, "<f4").tobytes()
                       for w, v in [(b"a", [1, 2, 3]), (b"b", [3, 4, 5]), (b"c", [5, 6, 7])])
    assert _read_error(tmp_path / "d.bin", b"3 2\n" + records).startswith(
        f"{tmp_path / 'd.bin'} is not a word2vec file (binary record 2 of 3 has a NUL byte in "
        "its word: is 2, the header's second number, the count of values per word?)")


def test_binary_records_that_end_in_cr_lf_are_named_so(tmp_path: Path) -> None:
    # the CR LF named, not a line break in the second word nor the header's dimension
    records = b"".join(w + b" " + np.array(v, "<f4").tobytes() + b"\r\n"
                       for w, v in [(b"a", [1, 2]), (b"b", [3, 4])])
    assert _read_error(tmp_path / "d.bin", b"2 2\n" + records).startswith(
        f"{tmp_path / 'd.bin'} is not a word2vec file (binary record 2 of 2 starts with a "
        "carriage return: its records end in CR LF, as after a conversion to Windows line ends, "
        "which changes values' bytes too)")


def test_a_word_with_a_nul_is_not_written(tmp_path: Path) -> None:
    # a NUL sent the written text file down the binary reader: it could not be read back
    with pytest.raises(InputError, match="holds a NUL character, which the word2vec formats "
                                         "cannot store"):
        write_word2vec(tmp_path / "v.txt", ["s\x00t", "b"], np.ones((2, 2), np.float32))
    assert not (tmp_path / "v.txt").exists()


@pytest.mark.parametrize("binary", [False, True])
def test_words_in_another_encoding_are_read_with_it(tmp_path: Path, binary: bool) -> None:
    words = ["кот", "пёс", "дом", "the"]
    m = np.arange(8, dtype=np.float32).reshape(4, 2)
    header = b"4 2\n"
    rows = [w.encode("cp1251") + (b" " + r.astype("<f4").tobytes() if binary else
                                   b" %g %g" % tuple(r)) + b"\n"
            for w, r in zip(words, m, strict=True)]
    path = tmp_path / ("v.bin" if binary else "v.txt")
    path.write_bytes(header + b"".join(rows))
    got, matrix = read_word2vec(path, encoding="cp1251")
    assert got == words and np.array_equal(matrix, m)
    theirs = KeyedVectors.load_word2vec_format(str(path), binary=binary, encoding="cp1251")
    assert theirs.index_to_key == got
    # read as UTF-8, the three Cyrillic words' bytes all become U+FFFD: refused, not merged
    with pytest.raises(InputError) as e:
        read_word2vec(path)
    assert str(e.value).endswith(
        "different words became one when their bytes that are not valid UTF-8 read as U+FFFD: "
        f"the file is in another encoding; convert the file with iconv -f ENCODING -t UTF-8 "
        f"{path} > vectors.txt")


def test_a_compressed_file_is_decompressed_no_further_than_its_header_can_take(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 64 KB of gzip that decompress to 64 MB of line breaks after 2 records: all of it was
    # written to a temporary file (1.5 KB of bzip2 made 2 GiB, 37 s and 2 GB of memory)
    path = tmp_path / "bomb.txt.gz"
    path.write_bytes(gzip.compress(b"2 3\nw 1 2 3\nv 1 2 3\n" + b"\n" * (64 << 20), 1))
    sizes: list[int] = []
    mapped = word2vec._mapped

    def spy(fh: Any, length: int | None = None) -> Any:
        sizes.append(os.fstat(fh.fileno()).st_size)
        return mapped(fh, length)

    monkeypatch.setattr(word2vec, "_mapped", spy)
    words, matrix = read_word2vec(path)
    assert words == ["w", "v"] and matrix.tolist() == [[1, 2, 3], [1, 2, 3]]
    assert sizes and max(sizes) < 8 << 20


def test_words_cut_inside_a_character_stay_duplicates_not_another_encoding(
        tmp_path: Path) -> None:
    # word2vec.c's 99-byte cut splits a character: two words ending in different broken bytes
    # read alike; that is no file in another encoding (gensim keeps the first too)
    path = tmp_path / "cut.txt"
    path.write_bytes(b"3 2\n" + b"a" * 97 + "中".encode()[:2] + b" 1 2\n" + b"a" * 97
                     + "乐".encode()[:2] + b" 3 4\nok 5 6\n")
    words, matrix = read_word2vec(path)
    assert len(words) == 2 and words[1] == "ok" and matrix[0].tolist() == [1, 2]


@pytest.mark.parametrize("limit", [None, 5])
def test_a_compressed_file_damaged_before_its_header_is_said_damaged(
        tmp_path: Path, limit: int | None) -> None:
    path = tmp_path / "v.txt.gz"
    path.write_bytes(gzip.compress(b"2 1\na 1\nb 2\n" * 50)[:15])
    with pytest.raises(InputError, match="is a damaged gzip file"):
        read_word2vec(path, limit=limit)


def test_a_header_of_thousands_of_digits_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "v.txt"
    message = _read_error(path, b"9" * 5000 + b" 3\nw 1 2 3\n")
    assert message.startswith(f"{path} is not a word2vec file (the header's numbers are too "
                              "large to be a word count and a dimension)")


def test_a_compressed_glove_file_is_told_the_commands_that_read_its_text(tmp_path: Path) -> None:
    path = tmp_path / "g.txt.gz"
    path.write_bytes(gzip.compress(b"the 1 2 3\nof 4 5 6\n"))
    assert _read_error(path, path.read_bytes()).endswith(
        f"add that line, e.g. (echo \"$(zcat {path} | wc -l) 3\"; zcat {path}) > vectors.txt, "
        "and pass that")
