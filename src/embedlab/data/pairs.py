"""Batches of training examples, generated in chunks with a resumable cursor.

The token stream (in-vocabulary ids of the prepared corpus) is cut into chunks of
``chunk_tokens`` ids. Everything random about a chunk — which tokens subsampling drops, each
centre's window size b in [1, window], the noise words — is drawn from generators keyed by
``(seed, stream, epoch, chunk)`` (:mod:`embedlab.seeding`). A chunk can therefore be rebuilt
bit-for-bit from its coordinates, and the data position is just ``(epoch, chunk, batch)``.

A batch is ``B`` consecutive *kept* positions ("centres") plus ``window`` positions of halo on each
side. Instead of materialising (centre, context) pairs we hand the model the centre ids, the span
of ids around them and a ``B × (2·window+1)`` mask saying which offsets are real contexts
(|offset| ≤ b_t, same sentence, inside the chunk). The model then scores all offsets with one
strided view — each embedding row is gathered once per position, not once per pair.

Windows never cross sentence ends; they do not cross chunk ends either (a chunk of 2^18 tokens loses
at most ``window`` pairs at each end, well under 0.01%).

Reading order: an epoch reads the corpus as ``interleave`` parts — pieces of ``PIECE_TOKENS``
tokens taken in turn from each part — the way word2vec.c's threads (and gensim's in its
``corpus_file`` mode) each read their own part of the file at once. Read in order, a corpus
sorted by topic (a dictionary, an encyclopaedia) hands the trainer one topic for millions of
steps and the last topics it reads dominate the vectors; with two parts, every stretch of
training mixes two distant regions. Chunks, cursors and the learning-rate schedule count
positions in this reading order; where two consecutive pieces are not neighbours in the corpus,
the windows stop as at a sentence end.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from embedlab.data.noise import NoiseDistribution
from embedlab.seeding import numpy_rng

PAD_SENTENCE = -1
PIECE_TOKENS = 4096  # tokens a part contributes in turn (≫ any window: few pairs are lost)


def reading_runs(n_tokens: int, parts: int, lo: int, hi: int,
                 piece: int = PIECE_TOKENS) -> list[tuple[int, int]]:
    """Physical [start, end) ranges of the corpus that positions lo..hi of the reading order
    cover, in order (adjacent ranges merged).

    The corpus is cut into ``parts`` parts of m whole pieces each; position q·piece + o of the
    reading order (q < parts·m) is offset o of piece q // parts of part q % parts. What is left
    after parts·m pieces (less than ``parts`` pieces' worth) follows in order. With m = 1 that
    is the corpus order: a corpus shorter than 2·parts pieces is read in order.
    """
    per_part = n_tokens // parts // piece * piece if parts > 1 else 0
    mixed = per_part * parts  # positions read interleaved; the rest is read in order
    runs: list[tuple[int, int]] = []
    at = lo
    while at < hi:
        if at >= mixed:
            start, end = at, hi
        else:
            q, off = divmod(at, piece)
            part, index = q % parts, q // parts
            start = part * per_part + index * piece + off
            end = start + min(piece - off, hi - at, mixed - at)
        if runs and runs[-1][1] == start:
            runs[-1] = (runs[-1][0], end)
        else:
            runs.append((start, end))
        at += end - start
    return runs


@dataclass(frozen=True)
class Cursor:
    """Data position: the next batch to train is batch ``batch`` of chunk ``chunk`` of ``epoch``."""

    epoch: int = 0
    chunk: int = 0
    batch: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "chunk": self.chunk, "batch": self.batch}

    @classmethod
    def from_dict(cls, d: dict[str, int]) -> Cursor:
        return cls(int(d["epoch"]), int(d["chunk"]), int(d["batch"]))


@dataclass
class Batch:
    """One optimisation step's data. Shapes use B = batch size, W = window, S = noise per group."""

    centers: np.ndarray  # (B,) int64: centre word ids (padding rows have weight 0)
    span: np.ndarray  # (B + 2W,) int64: ids of positions centre-W .. centre+W
    mask: np.ndarray  # (B, 2W+1) uint8: 1 where offset j-W is a context of centre t
    contexts: np.ndarray  # (B,) float32: number of contexts of each centre (row sums of mask)
    negatives: np.ndarray  # (B // group, S) int64: noise ids shared by each group of centres
    n_pairs: int  # positive (centre, context) pairs in this batch
    n_centers: int  # real (non-padding) centres
    words_done: int  # in-vocabulary tokens of this epoch consumed up to the end of this batch
    cursor_next: Cursor  # where the stream continues after this batch


class BatchStream:
    """Deterministic, resumable source of :class:`Batch` es over ``epochs`` passes.

    Args:
        ids: in-vocabulary token ids (uint32, may be a read-only memmap).
        sentence_ends: exclusive end offsets of sentences (last == len(ids)).
        keep_prob: per-word probability of keeping a token (word2vec subsampling), float64 (V,).
        noise: the noise distribution for negatives.
    """

    def __init__(
        self,
        ids: np.ndarray,
        sentence_ends: np.ndarray,
        keep_prob: np.ndarray | None,
        noise: NoiseDistribution,
        *,
        window: int,
        batch_size: int,
        group: int,
        noise_per_group: int,
        seed: int,
        epochs: int,
        chunk_tokens: int = 1 << 18,
        pad_to: int = 1,
        interleave: int = 1,
    ) -> None:
        # Batches carry `rows` centre slots: batch_size real centres, padded up to a multiple of
        # pad_to (the model's block size) and of group; padding slots have no contexts.
        self.rows = math.lcm(pad_to, group) * math.ceil(batch_size / math.lcm(pad_to, group))
        self.ids = ids
        self.sentence_ends = np.asarray(sentence_ends, dtype=np.int64)
        self.keep_prob = keep_prob
        self.noise = noise
        self.window = window
        self.batch_size = batch_size
        self.group = group
        self.noise_per_group = noise_per_group
        self.seed = seed
        self.epochs = epochs
        self.chunk_tokens = chunk_tokens
        if interleave < 1:
            raise ValueError(f"interleave must be >= 1, got {interleave}")
        self.interleave = interleave
        self.n_tokens = len(ids)
        self.n_chunks = max(1, math.ceil(self.n_tokens / chunk_tokens))

    # ---- one chunk --------------------------------------------------------------------------
    def chunk_batches(self, epoch: int, chunk: int) -> list[Batch]:
        """All batches of one chunk; a pure function of (seed, epoch, chunk)."""
        W, B, R = self.window, self.batch_size, self.rows
        lo = chunk * self.chunk_tokens  # positions in the reading order (see ``interleave``)
        hi = min(self.n_tokens, lo + self.chunk_tokens)
        runs = reading_runs(self.n_tokens, self.interleave, lo, hi)
        tok = self._read_runs(runs)
        kept = self._kept(epoch, chunk, tok, lo)
        if kept is not None:
            tok, pos = tok.take(kept), kept + lo
        else:
            pos = np.arange(lo, hi, dtype=np.int64)
        if len(runs) == 1:
            sent = np.searchsorted(self.sentence_ends, pos - lo + runs[0][0], side="right")
            # sentence ids relative to the chunk's first one fit int32: half the bytes to compare
            if len(sent):
                sent -= sent[0]
        else:
            sent = self._run_sentences(runs, kept, hi - lo)
        n = len(tok)
        n_batches = max(1, math.ceil(n / B))
        total = (n_batches - 1) * B + R  # the last batch's padded rows fit too
        # Pad W on the left, and on the right up to whole batches + W, with a sentence id that
        # matches nothing, so every batch's span is a plain slice and padding is masked out.
        tok_p = np.zeros(total + 2 * W, dtype=np.int64)
        sent_p = np.full(total + 2 * W, PAD_SENTENCE, dtype=np.int32)
        tok_p[W : W + n] = tok
        sent_p[W : W + n] = sent
        b = np.zeros(total, dtype=np.int64)
        b[:n] = self._windows(epoch, chunk, pos)
        # padding rows (t >= n) have b_t = 0, so no contexts
        mask, count = _context_mask(sent_p, b, W, total)
        contexts = count.astype(np.float32)
        # pairs up to each row, for the batches' n_pairs (a batch counts its first B rows)
        cum = np.concatenate(([0], np.cumsum(count, dtype=np.int64)))
        negs = self._negatives(epoch, chunk, (n_batches, R // self.group, self.noise_per_group))
        # words_done: in-vocab tokens of the epoch consumed once a batch is done (lr schedule).
        # Dropped (subsampled) tokens count as consumed, like word2vec's word_count.
        ends = np.minimum(np.arange(1, n_batches + 1) * B, n)  # exclusive, in kept positions
        words_done = np.full(n_batches, hi, dtype=np.int64)
        if n:
            words_done = np.where(ends > 0, pos[np.maximum(ends - 1, 0)] + 1, lo)
        words_done[-1] = hi
        out = []
        for i in range(n_batches):
            s = i * B
            m, ctx = mask[s : s + R], contexts[s : s + R]
            if R != B:  # slots past the B real centres belong to the next batch: no contexts here
                m, ctx = m.copy(), ctx.copy()
                m[B:], ctx[B:] = 0, 0.0
            nxt = self.cursor_after(epoch, chunk, i, n_batches)
            out.append(
                Batch(
                    centers=tok_p[W + s : W + s + R],
                    span=tok_p[s : s + R + 2 * W],
                    mask=m,
                    contexts=ctx,
                    negatives=negs[i],
                    n_pairs=int(cum[min(s + B, total)] - cum[s]),
                    n_centers=int(max(0, min(B, n - s))),
                    words_done=int(words_done[i]),
                    cursor_next=nxt,
                )
            )
        return out

    # ---- the random draws (the batch specification's part; see embedlab.data.batchspec) ----
    def _kept(self, epoch: int, chunk: int, tok: np.ndarray, lo: int) -> np.ndarray | None:
        """Indices into the chunk's tokens ``tok`` (first position ``lo``) that subsampling
        keeps, ascending; None keeps them all."""
        if self.keep_prob is None:
            return None
        u = numpy_rng(self.seed, "subsample", epoch, chunk).random(len(tok))
        return np.flatnonzero(u < self.keep_prob[tok])  # indices: faster than a bool mask

    def _windows(self, epoch: int, chunk: int, pos: np.ndarray) -> np.ndarray:
        """Each kept centre's window size b in [1, window]; ``pos``: the centres' positions."""
        rng = numpy_rng(self.seed, "window", epoch, chunk)
        return rng.integers(1, self.window + 1, size=len(pos))

    def _negatives(self, epoch: int, chunk: int, shape: tuple[int, int, int]) -> np.ndarray:
        """The noise words of the chunk's batches: (batches, groups, noise per group) ids."""
        return self.noise.sample(numpy_rng(self.seed, "negatives", epoch, chunk), shape)

    def _read_runs(self, runs: list[tuple[int, int]]) -> np.ndarray:
        """The ids of ``runs`` (corpus positions), as int64; their mapped pages are handed back."""
        if len(runs) == 1:
            tok = np.asarray(self.ids[runs[0][0] : runs[0][1]], dtype=np.int64)
            release_mapped(self.ids, *runs[0])
            return tok
        tok = np.concatenate([np.asarray(self.ids[start:end], dtype=np.int64)
                              for start, end in runs])
        # a piece need not cover a whole page (16 KiB of ids; pages are up to 64 KiB), so
        # each run's pages are handed back whole, shared ones too: a page of a piece not
        # yet read is simply mapped back from the page cache when it is
        pad = max(1, mmap.PAGESIZE // self.ids.itemsize)
        for start, end in runs:
            release_mapped(self.ids, max(0, start - pad), min(self.n_tokens, end + pad))
        return tok

    def _run_sentences(self, runs: list[tuple[int, int]], kept: np.ndarray | None,
                       length: int) -> np.ndarray:
        """Chunk-relative sentence ids of the kept tokens of a chunk read from several runs:
        a new id wherever the corpus's sentence changes or the next run begins (windows only
        compare ids for equality; the ids count up, so they fit int32)."""
        offsets = np.cumsum([0] + [b - a for a, b in runs])  # each run's start in the chunk
        physical = np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in runs])
        at = kept if kept is not None else np.arange(length, dtype=np.int64)
        sent = np.searchsorted(self.sentence_ends, physical.take(at), side="right")
        run = np.searchsorted(offsets[1:], at, side="right")
        new = np.empty(len(at), dtype=bool)
        if len(at):
            new[0] = False
            new[1:] = (sent[1:] != sent[:-1]) | (run[1:] != run[:-1])
        return np.cumsum(new, dtype=np.int64)

    def cursor_after(self, epoch: int, chunk: int, batch: int, n_batches: int) -> Cursor:
        """Where the data continues after batch ``batch`` of the ``n_batches`` of a chunk."""
        if batch + 1 < n_batches:
            return Cursor(epoch, chunk, batch + 1)
        if chunk + 1 < self.n_chunks:
            return Cursor(epoch, chunk + 1, 0)
        return Cursor(epoch + 1, 0, 0)

    # ---- iteration ----------------------------------------------------------------------------
    def iterate(self, start: Cursor, *, prefetch: int = 1) -> Iterator[Batch]:
        """Yield batches from ``start`` to the end of the last epoch.

        Chunks are built by a background thread (numpy releases the GIL in its kernels, the
        native engine in its ctypes call), so data preparation overlaps with the model's
        compute.
        """
        q: queue.Queue[list[Batch] | BaseException | None] = queue.Queue(maxsize=prefetch)
        stop = threading.Event()

        def produce() -> None:
            try:
                epoch, chunk = start.epoch, start.chunk
                while epoch < self.epochs and not stop.is_set():
                    q.put(self.chunk_batches(epoch, chunk))
                    chunk += 1
                    if chunk >= self.n_chunks:
                        epoch, chunk = epoch + 1, 0
                q.put(None)
            except BaseException as exc:  # surfaced in the consumer
                q.put(exc)

        thread = threading.Thread(target=produce, name="embedlab-batches", daemon=True)
        thread.start()
        first = True
        try:
            while True:
                item = q.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                batches = item[start.batch :] if first else item
                first = False
                yield from batches
        finally:
            stop.set()
            # Drain so the producer is not stuck on a full queue, then let it finish.
            while thread.is_alive():
                with contextlib.suppress(queue.Empty):
                    q.get(timeout=0.05)
            thread.join()


def _context_mask(sent_p: np.ndarray, b: np.ndarray, W: int,
                  total: int) -> tuple[np.ndarray, np.ndarray]:
    """``mask[t, j]``: offset ``o = j - W`` is a context of centre ``t`` (same sentence in the
    padded sentence ids ``sent_p``, ``|o| <= b[t]``), and each centre's count of contexts.

    Padding rows (``b[t] == 0``) get no contexts. Bytes, not float32: a chunk's batches stay
    alive until trained, and the mask is most of their memory.
    """
    mask = np.zeros((total, 2 * W + 1), dtype=np.uint8)
    count = np.zeros(total, dtype=np.min_scalar_type(2 * W))  # contexts per centre (<= 2W)
    centre_sent = sent_p[W : W + total]
    reach = [b >= d for d in range(W + 1)]  # reach[d][t]: b_t >= d
    for j in range(2 * W + 1):
        o = j - W
        if o != 0:
            col = sent_p[W + o : W + o + total] == centre_sent
            col &= reach[abs(o)]
            mask[:, j] = col
            count += col
    return mask, count


def release_mapped(ids: np.ndarray, lo: int, hi: int) -> None:
    """Drop the pages holding ``ids[lo:hi]`` from this process's memory, if ``ids`` is a memmap.

    A chunk's ids are copied before use, and without this every page of the corpus read so far
    would stay in the trainer's resident set: 4 bytes per token, 68 MiB for text8, gigabytes for
    a large corpus. The pages stay in the OS page cache, so the next epoch (or a replayed chunk)
    maps them back cheaply on access; the data cannot change (a read-only file mapping).
    """
    mapped = getattr(ids, "_mmap", None)  # np.memmap's mapping (None for in-memory arrays)
    if mapped is None or not hasattr(mmap, "MADV_DONTNEED") or ids.strides != (ids.itemsize,):
        return
    # byte positions inside the mapping (ids may be a view starting anywhere in it)
    base = ids.ctypes.data - np.frombuffer(mapped, dtype=np.uint8).ctypes.data
    first = -(-(base + lo * ids.itemsize) // mmap.PAGESIZE) * mmap.PAGESIZE  # whole pages only
    end = (base + hi * ids.itemsize) // mmap.PAGESIZE * mmap.PAGESIZE
    if end > first:
        with contextlib.suppress(OSError, ValueError):  # an optimisation; never fail a run on it
            mapped.madvise(mmap.MADV_DONTNEED, first, end - first)


def keep_probabilities(counts: np.ndarray, sample: float) -> np.ndarray | None:
    """word2vec's subsampling: keep w with p = (sqrt(f/(t·N)) + 1) · t·N / f, capped at 1.

    (The formula of word2vec.c, which gensim also uses; f = count(w), N = total words.)
    Returns None when ``sample`` is 0 (keep everything).
    """
    if sample <= 0:
        return None
    f = np.asarray(counts, dtype=np.float64)
    threshold = sample * f.sum()
    with np.errstate(divide="ignore"):
        p = (np.sqrt(f / threshold) + 1.0) * threshold / f
    p[~np.isfinite(p)] = 1.0
    return np.minimum(p, 1.0)
