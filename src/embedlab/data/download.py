"""Download and cache text8 (the lecture's data set), verified by size and SHA-1.

The archive is streamed to a ``.part`` file next to its final place, checked, and only then
renamed, so the cache never holds a partial or unverified file: an existing ``text8`` in the
cache is complete by construction. The ``text8`` member is extracted the same way.
"""

from __future__ import annotations

import http.client
import os
import tempfile
import urllib.error
import urllib.request
import zipfile
import zlib
from pathlib import Path
from typing import IO

from tqdm import tqdm

from embedlab.errors import InputError, spell_metavar
from embedlab.fsutil import file_digest

TEXT8_URL = "http://mattmahoney.net/dc/text8.zip"
TEXT8_ZIP_SIZE = 31_344_016
# SHA-1 of text8.zip as verified by GluonNLP's Text8 data set
# (dmlc/gluon-nlp, src/gluonnlp/data/corpora/large_text_compression_benchmark.py:
#  archive_file = ('text8.zip', '6c70299b...'), the extracted 'text8' is '0dc3edeb...').
TEXT8_ZIP_SHA1 = "6c70299b93b7e1f927b42cd8f6ac1a31547c7a2e"
TEXT8_MEMBER = "text8"
CHUNK_BYTES = 1 << 20


def resolve_cache_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``explicit``, else embedlab's cache (:func:`embedlab.fsutil.cache_folder`:
    ``$EMBEDLAB_CACHE``, ``$XDG_CACHE_HOME/embedlab`` or ``~/.cache/embedlab``)."""
    from embedlab.fsutil import cache_folder

    return Path(explicit) if explicit is not None else cache_folder()


def fetch_text8(
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    url: str | None = None,
    progress: bool = True,
    expected_size: int | None = TEXT8_ZIP_SIZE,
    sha1: str | None = TEXT8_ZIP_SHA1,
    timeout: float = 60.0,
) -> Path:
    """Return the path of the extracted ``text8`` file, downloading it on first use.

    ``url`` defaults to ``$EMBEDLAB_TEXT8_URL`` or :data:`TEXT8_URL`. ``expected_size`` (bytes)
    and ``sha1`` (hex) check the archive; ``None`` skips a check (tests). Any failure raises
    :class:`InputError` naming the URL and the reason, and leaves nothing in the cache.
    """
    url = url or os.environ.get("EMBEDLAB_TEXT8_URL") or TEXT8_URL
    folder = resolve_cache_dir(cache_dir)
    target = folder / TEXT8_MEMBER
    if not target.is_file() and cache_dir is None and not os.environ.get("EMBEDLAB_CACHE"):
        # downloaded where the cache was before it followed $XDG_CACHE_HOME: read there
        earlier = Path.home() / ".cache" / "embedlab" / TEXT8_MEMBER
        if earlier.is_file():
            target = earlier
    if target.is_file():
        _note_local_copy(target)
        return target
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the cache folder {folder} ({exc.strerror or exc}); "
                         "set EMBEDLAB_CACHE to a writable folder or pass "
                         f"{spell_metavar('--corpus', 'PATH')}") from None
    archive = folder / "text8.zip"
    if not (archive.is_file() and _verify(archive, expected_size, sha1) is None):
        _download(url, archive, expected_size=expected_size, sha1=sha1, progress=progress,
                  timeout=timeout)
    _extract(archive, target, url)
    archive.unlink()  # the extracted file is all we need; keep the cache at 100 MB
    _note_local_copy(target)  # once it is there: a failed download says its own line
    return target


def _note_local_copy(target: Path) -> None:
    """word2vec.c's demo script leaves a ``text8`` in the working folder: the name means the
    data set, not that file, so a file of that name here gets one line saying how to use it."""
    here = Path(TEXT8_MEMBER)
    try:
        if not here.is_file() or (target.is_file() and here.samefile(target)):
            return
    except OSError:
        return
    from embedlab.errors import note

    note(f"'text8' names the data set, read from the cache ({target}), not the file text8 in "
         "this folder; pass ./text8 to use that file")


def _fail(url: str, reason: str) -> InputError:
    # 'train --corpus text8' and 'prepare text8' both get here: name the spelling of each
    return InputError(f"could not download text8 from {url} ({reason}); check your network "
                      f"or use a local copy instead of 'text8' ({_local_copy()})")


def _local_copy() -> str:
    """How to use a local copy: ``./text8`` where word2vec.c's demo script left one in the
    working folder (the name 'text8' means the data set, so that file is not read)."""
    if Path(TEXT8_MEMBER).is_file():
        return "pass ./text8 to use the file text8 in this folder"
    return LOCAL_COPY


def _cache_error(folder: Path, exc: OSError) -> InputError:
    # Not the network's fault: a full disk or a read-only cache. What was verified stays.
    return InputError(f"cannot write text8 into the cache folder {folder} "
                      f"({exc.strerror or exc}); free some space or set EMBEDLAB_CACHE to "
                      f"another folder, or use a local copy instead of 'text8' ({_local_copy()})")


LOCAL_COPY = "embedlab train --corpus PATH, or embedlab prepare PATH"


def _part_file(final: Path) -> tuple[int, Path]:
    """A new ``.part`` file next to ``final`` (fd, path)."""
    try:
        fd, name = tempfile.mkstemp(prefix=final.name + ".", suffix=".part", dir=final.parent)
    except OSError as exc:
        raise _cache_error(final.parent, exc) from None
    return fd, Path(name)


def _download(
    url: str, archive: Path, *, expected_size: int | None, sha1: str | None, progress: bool,
    timeout: float,
) -> None:
    fd, part = _part_file(archive)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    length = resp.headers.get("Content-Length")
                    total = int(length) if length and length.isdigit() else expected_size
                    _copy(resp, out, total, progress, desc="text8.zip")
            except _WriteError as exc:
                raise _cache_error(archive.parent, exc.error) from None
            except urllib.error.HTTPError as exc:
                raise _fail(url, f"HTTP {exc.code} {exc.reason}") from None
            except urllib.error.URLError as exc:
                raise _fail(url, str(exc.reason)) from None
            # timeouts, resets, malformed URLs; a transfer cut short (IncompleteRead, which is
            # not an OSError)
            except (OSError, ValueError, http.client.HTTPException) as exc:
                raise _fail(url, str(exc) or type(exc).__name__) from None
            try:
                out.flush()
                os.fsync(out.fileno())
            except OSError as exc:
                raise _cache_error(archive.parent, exc) from None
        problem = _verify(part, expected_size, sha1)
        if problem is not None:
            raise _fail(url, problem)
        part.replace(archive)
    finally:
        part.unlink(missing_ok=True)


class _WriteError(Exception):
    """Writing the copy failed (disk full...), as opposed to reading its source."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def _copy(src: IO[bytes], dst: IO[bytes], total: int | None, progress: bool, desc: str) -> None:
    with tqdm(total=total, unit="iB", unit_scale=True, unit_divisor=1024, desc=desc,
              disable=None if progress else True, leave=False) as bar:
        while chunk := src.read(CHUNK_BYTES):
            try:
                dst.write(chunk)
            except OSError as exc:
                raise _WriteError(exc) from None
            bar.update(len(chunk))


def _verify(path: Path, expected_size: int | None, sha1: str | None) -> str | None:
    """None when ``path`` matches; otherwise what is wrong, in words."""
    size = path.stat().st_size
    if expected_size is not None and size != expected_size:
        return f"got {size:,} bytes, expected {expected_size:,}"
    if sha1 is not None:
        digest = _sha1(path)
        if digest != sha1.lower():
            return f"SHA-1 {digest} does not match the published {sha1}"
    return None


def _sha1(path: Path) -> str:
    return file_digest(path, "sha1")


def _extract(archive: Path, target: Path, url: str) -> None:
    fd, part = _part_file(target)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with zipfile.ZipFile(archive) as zf, zf.open(TEXT8_MEMBER) as member:
                    _copy(member, out, None, False, desc=TEXT8_MEMBER)
            except _WriteError as exc:  # the archive is fine: keep it for the next try
                raise _cache_error(target.parent, exc.error) from None
            except (zipfile.BadZipFile, KeyError, OSError, EOFError, zlib.error) as exc:
                archive.unlink(missing_ok=True)
                raise _fail(url, f"the archive is not a zip holding '{TEXT8_MEMBER}': {exc}"
                            ) from None
            try:
                out.flush()
                os.fsync(out.fileno())
            except OSError as exc:
                raise _cache_error(target.parent, exc) from None
        try:
            part.replace(target)
        except OSError as exc:
            raise _cache_error(target.parent, exc) from None
    finally:
        part.unlink(missing_ok=True)
