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
on real text. All words are either common English words or invented from syllables by this
module; no text is copied from anywhere.

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

import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from itertools import permutations
from pathlib import Path

import numpy as np

from embedlab.errors import InputError
from embedlab.fsutil import atomic_write_text
from embedlab.seeding import numpy_rng

DEFAULT_TOKENS = 1_000_000  # ~1M tokens: trains in well under a minute on 2 cores

# The word lists are generated once from this fixed key, independent of the corpus seed, so
# that planted_analogies() is a constant of the library version.
_NAMES_SEED = 20240601

# Sentence shape (see _generate_ids): a planted word with this many entity-pool words,
# factor-pool words and background words around it. With 2 + 2 pool words gensim scores 100% on
# the planted questions (docs/demo.md); the 6 background words make the corpus text-like
# (frequent function words to subsample, a rare tail to prune) at the cost of training time.
_ENTITY_SLOTS = 2
_FACTOR_SLOTS = 2
_NOISE_SLOTS = 6
_SENTENCE_LEN = 1 + _ENTITY_SLOTS + _FACTOR_SLOTS + _NOISE_SLOTS
_ENTITY_POOL = 6  # context words per entity (shared by e.g. king and queen)
_NOISE_WORDS = 5000  # invented background words, on top of the function words
_ZIPF_EXPONENT = 1.1


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Very frequent words at the head of the background distribution (like "the" in English).
_FUNCTION_WORDS = _words(
    "the of and to in a is that for it as was with on by at from this be are or an not which"
)

# ---- planted families -----------------------------------------------------------------------
# Factor pools: one tuple of context words per factor value, in the order of the word columns.
# (male, female, six words about the role): the six are the role's own contexts.
_GENDER_ROLES = (
    ("king", "queen", "throne crown reign royal palace majesty"),
    ("prince", "princess", "heir castle knight tiara charming fairytale"),
    ("father", "mother", "parent parenthood household raising nurture upbringing"),
    ("son", "daughter", "offspring firstborn childhood inheritance adopted youngest"),
    ("brother", "sister", "sibling twin rivalry older younger bunkbed"),
    ("uncle", "aunt", "relatives reunion cousin visiting godparent inlaws"),
    ("husband", "wife", "marriage wedding spouse anniversary vows honeymoon"),
    ("boy", "girl", "kid playground schoolyard toys youngster teenage"),
    ("man", "woman", "adult person human grownup citizen people"),
    ("nephew", "niece", "kin godchild babysit kinship birthday relation"),
    ("grandfather", "grandmother", "elderly grandchild retirement pension wrinkles rocking"),
    ("duke", "duchess", "estate manor nobility aristocrat peerage dukedom"),
    ("emperor", "empress", "empire dynasty imperial conquest legion scepter"),
    ("actor", "actress", "stage theater film audition role script"),
)
_GENDER_POOLS = (
    ("he", "him", "his", "himself", "mister", "sir", "gentleman", "beard"),
    ("she", "her", "hers", "herself", "missus", "madam", "lady", "gown"),
)

_NOUNS = (
    ("cat", "cats", "whiskers purr meow kitten litter feline"),
    ("dog", "dogs", "bark leash puppy kennel fetch canine"),
    ("horse", "horses", "saddle gallop stable hoof mane pony"),
    ("bird", "birds", "feather nest wing beak chirp flock"),
    ("apple", "apples", "orchard cider juicy core peel fruit"),
    ("tree", "trees", "leaf branch trunk root forest oak"),
    ("car", "cars", "engine wheel garage fuel brake traffic"),
    ("house", "houses", "roof door kitchen chimney garden porch"),
    ("book", "books", "page chapter library author novel reader"),
    ("stone", "stones", "rock pebble granite quarry boulder marble"),
    ("child", "children", "infant toddler nursery diaper crayon lullaby"),
    ("mouse", "mice", "cheese squeak rodent trap tail burrow"),
    ("foot", "feet", "toe heel ankle sock shoe step"),
    ("box", "boxes", "cardboard lid package carton crate parcel"),
    ("city", "cities", "municipal township population council census district"),
    ("knife", "knives", "blade sharp cut fork sharpen handle"),
)
_NUMBER_POOLS = (
    ("one", "single", "each", "lone", "solitary", "individual", "sole", "unique"),
    ("many", "several", "these", "those", "two", "numerous", "various", "countless"),
)

_VERBS = (
    ("walk", "walked", "stroll path stride sidewalk hike pace"),
    ("run", "ran", "sprint race marathon jog runner finish"),
    ("see", "saw", "eye look sight glance view vision"),
    ("eat", "ate", "food meal dinner hungry bite lunch"),
    ("go", "went", "leave depart journey trip travel away"),
    ("write", "wrote", "pen letter ink essay paper diary"),
    ("speak", "spoke", "voice talk speech words whisper conversation"),
    ("swim", "swam", "pool water lake dive splash swimmer"),
    ("sing", "sang", "song choir melody tune singer chorus"),
    ("take", "took", "grab hold carry pick seize obtain"),
    ("give", "gave", "gift donate offer share receive generous"),
    ("drive", "drove", "road steer highway driver lane motorway"),
    ("play", "played", "game fun match player team sport"),
    ("jump", "jumped", "leap hop bounce spring hurdle skip"),
)
_TENSE_POOLS = (
    ("today", "now", "usually", "often", "always", "currently", "nowadays", "daily"),
    ("yesterday", "ago", "once", "earlier", "previously", "formerly", "lately", "then"),
)

_GEO_FACTORS = ("country", "capital", "language", "currency")
_GEO_POOLS = (
    ("nation", "border", "republic", "province", "territory", "frontier", "realm", "homeland"),
    ("metropolis", "mayor", "downtown", "streets", "avenue", "suburb", "skyline", "boulevard"),
    ("spoken", "grammar", "dialect", "fluent", "vocabulary", "speakers", "accent", "idiom"),
    ("coins", "banknote", "exchange", "price", "mint", "inflation", "cost", "wallet"),
)
_N_COUNTRIES = 16

_ONSETS = _words("b c d f g h k l m n p r s t v z br dr gr kr st tr th sh")
_VOWELS = _words("a e i o u ai ea ou")
_CODAS = ["", "", "", "n", "r", "l", "s", "m", "k"]


@dataclass(frozen=True)
class Family:
    """Planted words of one kind: ``rows[e][f]`` is the word for entity ``e``, factor value ``f``.

    ``factor_pools[f]`` are the context words shared by every word with factor value ``f``;
    ``sections`` lists (section name, factor a, factor b) analogy sections drawn from it.
    """

    name: str
    factors: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    factor_pools: tuple[tuple[str, ...], ...]
    sections: tuple[tuple[str, int, int], ...]


def _syllable(rng: np.random.Generator) -> str:
    return (
        _ONSETS[rng.integers(len(_ONSETS))]
        + _VOWELS[rng.integers(len(_VOWELS))]
        + _CODAS[rng.integers(len(_CODAS))]
    )


def _invent(rng: np.random.Generator, n: int, taken: set[str], syllables: tuple[int, int],
            suffix: str = "") -> list[str]:
    """``n`` new pronounceable words not in ``taken`` (which is updated)."""
    out: list[str] = []
    while len(out) < n:
        k = int(rng.integers(syllables[0], syllables[1] + 1))
        word = "".join(_syllable(rng) for _ in range(k)) + suffix
        if len(word) >= 3 and word not in taken:
            taken.add(word)
            out.append(word)
    return out


@dataclass(frozen=True)
class _Lexicon:
    families: tuple[Family, ...]
    entity_pools: dict[tuple[str, int], tuple[str, ...]]  # (family, entity) -> context words
    noise: tuple[str, ...]  # background words, most frequent first


def _split(table: tuple[tuple[str, str, str], ...]) -> tuple[tuple[tuple[str, str], ...],
                                                            list[tuple[str, ...]]]:
    """Split ``(word, word, "six pool words")`` rows into word rows and entity pools."""
    return tuple((a, b) for a, b, _ in table), [_words(pool) for _, _, pool in table]


_ENGLISH_TABLES = (
    ("gender", ("male", "female"), _GENDER_ROLES, _GENDER_POOLS, (("family-gender", 0, 1),)),
    ("number", ("singular", "plural"), _NOUNS, _NUMBER_POOLS, (("noun-plural", 0, 1),)),
    ("tense", ("present", "past"), _VERBS, _TENSE_POOLS, (("verb-past", 0, 1),)),
)


def _real_words() -> set[str]:
    words: set[str] = set(_FUNCTION_WORDS)
    for pools in _GEO_POOLS:
        words.update(pools)
    for _, _, table, factor_pools, _ in _ENGLISH_TABLES:
        rows, entity_pools = _split(table)
        for group in (*rows, *entity_pools, *factor_pools):
            words.update(group)
    return words


@cache
def _lexicon() -> _Lexicon:
    rng = numpy_rng(_NAMES_SEED, "demo", 0)
    taken = _real_words()
    countries = _invent(rng, _N_COUNTRIES, taken, (2, 2), suffix="ia")
    capitals = _invent(rng, _N_COUNTRIES, taken, (2, 2))
    languages = [c.removesuffix("ia") + "ish" for c in countries]
    taken.update(languages)
    currencies = _invent(rng, _N_COUNTRIES, taken, (1, 1))
    geo_rows = tuple(zip(countries, capitals, languages, currencies, strict=True))
    families = [Family("geography", _GEO_FACTORS, geo_rows, _GEO_POOLS,
                       (("country-capital", 0, 1), ("country-language", 0, 2),
                        ("country-currency", 0, 3)))]
    # Invented landmarks stand for each country's own contexts.
    entity_pools = {("geography", e): tuple(_invent(rng, _ENTITY_POOL, taken, (2, 3)))
                    for e in range(_N_COUNTRIES)}
    for name, factors, table, factor_pools, sections in _ENGLISH_TABLES:
        rows, pools = _split(table)
        families.append(Family(name, factors, rows, factor_pools, sections))
        entity_pools.update({(name, e): pool for e, pool in enumerate(pools)})
    noise = _FUNCTION_WORDS + tuple(_invent(rng, _NOISE_WORDS, taken, (1, 3)))
    _check_distinct(families, entity_pools, noise)
    return _Lexicon(tuple(families), entity_pools, noise)


def _check_distinct(families: Iterable[Family], entity_pools: dict[tuple[str, int],
                    tuple[str, ...]], noise: tuple[str, ...]) -> None:
    # A word in two roles (say "one" as noise and as a number-pool word) would blur the planted
    # signal; this is a programming error in the tables above, not a user error.
    seen: list[str] = list(noise)
    for fam in families:
        seen += [w for row in fam.rows for w in row]
        seen += [w for pool in fam.factor_pools for w in pool]
    for pool in entity_pools.values():
        seen += pool
    dup = {w for w in seen if seen.count(w) > 1} if len(set(seen)) != len(seen) else set()
    if dup:
        raise AssertionError(f"demo lexicon reuses words: {sorted(dup)}")


# ---- public API ---------------------------------------------------------------------------

def planted_analogies() -> list[tuple[str, str, str, str, str]]:
    """All planted questions as ``(section, a, b, c, d)``, meaning ``a : b :: c : d``.

    Within a section every ordered pair of distinct entities gives one question (as in the
    Google questions-words file). Independent of the corpus seed.
    """
    out: list[tuple[str, str, str, str, str]] = []
    for fam in _lexicon().families:
        for section, fa, fb in fam.sections:
            for i, j in permutations(range(len(fam.rows)), 2):
                ri, rj = fam.rows[i], fam.rows[j]
                out.append((section, ri[fa], ri[fb], rj[fa], rj[fb]))
    return out


def planted_words() -> list[str]:
    """Every word that appears in a planted analogy, in a stable order."""
    return [w for fam in _lexicon().families for row in fam.rows for w in row]


def demo_probe_words() -> list[str]:
    """A few planted words whose nearest neighbours show the planted structure."""
    geo = _lexicon().families[0].rows
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
    return _write_atomic(Path(path), "\n".join(lines) + "\n")


def write_demo_corpus(path: str | os.PathLike[str], seed: int = 0, *,
                      tokens: int = DEFAULT_TOKENS) -> Path:
    """Generate the demo corpus (about ``tokens`` tokens) into ``path``; returns the path.

    Deterministic in ``(seed, tokens)``. The file is written to a temporary sibling and renamed
    into place, so an existing file at ``path`` is either fully replaced or left untouched.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise InputError(f"demo seed must be an integer >= 0, got {seed!r}; pass e.g. --seed 1")
    if not isinstance(tokens, int) or tokens < 10 * _SENTENCE_LEN:
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
    entity_pool: np.ndarray  # (T, _ENTITY_POOL) word ids
    factor_pool: np.ndarray  # (T, 8) word ids
    noise: np.ndarray  # (N,) word ids of background words, most frequent first
    noise_cdf: np.ndarray  # (N,) cumulative Zipf probabilities; last entry exactly 1.0


@cache
def _tables() -> _Tables:
    lex = _lexicon()
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
                         f"(mkdir -p {path.parent})")


def _write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary sibling + rename: all or nothing."""
    _check_target(path)
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise InputError(f"cannot write {path} ({exc.strerror or exc}); free some space or "
                         "choose a writable folder") from exc
    return path
