"""Writing ``tensors.safetensors`` from NumPy arrays at disk speed, hashed on the way.

The bytes are those of safetensors' own writer (``safetensors.numpy.save_file``; tested): an
8-byte little-endian header length, the JSON header padded with spaces to a multiple of 8, then
the tensors' bytes, ordered by dtype (safetensors' order, widest first) then by name. Writing
them here lets the sha256 that the manifest records be computed from the same buffers while
they are written, on a second thread, instead of reading a checkpoint of gigabytes back after
its fsync.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

# safetensors' dtype names, in its order (sort key, descending), for the dtypes NumPy has
_DTYPES = {np.dtype(name): (rank, code) for rank, (name, code) in enumerate([
    ("bool", "BOOL"), ("uint8", "U8"), ("int8", "I8"), ("int16", "I16"), ("uint16", "U16"),
    ("float16", "F16"), ("int32", "I32"), ("uint32", "U32"), ("float32", "F32"),
    ("float64", "F64"), ("int64", "I64"), ("uint64", "U64")])}
_PLAIN_TEXT = re.compile(r"[\w.\-]*", re.ASCII)  # names and metadata written as is in JSON
_BLOCK = 16 << 20  # bytes per write (and per hash update)


def can_write(tensors: Mapping[str, Any], metadata: Mapping[str, str]) -> bool:
    """Whether :func:`write` gives these tensors safetensors' bytes: little-endian NumPy arrays
    of dtypes it knows, plain ASCII names, and at most one metadata entry (safetensors orders
    several as its hash map does)."""
    return (len(metadata) <= 1
            and all(_PLAIN_TEXT.fullmatch(text) for text in (*tensors, *metadata,
                                                             *metadata.values()))
            and all(isinstance(t, (np.ndarray, np.generic)) and np.dtype(t.dtype) in _DTYPES
                    and np.dtype(t.dtype).byteorder in "=|<" for t in tensors.values()))


def header(tensors: Mapping[str, np.ndarray],
           metadata: Mapping[str, str]) -> tuple[bytes, list[str]]:
    """The file's first bytes (length and padded JSON header) and the tensors' order."""
    order = sorted(tensors, key=lambda n: (-_DTYPES[np.dtype(tensors[n].dtype)][0], n))
    entries: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for name in order:
        array = tensors[name]
        end = offset + array.nbytes
        entries[name] = {"dtype": _DTYPES[np.dtype(array.dtype)][1], "shape": list(array.shape),
                         "data_offsets": [offset, end]}
        offset = end
    text = json.dumps(entries, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    return len(text).to_bytes(8, "little") + text, order


def write(path: Path, tensors: Mapping[str, Any], metadata: Mapping[str, str]) -> str:
    """Write ``tensors`` to ``path`` (a new file, the umask's mode), fsync it, and return the
    sha256 (hex) of its bytes. Call only where :func:`can_write` says yes."""
    arrays = {n: np.asarray(t, order="C") for n, t in tensors.items()}
    head, order = header(arrays, metadata)
    digest = hashlib.sha256(head)
    # hashlib and the write both release the GIL: the hash of a block is computed while it is
    # written, on one thread for the whole file (a thread per block started a hundred for a
    # checkpoint of gigabytes, each a chance to fail where threads or memory are scarce)
    with open(path, "wb", buffering=0) as f, \
            ThreadPoolExecutor(1, thread_name_prefix="embedlab-hash") as hasher:
        f.write(head)
        for name in order:
            data = memoryview(arrays[name].reshape(-1).view(np.uint8).data)
            for start in range(0, len(data), _BLOCK):
                block = data[start:start + _BLOCK]
                hashed = hasher.submit(digest.update, block)
                _write_all(f, block)
                hashed.result()
        os.fsync(f.fileno())
    return digest.hexdigest()


def _write_all(f: Any, block: memoryview) -> None:
    done = 0
    while done < len(block):  # an unbuffered write may write less than asked
        done += f.write(block[done:])
