"""Model-agnostic checkpoints: a dict of tensors (safetensors) plus a JSON state, saved atomically.

Layout (contract)::

    RUN/checkpoint                         human-readable index (latest, kept, best, archive)
    RUN/checkpoints/ckpt-00012000/
        tensors.safetensors                the tensors, never pickled
        state.json                         plain JSON: the caller's state + "step" + "metrics"
        MANIFEST.json                      sha256 and size of the two files; written last

Invariants:

* A checkpoint folder exists under its final name only once it is complete: files are written
  into ``ckpt-N.tmp-XXXX/``, fsynced, the manifest is written last, then the folder is renamed
  and the parent fsynced. Temporary folders are never read.
* A folder whose manifest is missing or does not match its files does not count: loaders skip it
  (one warning line on stderr) and fall back to the previous verified checkpoint.
* Retention deletes only folders that the index lists as ours (or that this manager committed
  itself); unknown folders are never touched. The checkpoint a run resumed from
  (:meth:`CheckpointManager.protect`) survives until a newer checkpoint is committed.
* Loading never unpickles: safetensors and JSON only, so a stranger's checkpoint cannot run code.
* Tensors are NumPy arrays by default, on both sides: training on the native engine never
  imports torch. Torch tensors are accepted and returned where asked (``framework="pt"``), for
  dtypes NumPy lacks (bfloat16); the file format is the same.

Modules: :mod:`~embedlab.checkpoint.format` (one folder's files, manifest and verification),
:mod:`~embedlab.checkpoint.index` (the index file), :mod:`~embedlab.checkpoint.manager`
(saving and retention), :mod:`~embedlab.checkpoint.load` (finding and loading).
"""

from __future__ import annotations

from embedlab.checkpoint.format import (
    CKPT_DIR,
    MANIFEST_FILE,
    NOT_NUMPY_DTYPES,
    STATE_FILE,
    CheckpointError,
    ckpt_name,
    parse_step,
    save_tensors,
)
from embedlab.checkpoint.index import INDEX_FILE, read_index
from embedlab.checkpoint.load import (
    find_checkpoint,
    is_checkpoint_folder,
    lists_them,
    load_checkpoint,
    load_latest,
    read_picked,
    tensor_specs,
)
from embedlab.checkpoint.manager import CheckpointManager

__all__ = [
    "CKPT_DIR",
    "INDEX_FILE",
    "MANIFEST_FILE",
    "NOT_NUMPY_DTYPES",
    "STATE_FILE",
    "CheckpointError",
    "CheckpointManager",
    "ckpt_name",
    "find_checkpoint",
    "is_checkpoint_folder",
    "lists_them",
    "load_checkpoint",
    "load_latest",
    "parse_step",
    "read_index",
    "read_picked",
    "save_tensors",
    "tensor_specs",
]
