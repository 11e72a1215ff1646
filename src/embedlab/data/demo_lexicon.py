"""The demo corpus's words: planted families, their context pools, and background words.

Every planted word is the product of an *entity* (a country, a family role, a noun, a verb) and
a *factor value* (capital, female, plural, past...); see :mod:`embedlab.data.demo` for how
sentences use them. All words are either common English words or invented from syllables here;
no text is copied from anywhere. The lexicon comes from a fixed key, not the corpus seed, so
the planted questions are a constant of the library version.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

import numpy as np

from embedlab.seeding import numpy_rng

# The word lists are generated once from this fixed key, independent of the corpus seed, so
# that planted_analogies() is a constant of the library version.
_NAMES_SEED = 20240601
_ENTITY_POOL = 6  # context words per entity (shared by e.g. king and queen)
_NOISE_WORDS = 5000  # invented background words, on top of the function words


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
class Lexicon:
    """Every word of the demo corpus, by role."""

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
def lexicon() -> Lexicon:
    """The demo lexicon (the same on every call and platform)."""
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
    return Lexicon(tuple(families), entity_pools, noise)


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

