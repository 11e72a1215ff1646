"""Atomic file writes: readers see the old file or the new one, never a mix.

Everything embedlab persists (checkpoint index, config/env/status JSON, metrics.jsonl, exports,
the demo corpus) goes through these: write a temporary sibling, fsync it, ``os.replace`` it over
the target, then fsync the folder so the rename itself survives a crash. The result gets the mode
a plain ``open()`` would give (``0o666 & ~umask``), not ``mkstemp``'s private 0600.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from embedlab.errors import InputError


def fsync_dir(path: Path) -> None:
    """Make a rename/creation inside ``path`` durable (no-op where directories can't be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the rename is still atomic
    finally:
        os.close(fd)


_PROC_STATUS = "/proc/self/status"


def current_umask() -> int:
    """The process umask, read without changing it.

    The classic ``os.umask(x); os.umask(old)`` round trip sets a wrong umask for a moment, and a
    file another thread creates in that moment gets the wrong mode; Linux (4.7+) reports the
    umask in /proc/self/status, so the round trip is only the fallback.
    """
    try:
        with open(_PROC_STATUS, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def limit_fix(exc: OSError) -> str | None:
    """The fix of a write that failed on a limit of this process rather than on the disk: too
    many open files (EMFILE, ENFILE) or a file over the file size limit (EFBIG); else None."""
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return "raise the open-file limit (ulimit -n 1024 or more)"
    if exc.errno == errno.EFBIG:
        return "raise the file size limit (ulimit -f unlimited)"
    return None


def disk_fix(exc: OSError) -> str | None:
    """The fix of a write that failed on its disk (full, over a quota, read-only, failing) or on
    a limit of this process (:func:`limit_fix`); else None."""
    if exc.errno == errno.ENOSPC:
        return "free space on the disk"
    if exc.errno == errno.EDQUOT:
        return "free space within your disk quota"
    if exc.errno == errno.EROFS:
        return "make the disk writable (it is mounted read-only)"
    if exc.errno == errno.EIO:
        return "check the disk (an input/output error: a failing disk, or a network file " \
            "system that went away)"
    return limit_fix(exc)


#: the errors of a disk, not of a path, that a write names no file for (os.write, fsync)
DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


def name_disk_error(exc: BaseException, path: Path | str) -> None:
    """Give a disk's error of a write to ``path`` that names no file (os.write, fsync) its
    file, for the message that tells it."""
    if isinstance(exc, OSError) and exc.filename is None and exc.errno in DISK_ERRORS:
        exc.filename = os.fspath(path)


def write_error(path: Path | str, exc: OSError, flag: str, *, retry: str = "",
                note: str = "") -> InputError:
    """The one-line error for an output ``path`` (named by ``flag``) that cannot be written.

    ``retry`` follows the full-disk fix (e.g. ", then re-run the export"); ``note`` ends the
    message whatever the cause (e.g. " (OUT is left as it was)").
    """
    why = exc.strerror or str(exc)
    fix = elsewhere_fix(exc, flag)
    fix = f"{fix}{retry}" if fix is not None else f"pass {flag} in a writable folder"
    return InputError(f"cannot write {path} ({why}); {fix}{note}")


def elsewhere_fix(exc: OSError, flag: str) -> str | None:
    """The fix of a write that failed on its disk or a limit, with the other disk ``flag``
    names as the way round it; None for another error (permissions: the folder is the fix)."""
    if exc.errno == errno.ENOSPC:
        return f"free disk space or pass {flag} on another disk"
    if exc.errno in (errno.EDQUOT, errno.EROFS, errno.EIO):  # said as what they are
        return f"{disk_fix(exc)}, or pass {flag} on another disk"
    if exc.errno == errno.EFBIG:  # the shell's file size limit, or the file system's
        return (f"raise the file size limit (ulimit -f unlimited) or pass {flag} on a file "
                "system that takes larger files")
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return limit_fix(exc)
    return None


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


#: the most a small record of a run (a manifest, an index, a lock, status.json) may hold
RECORD_LIMIT = 16 << 20
_RECORD_PIECE = 1 << 16


def read_record(path: Path, limit: int = RECORD_LIMIT) -> bytes:
    """The bytes of a small record file, read only if it is a regular file of at most ``limit``
    bytes: a FIFO there (a run folder from someone else) would block the reader for ever, and a
    link to /dev/zero fill its memory. Raises ``FileNotFoundError`` when it is missing and
    ``OSError`` (errno EINVAL) naming what it is otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without a writer
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "a special file")
            raise OSError(errno.EINVAL, f"not a regular file but {kind}", str(path))
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"{st.st_size:,} bytes, more than such a file holds "
                          f"({limit:,})", str(path))
        # in pieces: one read of limit + 1 bytes would allocate 16 MiB for every status.json,
        # and glibc's malloc, after the first such block, keeps later blocks of that size on
        # the heap instead of handing them back (its mmap threshold rises): +18 MiB of peak RSS
        parts, total = [], 0
        while part := os.read(fd, min(_RECORD_PIECE, limit + 1 - total)):
            parts.append(part)
            total += len(part)
            if total > limit:  # grown since fstat
                raise OSError(errno.EFBIG, f"more than {limit:,} bytes, more than such a file "
                              "holds", str(path))
        return b"".join(parts)
    finally:
        os.close(fd)


def checked_path(name: str, value: Any, what: str, also: str = "") -> str | os.PathLike[str]:
    """A Python call's path argument ``name`` (the path of ``what``; ``also``: what else it
    takes), refused in one line unless a str or os.PathLike: a NumPy or Path call's TypeError
    names neither the argument nor the fix, and ``open`` reads an int as a file descriptor."""
    if isinstance(value, os.PathLike):  # os.scandir(b".")'s entries give bytes
        spelled = os.fspath(value)
        value = value if isinstance(spelled, str) else spelled
    if isinstance(value, str | os.PathLike):
        return value
    if isinstance(value, bytes | bytearray):
        raise InputError(f"{name}= is bytes ({clip(repr(value))}); pass the path as a str "
                         f"({name}={os.fsdecode(bytes(value))!r})")
    raise InputError(f"{name}= must be the path of {what} (a str or os.PathLike){also}, got "
                     f"{type(value).__name__} {clip(repr(value))}")


def output_target(path: Path, fix: str = "remove it or choose another file path") -> Path:
    """The file that an atomic write of ``path`` replaces: ``path`` itself, or the regular file a
    symbolic link at ``path`` points to (so the link survives, as with a plain ``open()``).

    Raises a one-line :class:`InputError` ending in ``fix`` when ``path`` exists but is not a
    regular file (a folder, FIFO, socket, device) or is a link to nothing: renaming a new file
    over it would silently replace, say, ``/dev/null`` or a named pipe with an ordinary file.
    """
    path = Path(path)
    if _names_a_descriptor(path):
        # /dev/stdout redirected to a file resolves to that file: replacing it by rename would
        # cut off what else the shell sends there (its lines before and after are lost)
        raise InputError(f"{path} names an open file of this process (standard output or "
                         "error, a descriptor), not a file to replace; pass the path of a file")
    try:
        mode = os.stat(path).st_mode  # follows links
    except OSError:
        if os.path.islink(path):  # dangling, or a loop of links
            raise InputError(f"{path} is a symbolic link to {os.readlink(path)}, which does not "
                             f"exist; {fix}") from None
        return path  # missing (the usual case), or a write error that the write itself reports
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "a special file")
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):  # /dev/null is not the user's to move
            fix = fix.replace("move it away or ", "").replace("remove it or ", "")
        raise InputError(f"{path} is not a regular file (it is {kind}); {fix}")
    return Path(os.path.realpath(path)) if os.path.islink(path) else path


def _names_a_descriptor(path: Path) -> bool:
    """``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``... (and links to them)."""
    import re

    names = [os.path.abspath(path)]
    with contextlib.suppress(OSError):
        for _ in range(8):  # the link chain, up to the descriptor's magic link
            if not os.path.islink(names[-1]):
                break
            names.append(os.path.join(os.path.dirname(names[-1]), os.readlink(names[-1])))
    return any(re.match(r"/dev/(std(in|out|err)$|fd/)|/proc/(self|thread-self|\d+)/fd/", n)
               for n in names)


@contextlib.contextmanager
def atomic_open(path: Path, *, durable: bool = True, sweep: bool = False,
                replace: bool = True) -> Iterator[IO[bytes]]:
    """A temporary binary file beside ``path``, renamed into place when the block succeeds.

    The temporary is ``.NAME.tmp-<pid>-XXXX``. ``sweep``: first remove those of ``path`` whose
    process is gone (killed mid-write: an export's size each, which nothing else removes).

    ``durable``: fsync the file before the rename and the folder after it, so that the new
    content survives a power cut; without it a reader still sees the old or the new file whole
    (for progress reports rewritten many times a second, where losing the last one is harmless).

    On any exception the temporary file is removed and ``path`` is left untouched; a disk's
    error that names no file (os.write, fsync) gets ``path`` as its file, so the block is for
    writing the file and no other I/O. The file gets
    the mode a plain ``open()`` would give a new file (``0o666 & ~umask``): mkstemp's 0600 would
    hide exports and run records from everyone else. A symbolic link is written through (its
    target is replaced); anything but a regular file at ``path`` is refused with an InputError
    (see :func:`output_target`) before anything is created.

    ``replace=False``: a file that another process made at ``path`` while this one wrote is
    not replaced (an InputError says so): the file goes into place by a hard link, which fails
    where a name exists, or, on a filesystem without hard links, by a rename after a check.
    """
    path = output_target(Path(path))
    parent = path.parent if str(path.parent) else Path(".")
    if sweep:
        remove_dead_leftovers(path)
    fd, tmp_name = tempfile.mkstemp(prefix=hidden_prefix(path.name, "tmp"), dir=parent)
    tmp = Path(tmp_name)
    try:
        with contextlib.suppress(OSError):  # e.g. FAT or some FUSE mounts: keep what we got
            os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            _link_into_place(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        name_disk_error(exc, path)
        raise
    if durable:
        fsync_dir(parent)


def _link_into_place(tmp: Path, path: Path) -> None:
    """``tmp`` renamed to ``path`` unless something is there (see :func:`atomic_open`)."""
    from embedlab.errors import spell

    made_meanwhile = InputError(f"{path} was made by another command while this one wrote it, "
                                f"and is left as it is; pass {spell('--force', True)} to "
                                "replace it, or another name")
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise made_meanwhile from None
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        if os.path.lexists(path):  # the same check, without the link's atomicity
            raise made_meanwhile from None
        os.replace(tmp, path)
        return
    tmp.unlink()


#: errors of os.link on filesystems without hard links (FAT, some FUSE and network mounts)
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK,
                  errno.ENOSYS, errno.EACCES}


def hidden_prefix(name: str, kind: str) -> str:
    """``.NAME.<kind>-<pid>-``: how the temporary (``tmp``) or moved-aside (``old``) file or
    folder of ``NAME`` beside it starts, which :func:`remove_dead_leftovers` finds again. A
    name too long to take the additions within the 255 bytes a file name may have is cut, a
    hash of the whole in place of the rest (a 240-character export name was "too long")."""
    return f".{_short(name)}.{kind}-{os.getpid()}-"


def _short(name: str) -> str:
    raw = os.fsencode(name)
    if len(raw) <= 200:
        return name
    return os.fsdecode(raw[:190]) + "~" + hashlib.sha1(raw).hexdigest()[:8]


def remove_dead_leftovers(path: Path, kinds: tuple[str, ...] = ("tmp",)) -> None:
    """Delete the ``.NAME.<kind>-<pid>-*`` files and folders beside ``path`` that a writer
    killed outright (SIGKILL, a power cut) left, once its process has ended: a live one may be
    at work right now. A link among them goes, not what it points to."""
    import glob

    from embedlab.run.lock import pid_alive  # stdlib only

    parent = path.parent if str(path.parent) else Path(".")
    stem = _short(path.name)
    for kind in kinds:
        with contextlib.suppress(OSError):
            for child in parent.glob(f".{glob.escape(stem)}.{kind}-*"):
                pid = child.name[len(stem) + len(kind) + 3:].split("-", 1)
                if len(pid) != 2 or not pid[0].isdigit() or pid_alive(int(pid[0])):
                    continue
                with contextlib.suppress(OSError):
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink()


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    with atomic_open(path, durable=durable) as fh:
        fh.write(data)


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def file_digest(path: Path, algorithm: str) -> str:
    """Hex digest of a file, in bounded memory.

    hashlib's own loop reads into one reused 256 KiB buffer; reading fresh multi-MiB pieces
    instead kept two of them alive at a time (+16 MiB at a checkpoint's peak, measured).
    """
    with open(path, "rb") as f:
        return hashlib.file_digest(f, algorithm).hexdigest()


#: the compressions a small input file (questions, pairs) may have, by its name's suffix, as
#: gensim's utils.open reads them, and the module that decompresses each
_DECOMPRESSORS = {".gz": "gzip", ".bz2": "bz2", ".xz": "lzma"}


def bare_stem(path: str | os.PathLike[str]) -> str:
    """``path``'s name without its suffix, nor a compression's before it (``ws353.tsv.gz``:
    ``ws353``): the name a similarity file's metric goes by."""
    p = Path(path)
    return Path(p.stem).stem if p.suffix.lower() in _DECOMPRESSORS else p.stem


def file_bytes(path: Path, *, what: str) -> bytes:
    """``path``'s bytes, decompressed when its name ends in .gz, .bz2 or .xz; a damaged
    compressed file is a one-line InputError. OSError of the read itself propagates."""
    data = path.read_bytes()
    module = _DECOMPRESSORS.get(path.suffix.lower())
    if module is None:
        return data
    import importlib
    import lzma
    import zlib

    try:
        decompressed: bytes = importlib.import_module(module).decompress(data)
    except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error) as exc:
        raise InputError(f"cannot decompress {what} {path} ({exc}); the file is damaged or not "
                         f"{module}-compressed as its name says: pass the file it was made "
                         "from") from None
    return decompressed


def read_utf8(path: Path, *, what: str, missing_fix: str, unreadable_fix: str) -> str:
    """A user-named input file's text (decompressed for a name ending in .gz, .bz2 or .xz); a
    missing or undecodable file is a one-line InputError ``"<what> PATH does not exist;
    <missing_fix>"`` / ``"cannot read <what> PATH (why); <fix>"``. A byte-order mark at the
    start (Notepad and spreadsheets save one) is not text: dropped, so that the first line reads
    as typed."""
    try:
        return file_bytes(path, what=what).decode("utf-8-sig")
    except FileNotFoundError:
        from embedlab.errors import MissingFileError  # an InputError and a FileNotFoundError

        raise MissingFileError(f"{what} {path} does not exist; {missing_fix}", path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what} {path} ({exc}); {unreadable_fix}") from None


def cache_folder() -> Path:
    """embedlab's cache (the native kernel's builds, the text8 download): ``$EMBEDLAB_CACHE``,
    else ``$XDG_CACHE_HOME/embedlab``, else ``~/.cache/embedlab``."""
    if os.environ.get("EMBEDLAB_CACHE"):
        return Path(os.environ["EMBEDLAB_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "embedlab"


def name_stamp() -> str:
    """The time now for a name (``RUN.old-<time>``): UTC, ``20261128-050912Z``, so that names
    sort by time whatever the time zone of the shell that made each."""
    return time.strftime("%Y%m%d-%H%M%SZ", time.gmtime())


def text_lines(text: str) -> list[str]:
    """``text``'s lines at \\n, \\r\\n or a lone \\r, as Python's text mode reads them (and so
    gensim its pairs files): a spreadsheet on a Mac saves its tab-separated text with \\r
    alone. Other characters that str.splitlines() breaks at (\\x1c, \\u2028...) stay inside a
    line, as in a word."""
    return _LINE_BREAK.split(text)


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def missing_folders(path: Path) -> list[Path]:
    """``path`` and its ancestors that do not exist yet, deepest first: what
    ``path.mkdir(parents=True)`` will create, for :func:`remove_empty_folders` to undo.

    Absolute and normalised first: ``new/../old`` does not exist while ``new`` is missing, yet
    names the existing ``old``, which must never be taken for a folder this process made.
    """
    path = Path(os.path.abspath(path))
    return [p for p in (path, *path.parents) if not p.exists()]


def remove_all_but(folder: Path, keep: str) -> None:
    """Remove everything in ``folder`` except its entry ``keep`` (a held lock file: removing
    it would let another process lock a new one in the folder before this one is done)."""
    import shutil

    try:
        children = list(folder.iterdir())
    except OSError:
        return
    for child in children:
        if child.name == keep:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def remove_leftover_temporaries(folder: Path) -> list[Path]:
    """Delete the temporaries :func:`atomic_open` leaves in ``folder`` when its process is
    killed mid-write (``.NAME.tmp-XXXX``); only for a folder no other process writes into now
    (a run whose lock this process holds). Returns what went."""
    gone = []
    with contextlib.suppress(OSError):
        for child in folder.glob(".*.tmp-*"):
            if child.is_file() and not child.is_symlink():
                with contextlib.suppress(OSError):
                    child.unlink()
                    gone.append(child)
    return gone


def remove_empty_folders(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) while they are empty; stop at the first that is not."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def commit_folder(tmp: Path, final: Path) -> None:
    """Atomically put the finished folder ``tmp`` in place of ``final`` (checkpoints, prepared
    corpora): readers see the old folder or the new one, never a mix.

    An existing ``final`` is moved aside first and removed only once ``tmp`` is in place (put
    back if that fails); where ``final`` was a symbolic link, the link goes, not its target.
    The parent folder is fsynced, so the rename survives a power cut.
    """
    old: Path | None = None
    if final.is_symlink() or final.exists():
        old = final.with_name(f"{hidden_prefix(final.name, 'old')}{time.time_ns()}")
        final.rename(old)
    try:
        os.replace(tmp, final)
    except BaseException:
        # a signal handled as the rename returns arrives here with the new folder in place
        if old is not None and os.path.lexists(tmp):  # not renamed: the old one goes back
            old.rename(final)
            raise
        if old is not None:
            _remove_replaced(old)
        raise
    try:
        fsync_dir(final.parent)
    finally:  # a Ctrl-C or SIGTERM from here on: the old folder goes all the same, then it stops
        if old is not None:
            _remove_replaced(old)


def _remove_replaced(old: Path) -> None:
    """Remove the folder (or link) that :func:`commit_folder` moved aside, finishing the removal
    if a signal interrupts it."""
    if old.is_symlink():
        old.unlink()
        return
    try:
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:  # SIGTERM or Ctrl-C half-way: finish, then stop
        shutil.rmtree(old, ignore_errors=True)
        raise


def clip(text: str, width: int = 40) -> str:
    """``text`` cut to ``width`` characters with an ellipsis, for values quoted in messages."""
    return text if len(text) <= width else text[:width - 3] + "..."
