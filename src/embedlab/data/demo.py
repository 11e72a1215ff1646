"""The built-in demo corpus: synthetic sentences with planted, linearly recoverable relations.

Why this shape: word2vec analogies (``king - man + woman ≈ queen``) appear when the contexts of
a word are a *sum of factor-specific contexts*. Every planted word here is the product of an
*entity* (a country, a family role, a noun, a verb) and a *factor value* (capital, female,
plural, past...). A sentence about a planted word draws its filler words from two pools: one
tied to the entity (shared by ``king`` and ``queen``) and one tied to the factor value (shared by
every female word). So ``queen - king`` is the female-minus-male context shift, the same for
every role, which is exactly what 3CosAdd measures.

Background words follow a Zipf-like law (a handful of very frequent function words, a long tail
of invented words, some under ``min_count`` 5) so subsampling and vocabulary pruning behave as
on real text. All words are either common English words or invented from syllables
(:mod:`embedlab.data.demo_lexicon`); no text is copied from anywhere.

Invariants:

* The word lists (and therefore :func:`planted_analogies`) do not depend on the seed; only the
  sentences do. The same ``(seed, tokens)`` gives byte-identical files on every platform (the
  randomness comes from :func:`embedlab.seeding.numpy_rng`, a counter-based Philox stream).
* Every planted word occurs in many sentences (hundreds at the default size), far above
  ``min_count`` 5; :func:`demo_stats` reports the counts.
* Output is UTF-8 (in fact ASCII), lowercase, one sentence per line, tokens separated by a single
  space, ``\\n`` line ends.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from itertools import permutations
from pathlib import Path

import numpy as np

from embedlab.data.demo_lexicon import lexicon
from embedlab.errors import InputError, make_folder
from embedlab.fsutil import atomic_write_text, checked_path
from embedlab.seeding import numpy_rng

DEFAULT_TOKENS = 1_000_000  # ~1M tokens: trains in well under a minute on 2 cores

# Sentence shape (see _generate_ids): a planted word with this many entity-pool words,
# factor-pool words and background words around it. With 2 + 2 pool words gensim scores 100% on
# the planted questions (docs/demo.md); the 6 background words make the corpus text-like
# (frequent function words to subsample, a rare tail to prune) at the cost of training time.
_ENTITY_SLOTS = 2
_FACTOR_SLOTS = 2
_NOISE_SLOTS = 6
_SENTENCE_LEN = 1 + _ENTITY_SLOTS + _FACTOR_SLOTS + _NOISE_SLOTS
_ZIPF_EXPONENT = 1.1


# ---- public API ---------------------------------------------------------------------------

def planted_analogies() -> list[tuple[str, str, str, str, str]]:
    """All planted questions as ``(section, a, b, c, d)``, meaning ``a : b :: c : d``.

    Within a section every ordered pair of distinct entities gives one question (as in the
    Google questions-words file). Independent of the corpus seed.
    """
    out: list[tuple[str, str, str, str, str]] = []
    for fam in lexicon().families:
        for section, fa, fb in fam.sections:
            for i, j in permutations(range(len(fam.rows)), 2):
                ri, rj = fam.rows[i], fam.rows[j]
                out.append((section, ri[fa], ri[fb], rj[fa], rj[fb]))
    return out


def planted_words() -> list[str]:
    """Every word that appears in a planted analogy, in a stable order."""
    return [w for fam in lexicon().families for row in fam.rows for w in row]


def demo_probe_words() -> list[str]:
    """A few planted words whose nearest neighbours show the planted structure."""
    geo = lexicon().families[0].rows
    return ["king", "woman", "cats", "walked", geo[0][0], geo[1][1]]


def write_questions(path: str | os.PathLike[str]) -> Path:
    """Write :func:`planted_analogies` in the questions-words format; returns the path.

    Format: a ``: section`` line starts each section, then one ``a b c d`` line per question.
    """
    lines: list[str] = []
    section = None
    for sec, a, b, c, d in planted_analogies():
        if sec != section:
            lines.append(f": {sec}")
            section = sec
        lines.append(f"{a} {b} {c} {d}")
    path = checked_path("path", path, "the questions file to write")
    return _write_atomic(Path(path), "\n".join(lines) + "\n")


def write_demo_corpus(path: str | os.PathLike[str], seed: int = 0, *,
                      tokens: int = DEFAULT_TOKENS) -> Path:
    """Generate the demo corpus (about ``tokens`` tokens) into ``path``; returns the path.

    Deterministic in ``(seed, tokens)``. The file is written to a temporary sibling and renamed
    into place, so an existing file at ``path`` is either fully replaced or left untouched.
    """
    # NumPy's integers count as Python's; a bool, 1e6 (a float) or "1000" (text) does not
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0:
        raise InputError(f"demo seed must be an integer >= 0, got {seed!r}; pass e.g. seed=1")
    if not isinstance(tokens, numbers.Integral) or isinstance(tokens, bool):
        got = f"the {type(tokens).__name__} {tokens!r}"
        raise InputError(f"demo corpus size tokens= must be an integer, got {got}; pass e.g. "
                         f"tokens={DEFAULT_TOKENS} (the default)")
    seed, tokens = int(seed), int(tokens)
    path = checked_path("path", path, "the corpus file to write")
    if tokens < 10 * _SENTENCE_LEN:
        raise InputError(f"demo corpus size must be at least {10 * _SENTENCE_LEN} tokens, "
                         f"got {tokens!r}; use the default ({DEFAULT_TOKENS:,})")
    _check_target(Path(path))  # fail before spending time on generation
    return _write_atomic(Path(path), "\n".join(generate_sentences(seed, tokens)) + "\n")


def generate_sentences(seed: int = 0, tokens: int = DEFAULT_TOKENS) -> list[str]:
    """The demo corpus as a list of sentences (space-separated tokens), in file order."""
    words, ids = _generate_ids(seed, max(1, tokens // _SENTENCE_LEN))
    table = np.asarray(words, dtype=object)
    return [" ".join(row) for row in table[ids].tolist()]


def demo_stats(seed: int = 0, tokens: int = DEFAULT_TOKENS) -> dict[str, int]:
    """Token counts per word of the corpus ``(seed, tokens)`` would have (for tests and docs)."""
    words, ids = _generate_ids(seed, max(1, tokens // _SENTENCE_LEN))
    counts = np.bincount(ids.ravel(), minlength=len(words))
    return {w: int(c) for w, c in zip(words, counts, strict=True) if c}


# ---- generation ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Tables:
    """Integer view of the lexicon: one row per planted word (its entity and factor pools)."""

    words: tuple[str, ...]  # id -> word
    target: np.ndarray  # (T,) word id of each planted word
    entity_pool: np.ndarray  # (T, P) word ids, P per entity pool
    factor_pool: np.ndarray  # (T, 8) word ids
    noise: np.ndarray  # (N,) word ids of background words, most frequent first
    noise_cdf: np.ndarray  # (N,) cumulative Zipf probabilities; last entry exactly 1.0


@cache
def _tables() -> _Tables:
    lex = lexicon()
    index: dict[str, int] = {}

    def ids(ws: Iterable[str]) -> list[int]:
        return [index.setdefault(w, len(index)) for w in ws]

    noise = ids(lex.noise)
    target, ent, fac = [], [], []
    for fam in lex.families:
        for e, row in enumerate(fam.rows):
            for f, word in enumerate(row):
                target += ids([word])
                ent.append(ids(lex.entity_pools[(fam.name, e)]))
                fac.append(ids(fam.factor_pools[f]))
    ranks = np.arange(1, len(noise) + 1, dtype=np.float64)
    cdf = np.cumsum(ranks ** -_ZIPF_EXPONENT)
    cdf /= cdf[-1]
    cdf[-1] = 1.0  # so a draw in [0, 1) can never index past the end
    return _Tables(
        words=tuple(index), target=np.array(target), entity_pool=np.array(ent),
        factor_pool=np.array(fac), noise=np.array(noise), noise_cdf=cdf,
    )


def _generate_ids(seed: int, n_sentences: int) -> tuple[tuple[str, ...], np.ndarray]:
    """``(words, ids)`` with ids of shape (n_sentences, _SENTENCE_LEN), rows in file order.

    Each row: one planted word, ``_ENTITY_SLOTS`` words from its entity pool, ``_FACTOR_SLOTS``
    from its factor pool and ``_NOISE_SLOTS`` Zipf background words. The pool words sit right
    next to the planted word (two on each side, shuffled), so they fall inside even a shrunken
    word2vec window; the background words fill the rest of the row before and after.
    """
    t = _tables()
    rng = numpy_rng(seed, "demo", 1)
    n = n_sentences
    # Planted words are chosen uniformly so each gets ~n / T sentences.
    which = rng.integers(len(t.target), size=n)
    ent = t.entity_pool[which[:, None], rng.integers(t.entity_pool.shape[1],
                                                     size=(n, _ENTITY_SLOTS))]
    fac = t.factor_pool[which[:, None], rng.integers(t.factor_pool.shape[1],
                                                     size=(n, _FACTOR_SLOTS))]
    # Inverse-CDF sampling: relies only on uniform doubles, whose stream numpy keeps stable.
    noise = t.noise[np.searchsorted(t.noise_cdf, rng.random((n, _NOISE_SLOTS)), side="right")]
    # Context words go next to the planted word, background words around them.
    ctx = np.concatenate([ent, fac], axis=1)
    ctx = np.take_along_axis(ctx, rng.random(ctx.shape).argsort(axis=1), axis=1)
    half = ctx.shape[1] // 2
    left = rng.integers(0, _NOISE_SLOTS + 1, size=n)  # background words before the core
    core = np.concatenate([ctx[:, :half], t.target[which][:, None], ctx[:, half:]], axis=1)
    rows = np.empty((n, _SENTENCE_LEN), dtype=np.int64)
    cols = np.arange(_SENTENCE_LEN)[None, :]
    in_core = (cols >= left[:, None]) & (cols < left[:, None] + core.shape[1])
    rows[in_core] = core.ravel()
    rows[~in_core] = noise.ravel()
    return t.words, rows


def _check_target(path: Path) -> None:
    if path.is_dir():
        raise InputError(f"{path} is a folder; pass a file path such as {path / 'demo.txt'}")
    if not path.parent.is_dir():
        raise InputError(f"folder {path.parent} does not exist; create it first "
                         f"({make_folder(path.parent)})")


def _write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary sibling + rename: all or nothing."""
    _check_target(path)
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise InputError(f"cannot write {path} ({exc.strerror or exc}); free some space or "
                         "choose a writable folder") from exc
    return path
