"""The native engine's own batches: the batch specification built in C, many steps per call.

:class:`NativeBatches` asks ``_batches.c`` to build a whole chunk's batches in parallel from the
memory-mapped token ids (``w2v_chunk_build``), then to train up to ``limit`` of them in one call
(``w2v_train_batches``), which evaluates the learning-rate schedule itself. Python is entered
once per call, and a call is bounded by the loop (see :mod:`embedlab.training.loop`), so signals,
logging, evaluation and checkpoints keep the granularity of single steps.

The chunk it builds is the one :class:`~embedlab.data.batchspec.SpecBatchStream` builds in
NumPy, bit for bit (:meth:`NativeBatches.batches` gives it as :class:`Batch` es, for the tests).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from embedlab.data.pairs import Batch, Cursor, reading_runs, release_mapped
from embedlab.data.prepared import unknown_id
from embedlab.engines.stepping import Schedule, StepsDone

if TYPE_CHECKING:
    from embedlab.data.batchspec import SpecBatchStream
    from embedlab.engines.native import NativeHierarchicalSoftmaxStep, NativeWord2VecStep

LOSSES = {"neg": 0, "nce": 1, "hs": 2}


def bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    """The native library ``lib`` with the generator's signatures declared (once)."""
    if getattr(lib, "_embedlab_batches", False):
        return lib
    p, i, i64, u32, f32, f64 = (ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_uint32,
                                ctypes.c_float, ctypes.c_double)
    lib.w2v_chunk_build.restype = i64
    lib.w2v_chunk_build.argtypes = [
        p, p, i, p, i64,  # ids, runs, n_runs, sentence_ends, n_sentences
        p, p, p, i64,  # keep, noise thresholds, noise aliases, vocab
        u32, u32, i64, i64, i64,  # key, epoch, chunk, lo
        i, i, i, i, i,  # window, batch, rows, groups, shared
        p, p, p, p, p, p, p, p,  # tok_p, sent_p, mask, contexts, negs, n_pairs, active, done
        p, p, p, p, i,  # b_pos, b_kept, kept_at, counts, threads
    ]
    lib.w2v_train_batches.restype = i
    lib.w2v_train_batches.argtypes = [
        i, i, i, p, p, p, p,  # model, loss, dim, w_in, w_out, bias, log_kq
        p, p, p, i, i64,  # offsets, points, codes, max_len, terms
        p, p, p, p, p, p,  # tok_p, mask, contexts, negs, n_pairs, words_done
        i, i, i, i, i, f32,  # window, batch, rows, groups, shared, noise weight
        i64, i,  # first, steps
        f64, f64, i64, i64, i64,  # lr0, min_ratio, words_before, words_seen, total_words
        i, f64, f64, f32,  # mean, damping, input damping, bias_sq
        p, p, p, p, p,  # scratch, h_in, h_out, mask_tmp, ctx_tmp
        p, p, i,  # losses, lrs, threads
    ]
    lib.w2v_philox.restype = None
    lib.w2v_philox.argtypes = [u32] * 6 + [p]
    lib._embedlab_batches = True  # type: ignore[attr-defined]
    return lib


def philox(lib: ctypes.CDLL, c0: int, c1: int, c2: int, c3: int,
           key: tuple[int, int]) -> tuple[int, ...]:
    """The C generator's Philox-4x32-10 words at one counter (for the tests)."""
    out = np.zeros(4, dtype=np.uint32)
    bind(lib).w2v_philox(c0, c1, c2, c3, key[0], key[1], out.ctypes.data)
    return tuple(int(w) for w in out)


@dataclass
class Chunk:
    """One chunk's batches as ``w2v_chunk_build`` lays them out (see ``_batches.c``)."""

    epoch: int
    index: int
    n_batches: int
    tok_p: np.ndarray
    mask: np.ndarray
    contexts: np.ndarray
    negs: np.ndarray
    n_pairs: np.ndarray
    active: np.ndarray
    words_done: np.ndarray


# the arrays :meth:`NativeBatches._allocate` makes and :meth:`NativeBatches.close` hands back
_BUFFERS = ("_tok_p", "_sent_p", "_mask", "_contexts", "_negs", "_n_pairs", "_active", "_done",
            "_b_pos", "_b_kept", "_kept_at", "_counts", "_mask_tmp", "_ctx_tmp", "_losses", "_lrs")


def _ptr(a: np.ndarray | None) -> int | None:
    return None if a is None else a.ctypes.data


class NativeBatches:
    """Builds ``stream``'s chunks in C (``lib``: the native library) and trains them with the
    native ``step``."""

    def __init__(self, lib: ctypes.CDLL, stream: SpecBatchStream,
                 step: NativeWord2VecStep | NativeHierarchicalSoftmaxStep, schedule: Schedule,
                 threads: int) -> None:
        if stream.ids.dtype != np.uint32:
            raise ValueError("the native batch generator reads uint32 token ids")
        self.lib = bind(lib)
        self.s, self.step, self.schedule, self.threads = stream, step, schedule, max(1, threads)
        self.ids = stream.ids
        self.ends = np.ascontiguousarray(stream.sentence_ends, np.int64)
        self.chunk: Chunk | None = None
        self._allocated = False

    def _allocate(self) -> None:
        """The chunk's buffers (about 50 bytes a token of ``chunk_tokens``; zero pages until a
        chunk is built)."""
        stream = self.s
        W, R, C = stream.window, stream.rows, stream.chunk_tokens
        B, J = stream.batch_size, 2 * stream.window + 1
        total = C + R  # rows of the largest chunk: (batches − 1)·B + R with batches ≤ ⌈C/B⌉
        batches = -(-C // B)
        self._tok_p = np.zeros(total + 2 * W, np.int64)
        self._sent_p = np.zeros(total + 2 * W, np.int64)
        self._mask = np.zeros((total, J), np.uint8)
        self._contexts = np.zeros(total, np.float32)
        self._negs = np.zeros((batches, R // stream.group, stream.noise_per_group), np.int64)
        self._n_pairs, self._active, self._done = (np.zeros(batches, np.int64) for _ in range(3))
        self._b_pos, self._b_kept = np.zeros(C, np.int32), np.zeros(C, np.int32)
        self._kept_at = np.zeros(C, np.int64)
        self._counts = np.zeros(self.threads + 1, np.int64)
        self._mask_tmp = np.zeros((R, J), np.uint8)
        self._ctx_tmp = np.zeros(R, np.float32)
        self._losses, self._lrs = np.zeros(batches), np.zeros(batches)
        self._allocated = True

    # ---- building ----------------------------------------------------------------------------
    def build(self, epoch: int, chunk: int) -> Chunk:
        """Chunk ``chunk`` of ``epoch`` (kept while its steps run: one chunk at a time)."""
        if self.chunk is not None and (self.chunk.epoch, self.chunk.index) == (epoch, chunk):
            return self.chunk
        if not self._allocated:
            self._allocate()
        s = self.s
        lo = chunk * s.chunk_tokens
        hi = min(s.n_tokens, lo + s.chunk_tokens)
        runs = np.ascontiguousarray(reading_runs(s.n_tokens, s.interleave, lo, hi), np.int64)
        keep = s.keep_threshold
        n_batches = int(self.lib.w2v_chunk_build(
            _ptr(self.ids), _ptr(runs), len(runs), _ptr(self.ends), len(self.ends), _ptr(keep),
            _ptr(s.noise_threshold), _ptr(s.noise_alias), len(s.noise), s.key[0], s.key[1],
            epoch, chunk, lo, s.window, s.batch_size, s.rows, s.rows // s.group,
            s.noise_per_group, _ptr(self._tok_p), _ptr(self._sent_p), _ptr(self._mask),
            _ptr(self._contexts), _ptr(self._negs), _ptr(self._n_pairs), _ptr(self._active),
            _ptr(self._done), _ptr(self._b_pos), _ptr(self._b_kept), _ptr(self._kept_at),
            _ptr(self._counts), self.threads))
        for start, end in runs:  # the chunk's ids are copied: hand their pages back
            release_mapped(self.ids, int(start), int(end))
        if n_batches < 0:  # an id that names no word: the corpus was not checked before
            raise self._unknown_id(-1 - n_batches)
        self.chunk = Chunk(epoch, chunk, n_batches, self._tok_p, self._mask, self._contexts,
                           self._negs, self._n_pairs, self._active, self._done)
        return self.chunk

    def _unknown_id(self, position: int) -> Exception:
        """The error for the id at ``position``, which names no word: the prepared folder's
        one-line refusal when the ids are its memory-mapped ``ids.u32``."""
        value, words = int(self.ids[position]), len(self.s.noise)
        filename = getattr(self.ids, "filename", None)
        if filename is not None:
            return unknown_id(Path(filename).parent, position, value, words)
        return ValueError(f"token id {value:,} at position {position:,} names no word of the "
                          f"{words:,} of the vocabulary")

    def batches(self, epoch: int, chunk: int) -> list[Batch]:
        """The chunk's batches as :class:`Batch` es (copies), to compare with the reference."""
        c, s = self.build(epoch, chunk), self.s
        W, B, R = s.window, s.batch_size, s.rows
        n_kept = int(self._counts[-1])
        out = []
        for i in range(c.n_batches):
            first = i * B
            mask, ctx = c.mask[first:first + R].copy(), c.contexts[first:first + R].copy()
            mask[B:], ctx[B:] = 0, 0.0
            out.append(Batch(centers=c.tok_p[W + first:W + first + R].copy(),
                             span=c.tok_p[first:first + R + 2 * W].copy(), mask=mask,
                             contexts=ctx, negatives=c.negs[i].copy(),
                             n_pairs=int(c.n_pairs[i]),
                             n_centers=int(max(0, min(B, n_kept - first))),
                             words_done=int(c.words_done[i]),
                             cursor_next=s.cursor_after(epoch, chunk, i, c.n_batches)))
        return out

    # ---- training ----------------------------------------------------------------------------
    def run(self, cursor: Cursor, words_seen: int, limit: int) -> StepsDone:
        c, s, step = self.build(cursor.epoch, cursor.chunk), self.s, self.step
        n = max(1, min(limit, c.n_batches - cursor.batch))
        cfg, p, groups = step.cfg, step.p, s.rows // s.group
        scratch = step.scratch_for_batches(groups, s.noise_per_group)
        tree: tuple[Any, ...]  # the Huffman tree's arrays, its longest path, the terms' room
        if cfg.loss == "hs":
            step = cast("NativeHierarchicalSoftmaxStep", step)
            tree = (step._offsets, step._points, step._codes, step._max_len,
                    step.terms_capacity())
            log_kq, h_out, input_kappa = None, step._h_node, cfg.input_kappa
        else:
            step = cast("NativeWord2VecStep", step)
            tree = (None, None, None, 0, 0)
            log_kq, h_out, input_kappa = step._log_kq, step._h_out, 0.0
        done = self.lib.w2v_train_batches(
            int(cfg.model == "cbow"), LOSSES[cfg.loss], p.w_in.shape[1], _ptr(p.w_in),
            _ptr(p.w_out), _ptr(p.b_out), _ptr(log_kq), *(_ptr(a) for a in tree[:3]), *tree[3:],
            _ptr(c.tok_p), _ptr(c.mask), _ptr(c.contexts), _ptr(c.negs), _ptr(c.n_pairs),
            _ptr(c.words_done), s.window, s.batch_size, s.rows, groups, s.noise_per_group,
            cfg.negative / max(1, s.noise_per_group), cursor.batch, n, self.schedule.lr,
            self.schedule.min_ratio, cursor.epoch * s.n_tokens, words_seen,
            self.schedule.total_words, int(cfg.reduction == "mean"), cfg.damping, input_kappa,
            p.bias_sq, _ptr(scratch), _ptr(step._h_in), _ptr(h_out), _ptr(self._mask_tmp),
            _ptr(self._ctx_tmp), _ptr(self._losses), _ptr(self._lrs), self.threads)
        if done < 0:
            raise RuntimeError("the hierarchical softmax kernel's scratch is too small")
        at = slice(cursor.batch, cursor.batch + n)
        pairs = c.n_pairs[at] if cfg.model == "skipgram" else c.active[at]
        epoch, chunk, first, batches = cursor.epoch, cursor.chunk, cursor.batch, c.n_batches
        return StepsDone(self._losses[:n].copy(), pairs.copy(), c.words_done[at].copy(),
                         self._lrs[:n].copy(),
                         lambda i: s.cursor_after(epoch, chunk, first + i, batches))

    def close(self) -> None:
        """Hand back the chunk's buffers and the kernel's scratch: the final save's summaries
        (matplotlib's PCA cards) allocate next. A later :meth:`run` allocates them again and
        rebuilds its chunk, the same batches (a pure function of the counters)."""
        self.chunk = None
        if self._allocated:
            for name in _BUFFERS:
                delattr(self, name)
            self._allocated = False
        self.step.release_scratch()


def kernel_seconds(lib: ctypes.CDLL) -> tuple[float, float]:
    """Seconds this process has spent in the native library's parallel regions, and in its
    batch calls (``w2v_chunk_build``, ``w2v_train_batches``) as a whole: what the serial share
    of training is measured with (``benchmarks/scaling.py``)."""
    return (ctypes.c_double.in_dll(lib, "w2v_parallel_seconds").value,
            ctypes.c_double.in_dll(lib, "w2v_call_seconds").value)
