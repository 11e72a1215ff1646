"""Corpus readers: streaming, sentence ends, compression, folders, invalid UTF-8, bad input."""

from __future__ import annotations

import bz2
import gzip
import lzma
import tracemalloc
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.data import corpus
from embedlab.data.corpus import ReadStats, iter_blocks
from embedlab.errors import InputError


def sentences_of(blocks: list[tuple[list[str], bool]]) -> list[list[str]]:
    """Join blocks back into sentences (a block with True closes one)."""
    out: list[list[str]] = []
    cur: list[str] = []
    for tokens, ends in blocks:
        assert tokens, "blocks are never empty"
        cur.extend(tokens)
        if ends:
            out.append(cur)
            cur = []
    assert not cur, "the last block must end a sentence"
    return out


def expected_sentences(text: str) -> list[list[str]]:
    return [line.split() for line in text.split("\n") if line.split()]


def write(tmp: Path, name: str, data: bytes) -> Path:
    p = tmp / name
    p.write_bytes(data)
    return p


# words of letters (incl. multi-byte ones) separated by whitespace runs that may hold newlines
_word = st.text(alphabet=st.sampled_from("abcxyzéß語😀"), min_size=1, max_size=8)
_gap = st.sampled_from([" ", "  ", "\t", "\n", " \n ", "\n\n", "\r\n"])
_text = st.lists(st.tuples(_word, _gap), max_size=60).map(
    lambda parts: "".join(w + g for w, g in parts))


@settings(max_examples=120, deadline=None)
@given(text=_text, lead=st.sampled_from(["", " ", "\n"]), piece=st.integers(1, 17))
def test_blocks_equal_split_for_any_piece_size(tmp_path_factory: pytest.TempPathFactory,
                                               text: str, lead: str, piece: int) -> None:
    # Tiny pieces cut tokens and multi-byte characters at every possible place.
    text = lead + text
    path = write(tmp_path_factory.mktemp("c"), "c.txt", text.encode())
    with mock.patch.object(corpus, "PIECE_BYTES", piece):
        stats = ReadStats()
        blocks = list(iter_blocks(path, stats=stats))
    assert sentences_of(blocks) == expected_sentences(text)
    assert stats.tokens == len(text.split())
    assert stats.sentences == len(expected_sentences(text))
    assert stats.invalid_utf8 == 0


# letters whose lowercase depends on their neighbours (final sigma) or changes length (İ)
_cased_word = st.text(alphabet=st.sampled_from("aΑΣσςİÉ'"), min_size=1, max_size=6)
_cased_text = st.lists(st.tuples(_cased_word, _gap), max_size=30).map(
    lambda parts: "".join(w + g for w, g in parts))


@settings(max_examples=120, deadline=None)
@given(text=_cased_text, piece=st.integers(1, 9))
def test_lowercase_does_not_depend_on_piece_boundaries(tmp_path_factory: pytest.TempPathFactory,
                                                      text: str, piece: int) -> None:
    # Lowercasing each piece before re-joining a cut token turned "ΑΣΑ" into "ας" + "α" when
    # the boundary fell after the Σ: one word, two vocabulary entries.
    path = write(tmp_path_factory.mktemp("c"), "c.txt", text.encode())
    with mock.patch.object(corpus, "PIECE_BYTES", piece):
        blocks = list(iter_blocks(path, lowercase=True))
    assert sentences_of(blocks) == expected_sentences(text.lower())


def test_final_sigma_at_a_piece_boundary(tmp_path: Path) -> None:
    text = "x " * 10 + "ΑΣΑ ΑΣΑ ΟΔΟΣ\n"
    path = write(tmp_path, "c.txt", text.encode())
    for piece in range(1, len(text.encode()) + 1):
        with mock.patch.object(corpus, "PIECE_BYTES", piece):
            tokens = [t for toks, _ in iter_blocks(path, lowercase=True) for t in toks]
        assert tokens[-3:] == ["ασα", "ασα", "οδος"], piece


def test_byte_order_mark_is_not_part_of_the_first_word(tmp_path: Path) -> None:
    path = write(tmp_path, "c.txt", "\ufeffthe cat \ufeffsat\n".encode())
    for piece in (1, 2, 3, 100):
        with mock.patch.object(corpus, "PIECE_BYTES", piece):
            # only the file's leading mark goes; a U+FEFF inside the text is kept as it is
            assert sentences_of(list(iter_blocks(path))) == [["the", "cat", "\ufeffsat"]]


def test_text8_line_is_streamed_in_bounded_blocks(tmp_path: Path) -> None:
    line = " ".join(f"w{i % 997}" for i in range(300_000))  # ~1.7 MB, one line, no newline
    path = write(tmp_path, "text8", line.encode())
    with mock.patch.object(corpus, "PIECE_BYTES", 1 << 16):
        blocks = list(iter_blocks(path))
    assert len(blocks) > 20
    assert all(not ends for _, ends in blocks[:-1]) and blocks[-1][1]
    assert max(sum(len(t) + 1 for t in toks) for toks, _ in blocks) <= (1 << 16) + 16
    assert [t for toks, _ in blocks for t in toks] == line.split()


def test_memory_stays_bounded_on_a_long_line(tmp_path: Path) -> None:
    line = "abcdefgh " * 500_000  # 4.5 MB on one line
    path = write(tmp_path, "one-line.txt", line.encode())
    # 32 KiB pieces: streaming peaks near 1 MB; holding the line whole costs over 50 MB
    with mock.patch.object(corpus, "PIECE_BYTES", 1 << 15):
        tracemalloc.start()
        n = sum(len(toks) for toks, _ in iter_blocks(path))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert n == 500_000
    assert peak < 2_000_000, f"peak {peak:,} bytes: the line was held whole"


@pytest.mark.parametrize("suffix,opener", [(".gz", gzip.open), (".bz2", bz2.open),
                                           (".xz", lzma.open)])
def test_compressed_files_read_like_plain(tmp_path: Path, suffix: str, opener: object) -> None:
    text = "the cat sat\non the mat\n" * 1000
    path = tmp_path / f"c.txt{suffix}"
    with opener(path, "wb") as f:  # type: ignore[operator]
        f.write(text.encode())
    with mock.patch.object(corpus, "PIECE_BYTES", 100):
        assert sentences_of(list(iter_blocks(path))) == expected_sentences(text)


def test_damaged_compressed_file_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "c.gz"
    path.write_bytes(gzip.compress(b"hello world " * 100)[:30])
    with pytest.raises(InputError, match=r"cannot decompress corpus file .*c\.gz"):
        list(iter_blocks(path))


def test_corrupt_deflate_block_is_an_input_error(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(b"hello world\n" * 1000))
    data[10] = 0xFF  # the first deflate block's header: an invalid block type (zlib.error)
    path = write(tmp_path, "c.gz", bytes(data))
    with pytest.raises(InputError, match=r"cannot decompress corpus file .*c\.gz"):
        list(iter_blocks(path))


def test_folder_is_read_in_sorted_order_recursively_skipping_hidden(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    write(tmp_path, "b/2.txt", b"four")
    write(tmp_path, "a.txt", b"one two\nthree")
    write(tmp_path, "c.txt.gz", gzip.compress(b"five"))
    write(tmp_path, ".hidden", b"secret")
    stats = ReadStats()
    blocks = list(iter_blocks(tmp_path, stats=stats))
    assert sentences_of(blocks) == [["one", "two"], ["three"], ["four"], ["five"]]
    assert stats.files == 3
    assert [p.name for p in stats.paths] == ["a.txt", "2.txt", "c.txt.gz"]


def test_hidden_folders_and_links_to_folders_are_not_read(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", b"one")
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".git/x.txt", b"hidden")
    (tmp_path / "other").mkdir()
    write(tmp_path, "other/b.txt", b"two")
    (tmp_path / "link").symlink_to(tmp_path / "other", target_is_directory=True)
    assert corpus.list_files(tmp_path) == [tmp_path / "a.txt", tmp_path / "other" / "b.txt"]


def test_a_folder_that_cannot_be_read_is_refused_not_skipped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its text would be left out of the corpus without a word (what an unreadable folder
    does to a walk that ignores errors)."""
    import os

    write(tmp_path, "a.txt", b"one")
    (tmp_path / "sub").mkdir()
    write(tmp_path, "sub/b.txt", b"two")
    scandir = os.scandir

    def denied(path: object = ".") -> object:
        if Path(str(path)) == tmp_path / "sub":
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", denied)
    with pytest.raises(InputError) as e:
        corpus.list_files(tmp_path)
    sub = tmp_path / "sub"
    assert str(e.value) == (f"cannot read the folder {sub} (in the corpus folder {tmp_path}): "
                            f"permission denied; give your user permission to read it (chmod "
                            f"u+rx {sub}), or move it out of the corpus folder")
    monkeypatch.setattr(corpus.os, "access", lambda path, mode: False)  # the corpus folder
    with pytest.raises(InputError, match=f"^cannot read the folder {tmp_path}: permission "):
        corpus.list_files(tmp_path)


def test_a_link_to_nothing_is_named_as_such(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(InputError, match=r"is a symbolic link to nothing that exists \(a loop"):
        corpus.list_files(loop)


def test_file_end_ends_a_sentence_even_without_newline(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", b"x y")
    write(tmp_path, "b.txt", b"z\n\n")
    assert sentences_of(list(iter_blocks(tmp_path))) == [["x", "y"], ["z"]]


def test_lowercase(tmp_path: Path) -> None:
    path = write(tmp_path, "c.txt", "The ÉCOLE Straße\n".encode())
    assert sentences_of(list(iter_blocks(path, lowercase=True))) == [["the", "école", "straße"]]
    assert sentences_of(list(iter_blocks(path))) == [["The", "ÉCOLE", "Straße"]]


def test_invalid_utf8_is_replaced_and_counted_but_real_fffd_is_not(tmp_path: Path) -> None:
    data = b"ok \xff bad \xe2\x82 cut " + "\ufffd".encode() + b" real " + b"word " * 100
    path = write(tmp_path, "c.txt", data)
    stats = ReadStats()
    tokens = [t for toks, _ in iter_blocks(path, stats=stats) for t in toks]
    assert tokens[:6] == ["ok", "\ufffd", "bad", "\ufffd", "cut", "\ufffd"]
    assert stats.invalid_utf8 == 2


def test_invalid_byte_at_piece_boundary_is_counted_once(tmp_path: Path) -> None:
    path = write(tmp_path, "c.txt", b"abc \xe2\x82" + b" word" * 50)
    with mock.patch.object(corpus, "PIECE_BYTES", 5):  # splits the broken sequence
        stats = ReadStats()
        list(iter_blocks(path, stats=stats))
    assert stats.invalid_utf8 == 1


def test_nul_bytes_mean_binary(tmp_path: Path) -> None:
    path = write(tmp_path, "model.bin", b"abc\x00\x01\x02" * 100)
    with pytest.raises(InputError, match=r"model\.bin looks binary \(it contains NUL bytes\)"):
        list(iter_blocks(path))


def test_mostly_invalid_utf8_is_named_another_encoding(tmp_path: Path) -> None:
    path = write(tmp_path, "latin1.txt", bytes(range(0x80, 0x100)) * 20)
    with pytest.raises(InputError) as e:
        list(iter_blocks(path))
    assert str(e.value) == (f"corpus file {path} is not UTF-8 text (2,560 invalid UTF-8 "
                            "sequences in its first 2,560 bytes: another encoding, such as "
                            "Latin-1?); convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8) into "
                            "a new file outside the corpus's folder, and pass that")
    import gzip

    packed = tmp_path / "latin1.txt.gz"
    packed.write_bytes(gzip.compress(bytes(range(0x80, 0x100)) * 20))
    with pytest.raises(InputError, match=r"; decompress it, convert the text to UTF-8 "):
        list(iter_blocks(packed))


@pytest.mark.parametrize(("head", "message"), [
    (b"PK\x03\x04", "is a zip archive; unzip it (unzip {path}) and pass the file or folder it "
                     "holds, with the archive moved out of a corpus folder (.gz, .bz2 and .xz "
                     "are read as they are)"),
    (b"7z\xbc\xaf\x27\x1c", "is an archive or compressed file embedlab does not read (it reads "
                            ".gz, .bz2 and .xz); extract it and pass the text"),
])
def test_an_archive_is_named_with_how_to_open_it(tmp_path: Path, head: bytes, message: str
                                                 ) -> None:
    """text8.zip is what word2vec's demo downloads: a corpus of it is an archive, not text."""
    path = write(tmp_path, "text8.zip", head + bytes(range(256)) * 8)
    with pytest.raises(InputError) as e:
        list(iter_blocks(path))
    assert str(e.value) == f"corpus file {path} " + message.format(path=path)


@pytest.mark.parametrize(("name", "head", "message"), [
    ("notes.txt", "hello".encode("utf-16"), "is UTF-16 text, not UTF-8; convert it (e.g. iconv "
     "-f utf-16 -t utf-8) into a new file outside the corpus's folder, and pass that"),
    # UTF-32's mark starts with UTF-16's: converted as UTF-16 it gave nonsense
    ("notes.txt", "hello".encode("utf-32"), "is UTF-32 text, not UTF-8; convert it (e.g. iconv "
     "-f utf-32 -t utf-8) into a new file outside the corpus's folder, and pass that"),
    # no byte-order mark (iconv -t utf-16le writes none): every other byte NUL
    ("notes.txt", "hello world\n".encode("utf-16-le") * 3, "is UTF-16LE text, not UTF-8; "
     "convert it (e.g. iconv -f utf-16le -t utf-8) into a new file outside the corpus's folder, "
     "and pass that"),
    ("notes.txt", "hello world\n".encode("utf-16-be") * 3, "is UTF-16BE text, not UTF-8; "
     "convert it (e.g. iconv -f utf-16be -t utf-8) into a new file outside the corpus's folder, "
     "and pass that"),
    ("notes.txt.gz", gzip.compress("hello".encode("utf-16")),
     "is UTF-16 text, not UTF-8; decompress it, convert the text (e.g. iconv -f utf-16 -t "
     "utf-8) into a new file outside the corpus's folder, and pass that"),
    ("img.png", b"\x89PNG\r\n\x1a\n" + bytes(range(0x80, 0x100)) * 4,
     "is a PNG image, not text; pass UTF-8 text with whitespace-separated tokens (move such "
     "files out of a corpus folder)"),
    ("data.txt", gzip.compress(b"hello world\n"), "is gzip-compressed but not named .gz; rename "
     "it to data.txt.gz (or gunzip it) and pass that"),
    ("data.txt", bz2.compress("h\u00e9llo w\u00f6rld\n".encode() * 50), "is bzip2-compressed "
     "but not named .bz2; rename it to data.txt.bz2 (or bunzip2 it) and pass that"),
    ("data.xz.txt", lzma.compress(b"hello world\n"), "is xz-compressed but not named .xz; "
     "rename it to data.xz.txt.xz (or unxz it) and pass that"),
])
def test_files_that_are_no_utf8_text_are_named_for_what_they_are(
        tmp_path: Path, name: str, head: bytes, message: str) -> None:
    """A Windows text file, an image in a corpus folder, a gzip without its suffix: "another
    encoding, such as Latin-1?" or "looks binary" would send the user the wrong way."""
    path = write(tmp_path, name, head)
    with pytest.raises(InputError) as e:
        list(iter_blocks(path))
    assert str(e.value) == f"corpus file {path} {message}"


def test_a_folder_of_hidden_files_only_says_they_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, ".notes", b"hello world\n")
    with pytest.raises(InputError) as e:
        list(iter_blocks(tmp_path))
    assert str(e.value) == (f"corpus folder {tmp_path} holds no files but hidden ones (names "
                            "starting with '.', which a corpus folder skips); put text files "
                            "in it (plain, .gz, .bz2 or .xz)")


def test_a_prepared_corpus_inside_a_corpus_folder_is_named(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", b"hello world\n")
    (tmp_path / "prep").mkdir()
    write(tmp_path / "prep", "meta.json", b'{"format": "embedlab-prepared"}')
    write(tmp_path / "prep", "ids.u32", b"\x00" * 8)
    with pytest.raises(InputError) as e:
        list(iter_blocks(tmp_path))
    assert str(e.value) == (f"corpus folder {tmp_path} holds a prepared corpus, "
                            f"{tmp_path / 'prep'}; move it out of the folder (or pass it to "
                            "'train --corpus' on its own)")


def test_a_prepared_corpus_without_its_meta_json_is_named_damaged(tmp_path: Path) -> None:
    write(tmp_path, "ids.u32", b"\x00" * 8)
    write(tmp_path, "vocab.tsv", b"a\t3\n")
    with pytest.raises(InputError, match=r"looks like a prepared corpus that lost its "
                                         r"meta\.json \(damaged\); re-create it"):
        list(iter_blocks(tmp_path))


def test_standard_input_is_named_as_such(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^corpus '-': embedlab reads a corpus from files"):
        list(iter_blocks(Path("-")))


def test_a_short_file_with_a_few_latin1_bytes_is_text(tmp_path: Path) -> None:
    # 3 invalid sequences in 15 bytes is 20 %, but a few accents are not a binary file: they
    # are replaced and counted like any invalid UTF-8.
    path = write(tmp_path, "latin1.txt", b"Zo\xeb na\xefve caf\xe9\n")
    stats = ReadStats()
    assert sentences_of(list(iter_blocks(path, stats=stats))) == [
        ["Zo\ufffd", "na\ufffdve", "caf\ufffd"]]
    assert stats.invalid_utf8 == 3


def test_missing_corpus(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"corpus not found: .*nope\.txt; pass an existing"):
        list(iter_blocks(tmp_path / "nope.txt"))


def test_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="holds no files"):
        list(iter_blocks(tmp_path))


def test_prepared_folder_is_not_raw_text(tmp_path: Path) -> None:
    write(tmp_path, "meta.json", b'{"format": "embedlab-prepared"}')
    write(tmp_path, "ids.u32", b"")
    with pytest.raises(InputError, match="is a prepared corpus, not raw text"):
        list(iter_blocks(tmp_path))


@pytest.mark.parametrize("with_prepared", [False, True])
def test_a_run_folder_is_named_not_read_as_binary_text(tmp_path: Path,
                                                       with_prepared: bool) -> None:
    # its checkpoints' tensors were refused as "corpus file ... looks binary"
    write(tmp_path, "config.json", b"{}")
    (tmp_path / "checkpoints" / "ckpt-00000001").mkdir(parents=True)
    write(tmp_path / "checkpoints" / "ckpt-00000001", "tensors.safetensors", b"\x00\x01")
    if with_prepared:
        (tmp_path / "prepared").mkdir()
        write(tmp_path / "prepared", "meta.json", b"{}")
    copy = f", or its prepared copy {tmp_path / 'prepared'}" if with_prepared else ""
    with pytest.raises(InputError) as e:
        list(iter_blocks(tmp_path))
    assert str(e.value) == (f"{tmp_path} is a training run's folder, not a corpus; pass the "
                            f"corpus it was trained on (data.corpus in "
                            f"{tmp_path / 'config.json'}){copy}")


def test_damaged_prepared_folder_is_named_as_such(tmp_path: Path) -> None:
    # 'train --corpus DIR' falls back to reading DIR as text when its meta.json is damaged;
    # telling the user to "pass it to train --corpus" then would send them in a circle.
    write(tmp_path, "meta.json", b'{"format": "embedlab-prep')
    write(tmp_path, "ids.u32", b"")
    with pytest.raises(InputError, match=r"damaged prepared corpus .*meta\.json.*"
                                         r"embedlab prepare CORPUS --out .* --force"):
        list(iter_blocks(tmp_path))


def test_endless_token_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "c.txt", b"x" * 5000)
    with mock.patch.object(corpus, "PIECE_BYTES", 100), \
            mock.patch.object(corpus, "MAX_TOKEN_CHARS", 1000), \
            pytest.raises(InputError, match="longer than 1,000 characters"):
        list(iter_blocks(path))


@pytest.mark.parametrize("length,refused", [(1000, False), (1001, True)])
def test_token_length_limit_does_not_depend_on_piece_boundaries(tmp_path: Path, length: int,
                                                                 refused: bool) -> None:
    # 100-byte pieces; a 1,001-character token is refused wherever it starts, also where it
    # begins in one piece and ends in the next (the carry alone is at most 1,000 characters)
    for offset in range(0, 220, 2):
        path = write(tmp_path, "c.txt", b"w " * (offset // 2) + b"x" * length + b" end\n")
        with mock.patch.object(corpus, "PIECE_BYTES", 100), \
                mock.patch.object(corpus, "MAX_TOKEN_CHARS", 1000):
            if refused:
                with pytest.raises(InputError, match="longer than 1,000 characters"):
                    list(iter_blocks(path))
            else:
                assert sentences_of(list(iter_blocks(path)))[0][-2:] == ["x" * length, "end"]


def test_token_completed_at_the_end_of_the_file_is_checked(tmp_path: Path) -> None:
    # the cut UTF-8 sequence at the end becomes U+FFFD only when the file ends: the token is
    # then 1,001 characters long, and the file's last piece was never checked
    path = write(tmp_path, "c.txt", b"x" * 1000 + b"\xe2")
    with mock.patch.object(corpus, "PIECE_BYTES", 100), \
            mock.patch.object(corpus, "MAX_TOKEN_CHARS", 1000), \
            pytest.raises(InputError, match="longer than 1,000 characters"):
        list(iter_blocks(path))


def test_empty_file_yields_nothing(tmp_path: Path) -> None:
    stats = ReadStats()
    assert list(iter_blocks(write(tmp_path, "e.txt", b" \n\n "), stats=stats)) == []
    assert stats.tokens == 0 and stats.files == 1


def test_progress_reports_source_bytes(tmp_path: Path) -> None:
    data = gzip.compress(b"a b c\n" * 10_000)
    path = write(tmp_path, "c.gz", data)
    seen: list[int] = []
    stats = ReadStats()
    list(iter_blocks(path, progress=seen.append, stats=stats))
    assert sum(seen) == len(data) == stats.source_bytes


def test_a_binary_file_with_text_up_front_is_called_binary(tmp_path: Path) -> None:
    """A word2vec .bin starts with a text header ("71291 100\\n"), its NUL bytes come later:
    binary, not text in another encoding."""
    path = write(tmp_path, "vectors.bin", b"71291 100\nthe " + bytes(range(256)) * 8)
    with pytest.raises(InputError, match=r"vectors\.bin looks binary \(it contains NUL "
                                         r"bytes\); pass UTF-8 text"):
        list(iter_blocks(path))


def test_the_fix_of_a_runs_vocabulary_names_the_prepared_corpus_it_trained_on(
        tmp_path: Path) -> None:
    """A run on a prepared folder holds no prepared/ of its own: "re-run 'embedlab prepare'"
    never touches the run's vocab.tsv."""
    import json

    from embedlab.data.corpus import vocabulary_fix

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"data": {"corpus": "data/prep"}}))
    assert vocabulary_fix(run / "vocab.tsv") == (
        f"copy the vocab.tsv of the prepared corpus the run trained on (data/prep) to "
        f"{run / 'vocab.tsv'}")
