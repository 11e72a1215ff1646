"""Corpus readers: whitespace tokens from text files, in bounded memory.

Supported inputs: a text file (text8's single 100 MB line or one sentence per line), the same
compressed as ``.gz`` / ``.bz2`` / ``.xz``, or a folder of such files (recursively, sorted by
path, hidden files skipped). Tokens are separated by any whitespace (``str.split()``); a newline
ends a sentence, and so does the end of each file.

Memory is bounded by :data:`PIECE_BYTES`: files are read in pieces of that many bytes and decoded
with an incremental UTF-8 decoder, a token cut by a piece boundary is carried into the next piece,
and a line is never held whole. Invalid UTF-8 is replaced by U+FFFD and counted in
:attr:`ReadStats.invalid_utf8`; the caller decides how to warn about it.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import json
import lzma
import os
import shlex
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from embedlab.errors import InputError, MissingFileError, python_caller

#: bytes read from a (decompressed) file per piece; bounds the size of a block.
PIECE_BYTES = 1 << 20
#: a "token" longer than this (in characters) means the input is not whitespace-separated text.
MAX_TOKEN_CHARS = 1 << 20
#: share of U+FFFD replacements in a file's first piece above which the file is called binary...
BINARY_REPLACEMENT_SHARE = 0.10
#: ...provided there are at least this many: a short file with a few Latin-1 accents is text
#: with some invalid UTF-8 (replaced and counted), not binary.
BINARY_MIN_INVALID = 64

COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz")
#: meta.json's "format" in a folder made by 'embedlab prepare'
PREPARED_FORMAT = "embedlab-prepared"
#: --corpus names that are not paths (use ``./text8`` for a local file called text8)
SPECIAL_CORPORA = ("text8", "demo")


def corpus_label(corpus: str | os.PathLike[str]) -> str:
    """A corpus argument as a label: a str as given ('demo' and 'text8' name the built-in
    corpora); an ``os.PathLike`` spelled so names the file or folder of that name here where
    there is one — ``Path("./demo")`` is ``Path("demo")``, and the str './demo' that names the
    file is what a Path cannot spell. With none here it names the built-in corpus."""
    label = os.fspath(corpus)
    if not isinstance(corpus, str) and label in SPECIAL_CORPORA and os.path.lexists(label):
        return os.path.join(os.curdir, label)
    return label


Block = tuple[list[str], bool]


@dataclass
class ReadStats:
    """Counters filled in while reading; pass one instance to :func:`iter_blocks`.

    ``tokens``: tokens yielded; ``invalid_utf8``: invalid byte sequences replaced by U+FFFD;
    ``files``: files opened; ``sentences``: sentences ended (lines with at least one token);
    ``source_bytes``: bytes consumed from disk (compressed size for compressed files).
    """

    tokens: int = 0
    invalid_utf8: int = 0
    files: int = 0
    sentences: int = 0
    source_bytes: int = 0
    paths: list[Path] = field(default_factory=list)
    #: the files that had invalid sequences, with how many (the warning names them)
    invalid_files: dict[Path, int] = field(default_factory=dict)

    def add_invalid(self, path: Path, count: int) -> None:
        if count:
            self.invalid_utf8 += count
            self.invalid_files[path] = self.invalid_files.get(path, 0) + count


# ---- counting replacements -------------------------------------------------------------------
# The stock "replace" handler does not say how often it fired, and counting U+FFFD in the output
# would also count genuine U+FFFD characters in the input. A custom handler that replaces exactly
# like "replace" and bumps a per-thread counter is exact and costs nothing on valid input.
_ERRORS = "embedlab-count-replace"
_tls = threading.local()


def _count_replace(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    _tls.count = getattr(_tls, "count", 0) + 1
    return "\ufffd", exc.end


codecs.register_error(_ERRORS, _count_replace)


def _decode(decoder: codecs.IncrementalDecoder, data: bytes, final: bool) -> tuple[str, int]:
    """Decode a piece; return the text and how many replacements it needed."""
    _tls.count = 0
    text = decoder.decode(data, final)
    return text, _tls.count


# ---- files ------------------------------------------------------------------------------------
def list_files(path: Path) -> list[Path]:
    """The files a corpus path stands for (a file, or a folder's files sorted by path)."""
    if str(path) == "-" and not path.exists():
        raise InputError("corpus '-': embedlab reads a corpus from files (twice: to count the "
                         "words, then to map them), not from standard input; save the text to "
                         "a file and pass its path")
    if not path.exists():
        if path.is_symlink():
            raise InputError(f"corpus {path} is a symbolic link to nothing that exists (a "
                             f"loop, or its target {os.readlink(path)} is gone); pass the file "
                             "or folder itself")
        # also a FileNotFoundError: a Python caller's `except OSError` catches it
        raise MissingFileError(f"corpus not found: {path}; pass an existing file or folder, "
                               "'text8' (downloads it) or 'demo'", path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError(f"corpus {path} is not a regular file or folder; pass a text file "
                         "or a folder of text files")
    if not os.access(path, os.R_OK | os.X_OK):
        raise _unreadable_folder(path, path)
    if not (path / "meta.json").exists() and (path / "ids.u32").is_file() and \
            (path / "vocab.tsv").is_file():
        raise InputError(f"{path} looks like a prepared corpus that lost its meta.json "
                         f"(damaged); {remake_fix(path)}")
    if (path / "meta.json").is_file() and (path / "ids.u32").is_file():
        if says_prepared(path / "meta.json"):
            train, prepare = (("train(corpus=...)", "prepare()") if python_caller() else
                              ("'train --corpus'", "'prepare'"))
            raise InputError(f"{path} is a prepared corpus, not raw text; pass it to {train} "
                             f"or pass the original text file to {prepare}")
        raise InputError(f"{path} looks like a damaged prepared corpus (its meta.json is not "
                         f"readable as one); {remake_fix(path)}")
    if (path / "config.json").is_file() and (path / "checkpoints").is_dir():
        # a run folder: its checkpoints' tensors would be read as text and refused as binary
        prepared = path / "prepared"
        copy = (f", or its prepared copy {prepared}" if (prepared / "meta.json").is_file()
                else "")
        raise InputError(f"{path} is a training run's folder, not a corpus; pass the corpus it "
                         f"was trained on (data.corpus in {path / 'config.json'}){copy}")
    files = _folder_files(path)
    if not files:
        hidden = any(p.is_file() for p in path.rglob(".*"))
        skipped = " but hidden ones (names starting with '.', which a corpus folder skips)" \
            if hidden else ""
        raise InputError(f"corpus folder {path} holds no files{skipped}; put text files in it "
                         "(plain, .gz, .bz2 or .xz)")
    for meta in (f for f in files if f.name == "meta.json" and says_prepared(f)):
        # its ids.u32 would be read as text and refused as binary
        train = "train(corpus=...)" if python_caller() else "'train --corpus'"
        raise InputError(f"corpus folder {path} holds a prepared corpus, {meta.parent}; move "
                         f"it out of the folder (or pass it to {train} on its own)")
    return files


def _folder_files(path: Path) -> list[Path]:
    """The files below the folder ``path``, sorted, without hidden ones (a name starting with
    '.', or inside such a folder) and without following links to folders. A folder below that
    cannot be read is refused: skipping it would leave its text out unsaid."""
    def refuse(exc: OSError) -> None:
        raise _unreadable_folder(Path(exc.filename or path), path)

    files = []
    for root, dirs, names in os.walk(path, onerror=refuse):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            p = Path(root) / name
            if not name.startswith(".") and p.is_file():
                files.append(p)
    return sorted(files)


def _unreadable_folder(folder: Path, corpus: Path) -> InputError:
    inside = "" if folder == corpus else f" (in the corpus folder {corpus})"
    return InputError(f"cannot read the folder {folder}{inside}: permission denied; give your "
                      f"user permission to read it (chmod u+rx {shlex.quote(str(folder))})"
                      + ("" if folder == corpus else ", or move it out of the corpus folder"))


def remake_fix(path: Path) -> str:
    """How to make again the damaged prepared folder ``path`` (or the folder of its file): a
    run's own copy is deleted, and the resume prepares it again from the run's corpus (with the
    run's options); a folder of nothing but a prepared corpus's files is made again in place
    with ``prepare --force``; a prepared corpus with other files beside it, once they are moved
    out (``--force`` never deletes other files); any other folder is deleted first."""
    folder = path if path.is_dir() or path.suffix == "" else path.parent
    if folder.name == "prepared" and (folder.parent / "config.json").is_file():
        return f"delete {folder}: resuming the run prepares it again from its corpus"
    python = python_caller()

    def prepare(force: bool) -> str:
        if python:
            return f"prepare(CORPUS, {os.fspath(folder)!r}{', force=True' if force else ''})"
        return f"'embedlab prepare CORPUS --out {folder}{' --force' if force else ''}'"

    if holds_prepared_files_only(folder):
        return f"re-create it with {prepare(True)}"
    if says_prepared(folder / "meta.json"):  # and other files, which --force would delete
        return (f"move the files that are not the prepared corpus's out of {folder}, then "
                f"re-create it with {prepare(True)}")
    return f"delete {folder}, then re-create it with {prepare(False)}"


#: the files of a prepared folder (embedlab.data.prepared names each)
PREPARED_FILES = frozenset({"ids.u32", "sentences.i64", "vocab.tsv", "meta.json"})


def holds_prepared_files_only(folder: Path) -> bool:
    """A folder holding nothing but a prepared corpus's files, its ids or its meta.json among
    them: one that ``prepare --force`` may replace when its meta.json does not say prepared
    (damaged, or lost)."""
    try:
        names = {p.name for p in folder.iterdir()}
    except OSError:
        return False
    return bool(names & {"meta.json", "ids.u32"}) and names <= PREPARED_FILES


def other_entries(folder: Path) -> list[str]:
    """The names in ``folder`` that are not a prepared corpus's files, sorted (none for a folder
    that cannot be listed)."""
    try:
        return sorted(p.name for p in folder.iterdir() if p.name not in PREPARED_FILES)
    except OSError:
        return []


def vocabulary_fix(path: str | os.PathLike[str]) -> str:
    """How to make a damaged ``vocab.tsv`` good again: that of a prepared folder with the
    folder (:func:`remake_fix`); a run's own copy from its prepared corpus."""
    file = Path(path)
    folder = file.parent
    if says_prepared(folder / "meta.json") or (folder.name == "prepared" and
                                               (folder.parent / "config.json").is_file()):
        return remake_fix(folder)
    if (folder / "config.json").is_file() and (folder / "prepared" / "vocab.tsv").is_file():
        return f"copy {folder / 'prepared' / 'vocab.tsv'} to {file}"
    corpus = _trained_on(folder)
    if corpus is not None:  # a run on a prepared folder: its vocabulary is that folder's
        return (f"copy the vocab.tsv of the prepared corpus the run trained on ({corpus}) to "
                f"{file}")
    return "re-run 'embedlab prepare' to recreate the vocabulary"


def _trained_on(run: Path) -> str | None:
    """The corpus a run folder's config.json names, where that is a prepared folder's path."""
    try:
        corpus = json.loads((run / "config.json").read_text(encoding="utf-8"))["data"]["corpus"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(corpus, str) or corpus in SPECIAL_CORPORA or corpus.startswith("<"):
        return None
    return corpus


def says_prepared(meta: Path) -> bool:
    """True when the JSON file ``meta`` declares a prepared corpus (see embedlab.data.prepared,
    which imports this module)."""
    try:
        return bool(json.loads(meta.read_text(encoding="utf-8")).get("format") == PREPARED_FORMAT)
    except (OSError, ValueError, AttributeError):
        return False


_DECOMPRESSORS: dict[str, Callable[[io.BufferedReader], io.BufferedIOBase]] = {
    ".gz": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
    ".bz2": lambda raw: bz2.BZ2File(raw, mode="rb"),
    ".xz": lambda raw: lzma.LZMAFile(raw, mode="rb"),  # noqa: SIM115 - caller closes it
}


def unreadable_file(path: Path | str, exc: OSError) -> InputError:
    """The refusal of a corpus file that cannot be opened or looked at."""
    return InputError(f"cannot read corpus file {path} ({exc.strerror or exc}); check the path "
                      "and its permissions")


def _open_source(path: Path) -> tuple[io.BufferedIOBase, io.BufferedReader]:
    """Open ``path`` for reading decompressed bytes; also return the raw file (for progress)."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
    except OSError as exc:
        raise unreadable_file(path, exc) from None
    wrap = _DECOMPRESSORS.get(path.suffix.lower())
    return (wrap(raw) if wrap else raw), raw


def _read(stream: io.BufferedIOBase, path: Path) -> bytes:
    try:
        return stream.read(PIECE_BYTES)
    except (OSError, EOFError, lzma.LZMAError, zlib.error) as exc:
        raise InputError(f"cannot decompress corpus file {path} ({exc}); the file is damaged "
                         "or not in the format its suffix says — re-download or re-compress it"
                         ) from None


#: the first bytes of files that turn up in corpus folders and are not text
_NOT_TEXT = ((b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"),
             (b"GIF8", "a GIF image"), (b"%PDF", "a PDF document"),
             (b"\x7fELF", "a program (ELF)"), (b"\x93NUMPY", "a NumPy array (.npy)"))


#: the compressed files embedlab reads, by their first bytes: (magic, suffix, name, the tool
#: that decompresses them)
_COMPRESSED = ((b"\x1f\x8b", ".gz", "gzip", "gunzip"), (b"BZh", ".bz2", "bzip2", "bunzip2"),
               (b"\xfd7zXZ\x00", ".xz", "xz", "unxz"))


def _unmarked_utf16(head: bytes) -> str | None:
    """``utf-16le`` or ``utf-16be`` for text in that encoding without a byte-order mark
    (``iconv -t utf-16le`` writes none): mostly Latin text, whose every other byte is NUL
    (``looks binary`` would send the user the wrong way); else None."""
    sample = head[:4096]
    if len(sample) < 16:
        return None
    even, odd = sample[0::2], sample[1::2]

    def zeros(half: bytes) -> float:
        return half.count(0) / len(half)

    def text(half: bytes) -> float:  # printable ASCII and whitespace: the letters' low bytes
        return sum(32 <= b < 127 or b in b"\t\n\r" for b in half) / len(half)

    if zeros(odd) > 0.9 and text(even) > 0.9:
        return "utf-16le"
    if zeros(even) > 0.9 and text(odd) > 0.9:
        return "utf-16be"
    return None


def _binary_error(path: Path, why: str, head: bytes = b"") -> InputError:
    """A corpus file that is not UTF-8 text, in the words that fit what it is: an archive
    (text8.zip), text in another encoding (Latin-1: invalid sequences, no NUL), or binary."""
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return InputError(f"corpus file {path} is a zip archive; unzip it "
                          f"(unzip {shlex.quote(str(path))}) and pass the file or folder it "
                          "holds, with the archive moved out of a corpus folder (.gz, .bz2 and "
                          ".xz are read as they are)")
    if head.startswith((b"\x28\xb5\x2f\xfd", b"7z\xbc\xaf", b"Rar!")):
        return InputError(f"corpus file {path} is an archive or compressed file embedlab does "
                          "not read (it reads .gz, .bz2 and .xz); extract it and pass the text")
    for magic, suffix, name, tool in _COMPRESSED:
        if head.startswith(magic) and path.suffix.lower() != suffix:
            return InputError(f"corpus file {path} is {name}-compressed but not named {suffix}; "
                              f"rename it to {path.name}{suffix} (or {tool} it) and pass that")
    # the byte-order marks of UTF-32 (first: UTF-16's is the start of its little-endian one)
    # and UTF-16 (the one Windows writes); a compressed file's are those of its text
    encoding = "utf-32" if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")) else \
        "utf-16" if head.startswith((b"\xff\xfe", b"\xfe\xff")) else _unmarked_utf16(head)
    if encoding is not None:
        compressed = path.suffix.lower() in _DECOMPRESSORS
        how = "decompress it, convert the text" if compressed else "convert it"
        return InputError(f"corpus file {path} is {encoding.upper()} text, not UTF-8; {how} "
                          f"(e.g. iconv -f {encoding} -t utf-8) into a new file outside the "
                          "corpus's folder, and pass that")
    kind = next((name for magic, name in _NOT_TEXT if head.startswith(magic)), None)
    if kind is not None:
        return InputError(f"corpus file {path} is {kind}, not text; pass UTF-8 text with "
                          "whitespace-separated tokens (move such files out of a corpus folder)")
    if "NUL" not in why:  # invalid sequences, no NUL byte: text in another encoding
        compressed = path.suffix.lower() in _DECOMPRESSORS
        how = "decompress it, convert the text" if compressed else "convert it"
        return InputError(f"corpus file {path} is not UTF-8 text ({why}: another encoding, "
                          f"such as Latin-1?); {how} to UTF-8 (e.g. iconv -f latin1 -t utf-8) "
                          "into a new file outside the corpus's folder, and pass that")
    return InputError(f"corpus file {path} looks binary ({why}); pass UTF-8 text with "
                      "whitespace-separated tokens (move such files out of a corpus folder)")


# ---- tokenising -------------------------------------------------------------------------------
def _split_piece(text: str, carry: str, path: Path, lowercase: bool) -> tuple[list[Block], str]:
    """Split ``carry + text`` into per-line blocks; return them and the new carry.

    The last, unfinished line yields its complete tokens with ``False``; a token touching the end
    of the piece may continue in the next piece, so it is carried over — not yet lowercased:
    lowercasing depends on a letter's neighbours (a final Σ becomes ς, another σ), so a token is
    lowercased only once it is whole, whatever the piece boundaries.
    """
    _check_completed(carry, text, path)
    text = carry + text
    if text and not text[-1].isspace():
        text, new_carry = _cut_last_token(text)
    else:
        new_carry = ""
    if len(new_carry) > MAX_TOKEN_CHARS:  # refused early: the carry is held in memory
        _too_long(path)
    if lowercase:
        text = text.lower()
    lines = text.split("\n")
    blocks: list[Block] = [(line.split(), True) for line in lines[:-1]]
    blocks.append((lines[-1].split(), False))
    return blocks, new_carry


def _check_completed(carry: str, text: str, path: Path) -> None:
    """Refuse the carried token once ``text`` completes it, if the whole is too long.

    Checking only the carry missed a token whose last part came with the next piece, so the
    same token was refused or accepted depending on where the piece boundaries fell. A token
    inside one piece needs no check: a piece has at most PIECE_BYTES <= MAX_TOKEN_CHARS
    characters.
    """
    if not carry or len(carry) + len(text) <= MAX_TOKEN_CHARS:
        return
    rest = 0 if text[0].isspace() else len(text.split(maxsplit=1)[0])
    if len(carry) + rest > MAX_TOKEN_CHARS:
        _too_long(path)


def _too_long(path: Path) -> NoReturn:
    raise InputError(f"corpus file {path} has a 'word' longer than {MAX_TOKEN_CHARS:,} "
                     "characters; pass whitespace-separated text")


def _cut_last_token(tail: str) -> tuple[str, str]:
    # rsplit(maxsplit=1) splits on the last whitespace run, with str.split()'s whitespace rules.
    # A newline is whitespace, so the carried token never spans a line end.
    parts = tail.rsplit(maxsplit=1)
    if len(parts) == 2:
        return tail[: len(tail) - len(parts[1])], parts[1]
    return "", tail


def _file_blocks(
    path: Path, lowercase: bool, stats: ReadStats, progress: Callable[[int], None] | None
) -> Iterator[Block]:
    """Raw per-file blocks (may include empty token lists); the file's end ends a sentence."""
    stream, raw = _open_source(path)
    # utf-8-sig: a byte-order mark at the start of a file (Windows editors write one) is not
    # part of the first word; elsewhere U+FEFF is kept as it is.
    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors=_ERRORS)
    carry, first, done_bytes = "", True, 0
    with raw, stream:
        while True:
            data = _read(stream, path)
            final = not data
            if first and b"\x00" in data:
                raise _binary_error(path, "it contains NUL bytes", data[:4096])
            text, bad = _decode(decoder, data, final)
            if first and bad >= BINARY_MIN_INVALID and bad > len(text) * BINARY_REPLACEMENT_SHARE:
                raise _binary_error(path, f"{bad:,} invalid UTF-8 sequences in its first "
                                          f"{len(data):,} bytes", data[:8])
            first = False
            stats.add_invalid(path, bad)
            pos = raw.tell()
            stats.source_bytes += pos - done_bytes
            if progress is not None:
                progress(pos - done_bytes)
            done_bytes = pos
            if final:
                _check_completed(carry, text, path)
                text = carry + text
                if lowercase:
                    text = text.lower()
                yield from ((line.split(), True) for line in text.split("\n"))
                return
            blocks, carry = _split_piece(text, carry, path, lowercase)
            yield from blocks


def _merge_ends(blocks: Iterator[Block]) -> Iterator[Block]:
    """Drop empty blocks, moving a sentence end onto the block before it.

    Holding back one block means a consumer never sees an empty token list and every sentence's
    last block carries ``True``.
    """
    pending: list[str] | None = None
    for tokens, ends in blocks:
        if not tokens:
            if ends and pending is not None:
                yield pending, True
                pending = None
            continue
        if pending is not None:
            yield pending, False
        if ends:
            yield tokens, True
            pending = None
        else:
            pending = tokens
    if pending is not None:
        yield pending, True


def iter_blocks(
    path: str | os.PathLike[str],
    *,
    lowercase: bool = False,
    stats: ReadStats | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[Block]:
    """Yield ``(tokens, ends_sentence)`` blocks from a corpus file or folder.

    Invariants: ``tokens`` is never empty; a block holds tokens of one sentence only and at most
    about :data:`PIECE_BYTES` bytes of text; the last block of each sentence (line, or file end)
    has ``ends_sentence=True``. ``progress`` (optional) is called with the number of bytes
    consumed from disk since its previous call. Raises :class:`InputError` for a missing,
    unreadable, damaged or binary file, naming the file.
    """
    stats = stats if stats is not None else ReadStats()
    for file in list_files(Path(path)):
        stats.files += 1
        stats.paths.append(file)
        for tokens, ends in _merge_ends(_file_blocks(file, lowercase, stats, progress)):
            stats.tokens += len(tokens)
            stats.sentences += ends
            yield tokens, ends


def total_source_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes on disk of all files of a corpus (the total for a progress bar)."""
    return sum(p.stat().st_size for p in list_files(Path(path)))
