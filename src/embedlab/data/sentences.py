"""Sentences given in memory as a corpus: ``embedlab.train(corpus=[["the", "cat"], ...])``,
gensim's ``Word2Vec(sentences=...)``.

The iterable is read once (it may be a generator) and written into a text file, one sentence per
line with its tokens separated by one space (:func:`write_sentences`). Preparing then reads that
file as it reads any corpus file (:mod:`embedlab.data.preparing`), so sentences given in memory
and the same sentences in a file give the same prepared corpus, bit for bit: the same vocabulary
rules, ``lowercase``, ``min_count``, ``max_vocab``, one sentence per item. The file is what lets a
generator be read only once, although preparing may read the corpus twice (more distinct words
than ``max_distinct``) and the run folder is chosen before anything is prepared.

A token must be what a file's reader would give: a non-empty ``str`` without whitespace or NUL,
encodable as UTF-8, of at most :data:`~embedlab.data.corpus.MAX_TOKEN_CHARS` characters. Anything
else is refused in one line naming the sentence, ``corpus= item N`` (N counts from 0, as the
iterable's items do); empty sentences are skipped, as empty lines are.

The sentences are named by their content: :func:`is_label` strings
``<iterable sha256:0123456789abcdef>``, the first 16 hex digits of the SHA-256 of the written
text. A run records that label as its corpus (config.json), so the same sentences resume a run
and other sentences are another corpus; the run keeps its prepared copy in ``RUN/prepared``. While
a call holds the written file (:func:`written`), :func:`written_file` finds it by its label.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import os
import secrets
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from embedlab.data.corpus import MAX_TOKEN_CHARS
from embedlab.errors import InputError
from embedlab.fsutil import clip

#: how a label starts; ">" ends it
LABEL_START = "<iterable sha256:"
_HEX_DIGITS = 16
#: bytes of text gathered before a write
_WRITE_BYTES = 1 << 20
#: the written files, ``.embedlab-sentences-<pid>-<random>.txt``
_FILE_PREFIX = ".embedlab-sentences-"

Sentences = Iterable[Sequence[str]]


class NoSentences(InputError):
    """``corpus=`` gave no token: nothing, or only empty sentences."""


def is_label(corpus: str) -> bool:
    """True for a corpus name that stands for sentences given in memory."""
    return corpus.startswith(LABEL_START) and corpus.endswith(">")


@dataclass(frozen=True)
class WrittenSentences:
    """Sentences written as text: ``path``, their ``label``, and how many there were."""

    path: Path
    label: str
    sentences: int  # non-empty ones
    tokens: int


class SentencesRaised(Exception):
    """An OSError raised by the caller's sentences themselves (a generator reading a file that
    is missing), carried past the handlers that name a failed write of ``path``."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def _items(sentences: Sentences) -> Iterator[object]:
    """The items of ``sentences``, an OSError of theirs raised as :class:`SentencesRaised`."""
    try:
        items = iter(sentences)  # an __iter__ may open its file here
    except OSError as exc:
        raise SentencesRaised(exc) from exc
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except OSError as exc:
            raise SentencesRaised(exc) from exc
        yield item


def write_sentences(sentences: Sentences, path: Path) -> WrittenSentences:
    """Write ``sentences`` into the text file ``path``, one per line; read them once.

    Raises :class:`InputError` for an item that is not a list (or tuple) of tokens, a token that
    a file could not hold, or no token at all, and :class:`SentencesRaised` for an OSError the
    sentences raise; ``path`` is left behind then (the caller removes it, see :func:`written`).
    """
    digest = hashlib.sha256()
    lines: list[bytes] = []
    size = count = tokens = items = 0
    with open(path, "wb") as f:
        for index, sentence in enumerate(_items(sentences)):
            items += 1
            sentence = _sentence(index, sentence)
            line = _line(index, sentence)
            if not line:
                continue
            if not count and line.startswith(codecs.BOM_UTF8):
                # the reader drops a byte-order mark that starts a file: one of its own keeps
                # the first token's ("\ufeffhello", read from a file opened as utf-8) intact
                f.write(codecs.BOM_UTF8)
            lines.append(line)
            size += len(line)
            count += 1
            tokens += len(sentence)
            if size >= _WRITE_BYTES:
                _write(f, digest, lines)
                lines, size = [], 0
        _write(f, digest, lines)
    if not tokens:
        raise _no_tokens(sentences, items)
    label = f"{LABEL_START}{digest.hexdigest()[:_HEX_DIGITS]}>"
    return WrittenSentences(path, label, count, tokens)


def _no_tokens(sentences: Sentences, items: int) -> NoSentences:
    if items:
        return NoSentences(f"corpus= holds no tokens ({items:,} sentences, all empty); pass an "
                           "iterable of sentences, each a list of words: "
                           "[['the', 'cat', 'sat'], ...]")
    if iter(sentences) is sentences:  # a generator or another iterator: it gives its items once
        return NoSentences("corpus= gave no sentences: this iterator was empty, or used up "
                           "before (a generator, a file's lines, gives its items once); pass a "
                           "new one, or a list")
    return NoSentences("corpus= gave no sentences; pass an iterable of sentences, each a list "
                       "of words: [['the', 'cat', 'sat'], ...]")


def _sentence(index: int, sentence: object) -> Sequence[str]:
    """``sentence`` as a list or tuple of tokens: a NumPy row of str (``np.str_`` tokens, as a
    2-D array of words gives them) is one, as gensim takes it."""
    if type(sentence).__module__ == "numpy" and getattr(sentence, "ndim", None) == 1 and \
            getattr(getattr(sentence, "dtype", None), "kind", None) in ("U", "O"):
        sentence = sentence.tolist()  # type: ignore[attr-defined]
    if not isinstance(sentence, (list, tuple)):
        raise _not_a_sentence(index, sentence)
    return sentence


def _write(f: IO[bytes], digest: hashlib._Hash, lines: list[bytes]) -> None:
    data = b"".join(lines)
    digest.update(data)
    f.write(data)


def _line(index: int, sentence: Sequence[str]) -> bytes:
    """``sentence`` as a line of the file (b"" for an empty one), or the error naming it."""
    try:
        line = " ".join(sentence)
    except TypeError:
        position, token = next((i, t) for i, t in enumerate(sentence) if not isinstance(t, str))
        raise InputError(f"corpus= item {index} is not a list of str: its token {position} is "
                         f"{clip(repr(token))} ({type(token).__name__}); pass words as str"
                         ) from None
    # the tokens a file's reader would find in the line: the same ones, or a token is refused
    if line.split() != (sentence if isinstance(sentence, list) else list(sentence)):
        position, token = next((i, t) for i, t in enumerate(sentence) if t.split() != [t])
        if not token:
            raise InputError(f"corpus= item {index} has token {position} '', which is empty; "
                             "leave empty strings out (str.split() with no argument gives none)")
        raise InputError(f"corpus= item {index} has token {position} {clip(repr(token))}, "
                         "which holds whitespace; a token is one word: split it (str.split() "
                         "with no argument), or join its parts (new_york)")
    if "\0" in line:
        raise InputError(f"corpus= item {index} holds a NUL character; pass text")
    if len(line) > MAX_TOKEN_CHARS and max(map(len, sentence)) > MAX_TOKEN_CHARS:
        raise InputError(f"corpus= item {index} has a token longer than {MAX_TOKEN_CHARS:,} "
                         "characters; pass words")
    try:
        return (line + "\n").encode("utf-8") if line else b""
    except UnicodeEncodeError as exc:
        raise InputError(f"corpus= item {index} holds {exc.object[exc.start:exc.end]!r}, "
                         "which is not UTF-8 text (a lone surrogate); decode the text with "
                         "errors='replace'") from None


def _not_a_sentence(index: int, item: object) -> InputError:
    if isinstance(item, str):
        return InputError(f"corpus= item {index} is not a list of str: it is the str "
                          f"{clip(repr(item))}; pass each sentence as a list of words (e.g. "
                          "text.split()), not as one string")
    return InputError(f"corpus= item {index} is not a list of str: it is {clip(repr(item))} "
                      f"({type(item).__name__}); pass an iterable of sentences, each a list of "
                      "words: [['the', 'cat', 'sat'], ...]")


#: label -> the written files of the calls that hold them, latest last
_WRITTEN: dict[str, list[Path]] = {}


@contextlib.contextmanager
def written(sentences: Sentences, folder: Path) -> Iterator[WrittenSentences]:
    """Write ``sentences`` into a hidden file in ``folder`` (:func:`write_sentences`), findable
    by its label (:func:`written_file`) during the block and deleted after it.

    Files left by a process that was killed are deleted first.
    """
    remove_orphans(folder)
    path = folder / f"{_FILE_PREFIX}{os.getpid()}-{secrets.token_hex(6)}.txt"
    try:
        result = write_sentences(sentences, path)
        _WRITTEN.setdefault(result.label, []).append(path)
        try:
            yield result
        finally:
            _WRITTEN[result.label].remove(path)
            if not _WRITTEN[result.label]:
                del _WRITTEN[result.label]
    finally:
        path.unlink(missing_ok=True)


def written_file(label: str) -> Path:
    """The file of the sentences named ``label``, written by a :func:`written` block that is
    running now; otherwise an :class:`InputError` asking for the sentences again."""
    files = _WRITTEN.get(label)
    if not files:
        raise InputError(f"corpus {label} names sentences given in memory, which are not at "
                         "hand now; pass the same sentences again as corpus= (a run that has "
                         "saved a checkpoint keeps them in RUN/prepared and needs them no more)")
    return files[-1]


def remove_orphans(folder: Path) -> None:
    """Delete the sentences files in ``folder`` whose writing process is gone (killed before it
    could remove its file: a full copy of its corpus)."""
    from embedlab.run.lock import pid_alive  # stdlib only

    for path in folder.glob(f"{_FILE_PREFIX}*.txt"):
        pid = path.name[len(_FILE_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            path.unlink(missing_ok=True)
