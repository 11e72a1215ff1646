"""Sentences given in memory: written once as a file's text, prepared bit for bit as that file,
named by their content, refused in one line naming the item a file could not hold."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from embedlab.data import sentences as sentences_module
from embedlab.data.corpus import MAX_TOKEN_CHARS
from embedlab.data.preparing import prepare
from embedlab.data.sentences import (
    SentencesRaised,
    is_label,
    write_sentences,
    written,
    written_file,
)
from embedlab.errors import InputError

from .conftest import TEXT

# these library functions are the commands' own: their messages as the commands give them
pytestmark = pytest.mark.usefixtures("cli_messages")

#: TEXT (conftest) as a Python user holds it: one list of words per line, the blank one empty
SENTENCES = [line.split() for line in TEXT.splitlines()]


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "meta.json"}


def test_the_file_holds_one_sentence_per_line_and_the_label_its_hash(tmp_path: Path) -> None:
    done = write_sentences(iter(SENTENCES), tmp_path / "s.txt")  # a generator: read once
    text = "the cat sat on the mat\nthe dog sat\nrare words here\nthe cat\n"  # no empty line
    assert (tmp_path / "s.txt").read_text(encoding="utf-8") == text
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert done.label == f"<iterable sha256:{digest[:16]}>" and is_label(done.label)
    assert (done.sentences, done.tokens) == (4, 14)
    # tuples, and sentences that differ only by an empty one, are the same content
    again = write_sentences([tuple(s) for s in SENTENCES if s], tmp_path / "t.txt")
    assert again.label == done.label
    assert not is_label("demo") and not is_label("<iterable sha256:abc")


def test_a_first_token_that_starts_with_a_byte_order_mark_is_kept(tmp_path: Path) -> None:
    """Text read with encoding='utf-8' rather than 'utf-8-sig' keeps the mark in its first
    word: that token is the sentences', kept as given like any other, not cut by the reader,
    which drops a mark that starts a file (its second occurrence, below, is the same word)."""
    lines = [["\ufeffhello", "cat"], ["\ufeffhello", "dog"]]
    with written(iter(lines), tmp_path) as done:
        prepared = prepare(done.label, tmp_path / "memory", progress=False, min_count=1)
        assert (tmp_path / "memory").is_dir()
    assert dict(zip(prepared.vocab.words, prepared.vocab.counts.tolist(), strict=True)) == {
        "\ufeffhello": 2, "cat": 1, "dog": 1}


@pytest.mark.parametrize(("options"), [
    {"min_count": 1}, {"min_count": 2}, {"min_count": 1, "lowercase": True, "max_vocab": 5},
    {"min_count": 1, "unk": "UNK", "max_vocab": 4}, {"min_count": 1, "max_distinct": 3},
])
def test_prepared_as_the_same_file_is(tmp_path: Path, options: dict[str, Any]) -> None:
    lines = [*SENTENCES, ["ΣΟΦΟΣ", "The", "CAT"], ["the", "ΟΔΟΣ"]]
    (tmp_path / "c.txt").write_text("".join(" ".join(s) + "\n" for s in lines),
                                    encoding="utf-8")
    from_file = prepare(tmp_path / "c.txt", tmp_path / "file", progress=False, **options)
    with written(iter(lines), tmp_path) as done:
        from_memory = prepare(done.label, tmp_path / "memory", progress=False, **options)
    assert files_of(tmp_path / "memory") == files_of(tmp_path / "file")
    assert from_memory.vocab.words == from_file.vocab.words
    meta = from_memory.meta
    assert meta["source"] == done.label and meta["source_files"] == []
    assert {k: v for k, v in meta.items() if k not in ("source", "source_files", "created")} \
        == {k: v for k, v in from_file.meta.items()
            if k not in ("source", "source_files", "created")}


def test_the_file_is_there_during_the_block_only(tmp_path: Path) -> None:
    with written(SENTENCES, tmp_path) as done:
        assert written_file(done.label) == done.path and done.path.parent == tmp_path
        assert done.path.name.startswith(".")  # hidden: a run folder's check ignores it
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(InputError) as e:
        written_file(done.label)
    assert str(e.value) == (
        f"corpus {done.label} names sentences given in memory, which are not at hand now; "
        "pass the same sentences again as corpus= (a run that has saved a checkpoint keeps "
        "them in RUN/prepared and needs them no more)")


def test_a_killed_writers_file_is_removed(tmp_path: Path) -> None:
    dead = tmp_path / ".embedlab-sentences-999999999-abcdef.txt"  # no such process
    alive = tmp_path / f".embedlab-sentences-{os.getpid()}-abcdef.txt"
    dead.write_text("x\n")
    alive.write_text("x\n")
    with written(SENTENCES, tmp_path):
        pass
    assert [p.name for p in tmp_path.iterdir()] == [alive.name]


def _items(*items: Any) -> Iterator[Any]:
    yield ["fine", "sentence"]
    yield from items


@pytest.mark.parametrize(("item", "message"), [
    ("the cat sat", "corpus= item 1 is not a list of str: it is the str 'the cat sat'; pass each "
                    "sentence as a list of words (e.g. text.split()), not as one string"),
    (5, "corpus= item 1 is not a list of str: it is 5 (int); pass an iterable of sentences, "
        "each a list of words: [['the', 'cat', 'sat'], ...]"),
    (["a", 3], "corpus= item 1 is not a list of str: its token 1 is 3 (int); pass words as str"),
    (["a", b"b"], "corpus= item 1 is not a list of str: its token 1 is b'b' (bytes)"),
    (["new york"], "corpus= item 1 has token 0 'new york', which holds whitespace; a token is "
                   "one word: split it (str.split() with no argument), or join its parts "
                   "(new_york)"),
    (["a", ""], "corpus= item 1 has token 1 '', which is empty; leave empty strings out"),
    (["a", "b\n"], "corpus= item 1 has token 1 'b\\n', which holds whitespace"),
    (["a\0b"], "corpus= item 1 holds a NUL character; pass text"),
    (["a\udc80"], "corpus= item 1 holds '\\udc80', which is not UTF-8 text (a lone surrogate)"),
    (["x" * (MAX_TOKEN_CHARS + 1)], f"corpus= item 1 has a token longer than "
                                    f"{MAX_TOKEN_CHARS:,} characters"),
])
def test_what_a_file_cannot_hold_is_one_line_naming_the_item(
        tmp_path: Path, item: Any, message: str) -> None:
    with pytest.raises(InputError) as e, written(_items(item), tmp_path):
        pass
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []  # the file is gone
    assert not sentences_module._WRITTEN


def test_no_tokens_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^corpus= holds no tokens \(2 sentences, all empty\); "
                                         "pass an iterable of sentences"):
        write_sentences([[], []], tmp_path / "s.txt")
    with pytest.raises(InputError, match=r"^corpus= gave no sentences; pass an iterable"):
        write_sentences([], tmp_path / "s.txt")


def test_an_iterator_used_up_is_named_as_such(tmp_path: Path) -> None:
    """A generator read by an earlier call gives nothing the second time: the refusal says so
    rather than that the corpus is empty."""
    sentences = (s for s in [["a", "b"], ["c"]])
    assert write_sentences(sentences, tmp_path / "s.txt").tokens == 3
    with pytest.raises(InputError, match=r"^corpus= gave no sentences: this iterator was "
                                         r"empty, or used up before \(a generator, a file's "
                                         r"lines, gives its items once\); pass a new one, or a "
                                         "list$"):
        write_sentences(sentences, tmp_path / "s.txt")
    with pytest.raises(InputError, match="this iterator was empty, or used up before"):
        write_sentences((s for s in []), tmp_path / "s.txt")  # a new one that is empty


def test_an_oserror_of_the_sentences_is_theirs_not_a_failed_write(tmp_path: Path) -> None:
    def sentences() -> Iterator[list[str]]:
        yield ["a", "b"]
        with open(tmp_path / "missing.txt") as f:
            yield f.read().split()

    with pytest.raises(SentencesRaised) as e:
        write_sentences(sentences(), tmp_path / "s.txt")
    assert isinstance(e.value.error, FileNotFoundError)


def test_numpy_rows_of_words_are_sentences(tmp_path: Path) -> None:
    """A 2-D array of words (``np.str_`` rows) is read as gensim reads it: row by row."""
    import numpy as np

    rows = np.array([["the", "cat", "sat"], ["a", "dog", "ran"]])
    got = write_sentences(rows, tmp_path / "a.txt")
    want = write_sentences([["the", "cat", "sat"], ["a", "dog", "ran"]], tmp_path / "b.txt")
    assert (got.label, got.tokens) == (want.label, 6)
    assert (tmp_path / "a.txt").read_bytes() == b"the cat sat\na dog ran\n"
    with pytest.raises(InputError, match="item 0 is not a list of str"):
        write_sentences(np.array([[1, 2]]), tmp_path / "c.txt")
