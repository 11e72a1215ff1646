"""The memory a run needs, checked against what the machine has; and giving memory that malloc
keeps, free but resident, back to the operating system.

**The estimate.** A run holds its two matrices (V × D float32 each; the output one has V − 1
rows for hierarchical softmax; NCE adds a bias per word), the vocabulary's tables (keep
probabilities, the noise distribution and its alias table, the Huffman tree for ``--loss hs``),
the batches of the chunks in flight and the pages of the memory-mapped corpus those chunks read
(handed back once a chunk is copied). None of it grows with the corpus's length. What the
process holds already when the check runs (the interpreter and its libraries, the vocabulary's
words as Python strings) is not counted: ``MemAvailable`` and the cgroup's room already leave it
out. The ``--max-vocab`` a refusal suggests fits in 90 % of the memory available. Before the
engine is built, :func:`check_memory` refuses a run whose estimate exceeds the memory available
(``MemAvailable``, and the cgroup's limit where one is set), in one line naming the numbers and
the flags that shrink the model.

**Giving memory back.**

The producer of NumPy batches (the torch engine's, and those of runs started before the batch
specification) builds each chunk's arrays (a few MiB each) in its own thread, so glibc serves
them from that thread's arena, and its dynamic mmap threshold soon serves them from the heap
rather than from mmap. When a chunk is done the memory is free but stays resident: the main
thread, which writes checkpoint summaries, cannot reuse another arena's free space, so the final
checkpoint's summaries would set the run's peak memory (docs/performance.md).

Not done with ``mallopt`` (a fixed 128 KiB mmap threshold): that returns every chunk's arrays at
once, but mapping them afresh multiplies the page faults.
"""

from __future__ import annotations

import ctypes
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from embedlab.errors import InputError, spell, spell_name

GIB = 1 << 30
CHUNK_TOKENS = 1 << 18  # the batch streams' chunk (embedlab.data.pairs.BatchStream)
CHUNKS_IN_FLIGHT = 3  # being built, queued, being trained
# Bytes per word of the vocabulary tables built before training: keep probabilities, Q(w), the
# alias table's threshold and alias (8 bytes each), the weights they are made from and the
# alias construction's Python floats (transient).
TABLE_BYTES_PER_WORD = 5 * 8 + 32


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None)  # the C library this process already uses
    except OSError:
        return None
    fn = getattr(libc, "malloc_trim", None)  # glibc only; musl and macOS have none
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def release_free_memory() -> bool:
    """Return freed heap memory of every malloc arena to the OS; False where malloc cannot.

    Cheap (a walk over the free lists and a few ``madvise`` calls); pages given back are faulted
    in again only if malloc reuses them.
    """
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True


@dataclass(frozen=True)
class MemoryNeed:
    """What a run will allocate (bytes), by part."""

    matrices: int  # input and output vectors, NCE's bias
    tables: int  # the vocabulary's tables
    batches: int  # the chunks of batches in flight and the corpus pages they read

    @property
    def total(self) -> int:
        return self.matrices + self.tables + self.batches


def chunks_in_flight(micro_batches: int, micro_order: str, processes: int) -> int:
    """Chunks of batches a process holds at once: :data:`CHUNKS_IN_FLIGHT` for one batch a
    step (or consecutive micro-batches); in the chunk order of micro-batches its own chunks of
    the group it trains and of the next one (``embedlab.engines.microbatch``)."""
    if micro_batches > 1 and micro_order == "chunks":
        return 2 * -(-micro_batches // processes)
    return CHUNKS_IN_FLIGHT


def step_bytes(batch_size: int, dim: int, window: int, engine: str) -> int:
    """A step's working arrays for ``batch_size`` centres: rows gathered, their gradients,
    scores and masks. Per centre, from the peak RSS of one step at batch sizes of 1M and 2M
    (dim 20–200, window 5 and 10; 2026-11-27), rounded up: the native kernel about
    12.5·dim + 170·window bytes, the torch engine's tensors 17.5·dim + 560·window. At the
    default 2,048 centres a few MiB; at millions of centres the largest part of a run."""
    if engine == "cuda":  # its step's arrays are in the GPU's memory, not the host's
        return 0
    per_centre = 17.5 * dim + 560 * window if engine == "torch" else 12.5 * dim + 170 * window
    return int(batch_size * per_centre)


def noise_bytes(noise_per_group: int, group: int, chunks: int = CHUNKS_IN_FLIGHT) -> int:
    """The noise words' ids of ``chunks`` chunks of batches: ``noise_per_group`` (int64) for
    every ``group`` centres of a chunk. A few MiB at the defaults (40 for 32 centres); with a
    huge ``--negative`` the largest part of a run."""
    return chunks * -(-CHUNK_TOKENS // max(1, group)) * noise_per_group * 8


def memory_need(vocab_size: int, dim: int, *, loss: str, window: int,
                chunks: int = CHUNKS_IN_FLIGHT, batch_size: int = 0,
                engine: str = "native", noise: int = 0) -> MemoryNeed:
    """The estimate for a run of ``vocab_size`` words and ``dim`` dimensions, holding
    ``chunks`` chunks of batches at once and a step of ``batch_size`` centres on ``engine``
    (:func:`step_bytes`), with ``noise`` bytes of noise words (:func:`noise_bytes`): the same
    for any corpus length."""
    output_rows = max(0, vocab_size - 1) if loss == "hs" else vocab_size
    matrices = 4 * dim * (vocab_size + output_rows) + (4 * vocab_size if loss == "nce" else 0)
    per_word = TABLE_BYTES_PER_WORD + (4 if loss == "nce" else 0)
    if loss == "hs":  # path offsets, then ~log2 V node ids (int32) and code bits per word
        per_word += 8 + 5 * max(1, math.ceil(math.log2(max(2, vocab_size))))
    # per token of a chunk: centre and span ids (int64), the context mask (2W+1 bytes), the
    # context counts (float32), and the corpus page it was read from (uint32 id)
    batches = chunks * CHUNK_TOKENS * (8 + 8 + 2 * window + 1 + 4 + 4) + \
        step_bytes(batch_size, dim, window, engine) + noise
    return MemoryNeed(matrices, per_word * vocab_size, batches)


def available_memory() -> tuple[int, str] | None:
    """Bytes this process may still allocate, and where that figure comes from: the smaller of
    ``MemAvailable`` (/proc/meminfo) and the room left under the cgroup's memory limit. None
    where neither can be read (not Linux)."""
    found: list[tuple[int, str]] = []
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                found.append((int(line.split()[1]) * 1024, "MemAvailable"))
    except (OSError, ValueError, IndexError):
        pass
    room = _cgroup_room()
    if room is not None:
        found.append((room, "the cgroup's memory limit"))
    return min(found) if found else None


def _cgroup_room() -> int | None:
    """The cgroup's memory limit less its usage (cgroup v2, else v1); None without a limit."""
    for controller, limit_file, usage_file in (("", "memory.max", "memory.current"),
                                               ("memory", "memory.limit_in_bytes",
                                                "memory.usage_in_bytes")):
        for folder in _cgroup_folders(controller):
            try:
                limit = (folder / limit_file).read_text().strip()
                usage = int((folder / usage_file).read_text().strip())
            except (OSError, ValueError):
                continue
            if limit.isdigit() and int(limit) < 1 << 60:  # v1 says "no limit" with ~2^63
                return max(0, int(limit) - usage)
    return None


def _cgroup_folders(controller: str) -> list[Path]:
    """The process's cgroup folders for ``controller`` ("" for cgroup v2), most specific first,
    then the mount's root (which a container shows as its own cgroup)."""
    root = Path("/sys/fs/cgroup") / controller
    folders = []
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if (controller == "" and names == "") or controller in names.split(","):
                folders.append(root / path.lstrip("/"))
    except (OSError, ValueError):
        pass
    return [*folders, root]


def check_disk(run_dir: Path, checkpoint_bytes: int, keep: int, *, kept: int = 0,
               tensorboard: bool = True) -> None:
    """Refuse a run whose next checkpoint (about ``checkpoint_bytes``) cannot fit on the disk of
    ``run_dir``: the first save would fail after the training before it. Warn when the ``keep``
    + 1 of them that retention holds while one is saved do not fit, less the ``kept`` ones a
    resumed run has on the disk already."""
    import shutil

    from embedlab.errors import warn

    folder = run_dir
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    size = f"about {_size(checkpoint_bytes)}"
    # room for what a run writes beside its checkpoints (metrics, TensorBoard's events, the
    # status file): a small model needs a few MiB of it, not a fixed 64 MiB; without
    # TensorBoard (--no-tensorboard) a metrics.jsonl of kilobytes
    margin = min(64 << 20, max(4 << 20, checkpoint_bytes // 2)) if tensorboard else 256 << 10
    if checkpoint_bytes + margin > free:
        fix = (f"free space there, pass another {spell('--run')}, or a smaller "
               f"{spell('--dim')} or vocabulary" if not kept else
               "free space there: the run's dimensions and vocabulary are its own")
        # the margin is a start, not a bound: TensorBoard's events grow as the run goes
        raise InputError(f"a checkpoint of this run takes {size}, and its logs "
                         f"{_size(margin)} to start with, more than the {_size(free)} free on "
                         f"the disk of {folder}; {fix}")
    if max(1, keep + 1 - kept) * checkpoint_bytes > free:
        warn(f"{spell('--keep', keep)} keeps up to {keep + 1} checkpoints of {size} while one is "
             f"saved ({_size((keep + 1) * checkpoint_bytes)}), more than the "
             f"{_size(free)} free on the disk of {folder}: a save will fail once it "
             f"fills; pass a smaller {spell('--keep')}, or free space")


def _size(n: int) -> str:
    """Bytes for a message: GiB from 1 GiB on, else MiB (a small model's 2 MiB is no 0.0 GiB)."""
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / (1 << 20):.1f} MiB"


#: what a run that does not fit may still change (:func:`check_memory`): ``raw``: a corpus the
#: run prepares itself (every flag); ``prepared``: a prepared folder, whose vocabulary its
#: ``embedlab prepare`` fixed; ``resumed``: a run's own checkpoint (vocabulary and dimensions)
Shape = Literal["raw", "prepared", "resumed"]


def check_memory(vocab_size: int, dim: int, *, loss: str, window: int,
                 chunks: int = CHUNKS_IN_FLIGHT, shape: Shape = "raw", batch_size: int = 0,
                 engine: str = "native", noise: int = 0, noise_flag: str = "--negative") -> None:
    """Refuse, in one line, a run whose :func:`memory_need` exceeds :func:`available_memory`,
    naming both and a fix that the run accepts (``shape``: what it may still change;
    ``noise_flag``: the option that sets the ``noise`` bytes' count)."""
    have = available_memory()
    need = memory_need(vocab_size, dim, loss=loss, window=window, chunks=chunks,
                       batch_size=batch_size, engine=engine, noise=noise)
    if have is None or need.total <= have[0]:
        return
    room, source = have
    if noise > need.total / 2:  # a huge --negative (or --shared-negatives): it is the fix
        fix = f"pass a smaller {spell_name(noise_flag)}" + \
            (" (word2vec's are 5 to 25)" if noise_flag == "--negative" else "") \
            if shape != "resumed" else \
            "resume it where more memory is free: its noise words are those it was started with"
        raise InputError(
            f"this run needs about {_size(need.total)} of memory, {_size(noise)} "
            f"of it for the noise words of its batches, more than the {_size(room)} "
            f"available ({source}); {fix}")
    step = step_bytes(batch_size, dim, window, engine)
    # --batch-size, not the model, is what to shrink: where a step holds most of it and the
    # batch is far above the default 2,048 (a huge --dim makes a default step large too)
    if step > need.total / 2 and batch_size > 8192 and shape != "resumed":
        per_centre = step / max(1, batch_size)
        fits = _round_down((room * 0.9 - (need.total - step)) / per_centre)
        example = f" ({spell('--batch-size', fits)} would fit)" if fits >= 1 else ""
        raise InputError(
            f"this run needs about {_size(need.total)} of memory, {_size(step)} "
            f"of it for a step of {batch_size:,} centres, more than the {_size(room)} "
            f"available ({source}); pass a smaller {spell('--batch-size')}{example}")
    per_word = (need.matrices + need.tables) / max(1, vocab_size)
    fixed = need.batches
    usable = room * 0.9  # a suggestion leaves a margin: the estimate is not to the byte
    fits = _round_down((usable - fixed) / per_word) if usable > fixed else 0
    def fits_with(flag: str) -> str:
        return f" ({flag} would fit)" if fits >= 2 else ""

    if shape == "resumed":  # a flag that changed either would be refused as another run
        advice = ("resume it where more memory is free: its vocabulary and dimensions are "
                  "those it was started with")
    elif (usual := _usual_window_that_fits(vocab_size, dim, loss, window, chunks, room,
                                           batch_size, engine)) or \
            (fits < 2 and (usual := _window_that_fits(vocab_size, dim, loss, window, chunks,
                                                       room, batch_size, engine))):
        # the window, not the vocabulary: its context mask takes 2W+1 bytes per token in flight
        advice = (f"pass a smaller {spell('--window')} (batches hold {2 * window + 1} bytes of "
                  f"context mask per token; {spell('--window', usual)} would fit)")
    elif shape == "prepared":  # its vocabulary flags would be refused against the folder's
        advice = (f"pass a smaller {spell('--dim')}, or run 'embedlab prepare' again with a "
                  f"smaller --max-vocab{fits_with(f'--max-vocab {fits}')} or a larger "
                  "--min-count (and --force, to replace the folder)")
    else:
        advice = (f"pass a smaller {spell('--dim')} or {spell('--max-vocab')}"
                  f"{fits_with(spell('--max-vocab', fits))}, or a larger "
                  f"{spell('--min-count')}")
    raise InputError(
        f"this run needs about {_size(need.total)} of memory ({vocab_size:,} words x "
        f"{dim} dimensions: vectors {_size(need.matrices)}, vocabulary tables "
        f"{_size(need.tables)}, batches {_size(need.batches)}), more than the "
        f"{_size(room)} available ({source}); {advice}")


def _usual_window_that_fits(vocab_size: int, dim: int, loss: str, window: int, chunks: int,
                            room: int, batch_size: int = 0, engine: str = "native"
                            ) -> int | None:
    """The wider of word2vec's usual windows, 10 and 5, narrower than ``window`` with which
    the run fits in ``room``; None where neither does."""
    for usual in (10, 5):
        if usual < window and memory_need(vocab_size, dim, loss=loss, window=usual,
                                          chunks=chunks, batch_size=batch_size,
                                          engine=engine).total <= room:
            return usual
    return None


def _window_that_fits(vocab_size: int, dim: int, loss: str, window: int, chunks: int,
                      room: int, batch_size: int = 0, engine: str = "native") -> int | None:
    """The widest window narrower than ``window`` with which the run fits in ``room``, where no
    vocabulary would (the batches' buffers are what is left); None where none does."""
    for narrower in range(window - 1, 0, -1):
        if memory_need(vocab_size, dim, loss=loss, window=narrower, chunks=chunks,
                       batch_size=batch_size, engine=engine).total <= room:
            return narrower
    return None


def _round_down(value: float) -> int:
    """``value`` rounded down to two significant digits (a number to type)."""
    if value < 1:
        return 0
    scale = 10 ** max(0, int(math.log10(value)) - 1)
    return int(value // scale * scale)
