"""embedlab.Vectors speaks gensim's KeyedVectors dialect: every call gives gensim's answer on the
same vectors (same words in the same order, floats to 1e-5)."""

from __future__ import annotations

import copy
import errno
import os
import pickle
from decimal import Decimal
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gensim.models import KeyedVectors

from embedlab.errors import InputError
from embedlab.vectors import Vectors

# most_similar_cosmul calls gensim's deprecated init_sims
pytestmark = pytest.mark.filterwarnings(
    "ignore:Call to deprecated `init_sims`:DeprecationWarning")

DIM = 16
# case variants (King/KING after king) exercise case_insensitive; w0..w179 fill the vocabulary
NAMED = ("king", "queen", "man", "woman", "King", "KING", "paris", "france", "rome", "italy",
         "Paris", "berlin", "germany", "tokyo", "japan", "big", "bigger", "small", "smaller",
         "Queen")
WORDS = (*NAMED, *(f"w{i}" for i in range(180)))
# planted analogies: d = b - a + c (plus noise), so that some answers are right
PLANTED = (("man", "king", "woman", "queen"), ("france", "paris", "italy", "rome"),
           ("germany", "berlin", "japan", "tokyo"), ("big", "bigger", "small", "smaller"))


def _matrix() -> np.ndarray:
    rng = np.random.default_rng(20240611)
    m = rng.standard_normal((len(WORDS), DIM)).astype(np.float32)
    row = {w: i for i, w in enumerate(WORDS)}
    for variant in ("King", "KING", "Paris", "Queen"):  # near their lower-case word: answers
        m[row[variant]] = m[row[variant.lower()]] + 0.05 * rng.standard_normal(DIM)
    for a, b, c, d in PLANTED:
        m[row[d]] = m[row[b]] - m[row[a]] + m[row[c]] + 0.1 * rng.standard_normal(DIM)
    m[row["w7"]] = -m[row["w3"]]  # a word exactly opposite another
    return m


@pytest.fixture(scope="module")
def pair() -> tuple[Vectors, KeyedVectors]:
    m = _matrix()
    kv = KeyedVectors(vector_size=DIM)
    kv.add_vectors(list(WORDS), m.copy())
    return Vectors(WORDS, m, None, "test"), kv


def same(ours: Any, theirs: Any) -> None:
    """Equal results: (word, float) lists word for word, arrays and floats to 1e-5."""
    if isinstance(theirs, list):
        assert [w for w, _ in ours] == [w for w, _ in theirs]
        assert [s for _, s in ours] == pytest.approx([float(s) for _, s in theirs], abs=1e-5)
        assert all(type(w) is str and type(s) is float for w, s in ours)
    else:
        np.testing.assert_allclose(ours, theirs, atol=1e-5)


# ---- attributes and vectors ---------------------------------------------------------------

def test_attributes(pair: tuple[Vectors, KeyedVectors]) -> None:
    vec, kv = pair
    assert len(vec) == len(kv) == len(WORDS)
    assert ("king" in vec) and ("kinq" not in vec) and ("kinq" not in kv)
    assert list(vec.index_to_key) == kv.index_to_key
    assert dict(vec.key_to_index) == kv.key_to_index
    assert vec.vector_size == kv.vector_size == DIM
    np.testing.assert_array_equal(vec.vectors, kv.vectors)
    with pytest.raises(TypeError):
        vec.key_to_index["new"] = 1  # type: ignore[index]


def test_getitem_and_get_vector(pair: tuple[Vectors, KeyedVectors]) -> None:
    vec, kv = pair
    one = vec["queen"]
    assert one.shape == (DIM,) and not one.flags.writeable
    np.testing.assert_array_equal(one, kv["queen"])
    many = vec[["queen", "w3", "King"]]
    assert many.shape == (3, DIM)
    np.testing.assert_array_equal(many, kv[["queen", "w3", "King"]])
    np.testing.assert_array_equal(vec.get_vector("w5"), kv.get_vector("w5"))
    unit = vec.get_vector("w5", norm=True)
    assert not unit.flags.writeable
    np.testing.assert_allclose(unit, kv.get_vector("w5", norm=True), atol=1e-6)
    with pytest.raises(TypeError, match="not iterable"):
        iter(vec)


#: the methods docs/gensim.md says embedlab answers as gensim's KeyedVectors does ("same")
SAME = ("__getitem__", "__contains__", "get_vector", "get_index", "has_index_for",
        "get_normed_vectors", "cosine_similarities", "most_similar", "most_similar_cosmul",
        "similarity", "distance", "n_similarity", "distances", "doesnt_match",
        "similar_by_word", "similar_by_key", "similar_by_vector", "closer_than",
        "words_closer_than", "rank", "most_similar_to_given", "save_word2vec_format",
        "evaluate_word_analogies", "evaluate_word_pairs")


@pytest.mark.parametrize("name", SAME)
def test_gensim_code_passes_the_same_arguments(name: str) -> None:
    """gensim 4.4's parameters, by position and by name, with gensim's defaults (embedlab's
    own come after them, by name only); ``similarity(a, b)`` also takes gensim's w1=, w2=."""
    import inspect

    theirs = [p for p in inspect.signature(getattr(KeyedVectors, name)).parameters.values()
              if p.name != "self"]
    ours = inspect.signature(getattr(Vectors, name)).parameters
    positional = [p.name for p in ours.values() if p.name != "self" and p.kind in (
        p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert len(positional) == len(theirs)
    for i, param in enumerate(theirs):
        assert param.name in ours
        renamed = {"w1": "a", "w2": "b"} if name == "similarity" else {}
        assert positional[i] == renamed.get(param.name, param.name)
        if param.default is not param.empty:
            assert ours[param.name].default == param.default


def test_rows_by_number_as_gensim(pair: tuple[Vectors, KeyedVectors]) -> None:
    vec, kv = pair
    for key in (5, np.int64(3), len(WORDS) - 1):
        np.testing.assert_array_equal(vec[key], kv[key])
        np.testing.assert_array_equal(vec.get_vector(key), kv.get_vector(key))
    np.testing.assert_array_equal(vec[[5, "king", 0]], kv[[5, "king", 0]])
    for key in (0, 5, len(WORDS) - 1, len(WORDS), -1, "king", "kinq"):
        assert (key in vec) == (key in kv), key
    with pytest.raises(KeyError, match=f"Key '{len(WORDS)}' not present"):
        vec[len(WORDS)]


def test_row_numbers_are_keys_in_every_query_as_in_gensim(
        pair: tuple[Vectors, KeyedVectors]) -> None:
    """A row number is a key wherever gensim's queries take one (its cosmul aside, which
    multiplies the matrix by the number)."""
    vec, kv = pair
    king, woman, man = (WORDS.index(w) for w in ("king", "woman", "man"))
    same(vec.most_similar(king, topn=5), kv.most_similar(king, topn=5))
    same(vec.most_similar(positive=[king, np.int64(woman)], negative=[man], topn=5),
         kv.most_similar(positive=[king, np.int64(woman)], negative=[man], topn=5))
    assert vec.similarity(king, woman) == pytest.approx(float(kv.similarity(king, woman)), abs=1e-6)
    assert vec.distance(king, woman) == pytest.approx(float(kv.distance(king, woman)), abs=1e-6)
    same(vec.distances(king, [woman, man]), kv.distances(king, [woman, man]))
    assert vec.n_similarity([king], [woman]) == pytest.approx(
        float(kv.n_similarity([king], [woman])), abs=1e-6)
    assert vec.most_similar_to_given(king, [woman, man]) == kv.most_similar_to_given(
        king, [woman, man])
    assert vec.rank(king, woman) == kv.rank(king, woman)
    assert vec.closer_than(king, woman) == kv.closer_than(king, woman)
    assert vec.doesnt_match([king, woman, man]) == kv.doesnt_match([king, woman, man])
    same(vec.similar_by_key(king, topn=3), kv.similar_by_key(king, topn=3))
    same(vec.most_similar_cosmul(positive=["king"], topn=3),
         vec.most_similar_cosmul(positive=[king], topn=3))
    with pytest.raises(KeyError, match="row 200 is not in the vocabulary"):
        vec.most_similar(len(WORDS))


def test_queries_are_checked_as_gensim_users_pass_them(
        pair: tuple[Vectors, KeyedVectors]) -> None:
    vec, kv = pair
    assert vec.most_similar_cosmul("king", topn=None).dtype == \
        kv.most_similar_cosmul("king", topn=None).dtype == np.float64
    query = {"positive": ["king", "woman"], "negative": ["man"], "topn": None}
    assert vec.most_similar_cosmul(**query).dtype == \
        kv.most_similar_cosmul(**query).dtype == np.float32
    query = {"positive": [VECTOR.astype(np.float64)], "negative": ["man"], "topn": None}
    assert vec.most_similar_cosmul(**query).dtype == \
        kv.most_similar_cosmul(**query).dtype == np.float64
    with pytest.raises(InputError, match=r"^topn must be an integer or None, got 2.5"):
        vec.most_similar_cosmul("king", topn=2.5)  # type: ignore[call-overload]
    with pytest.raises(InputError, match=r"takes words and vectors, not \(word, weight\) pairs"):
        vec.most_similar_cosmul(positive=[("king", 2.0)])
    with pytest.raises(TypeError, match=r"pass k or topn, not both \(got k=3, topn=4\)"):
        vec.most_similar("king", k=3, topn=4)
    with pytest.raises(InputError) as info:
        vec.most_similar(positive=[np.ones(5)])
    assert str(info.value) == (f"a query vector must have {DIM} values (the vectors' "
                               "dimension), got one of shape (5,)")
    with pytest.raises(InputError, match=f"must have {DIM} values"):
        vec.distances(np.ones(DIM + 1))


def test_the_norms_the_queries_use_are_read_only(pair: tuple[Vectors, KeyedVectors]) -> None:
    vec, _ = pair
    before = vec.most_similar("king", topn=3)
    with pytest.raises(ValueError, match="read-only"):
        vec.norms[:] = 1000.0
    assert vec.most_similar("king", topn=3) == before


def test_arguments_of_the_wrong_type_are_one_line(pair: tuple[Vectors, KeyedVectors]) -> None:
    import embedlab

    vec, _ = pair
    with pytest.raises(InputError) as info:
        vec.most_similar("king", topn="5")  # type: ignore[call-overload]
    assert str(info.value) == "topn must be an integer or None, got '5'; e.g. topn=10"
    with pytest.raises(InputError, match=r"^k must be a positive integer, got True; e\.g\. k=10$"):
        vec.most_similar("king", k=True)
    with pytest.raises(InputError, match=r"^restrict_vocab must be None or an integer >= 1, got "
                                         r"True; e\.g\. restrict_vocab="):
        vec.most_similar("king", restrict_vocab=True)
    for weight in (np.array(0.5), Decimal("0.5"), np.float16(0.5)):  # numbers gensim takes
        assert vec.most_similar(positive=[("king", weight)], topn=3) == \
            vec.most_similar(positive=[("king", 0.5)], topn=3)
    with pytest.raises(InputError) as info:
        vec.most_similar(positive=[("king", "queen")])
    assert str(info.value) == ("a (word, weight) pair needs a number as its weight, got "
                               "('king', 'queen'); e.g. ('king', 0.5)")
    with pytest.raises(InputError) as info:
        embedlab.load(3)
    assert str(info.value) == ("path= must be the path of a run folder, a checkpoint folder or a "
                               "vectors file (a str or os.PathLike), got int 3")


# ---- most_similar, most_similar_cosmul ----------------------------------------------------

VECTOR = np.linspace(-1, 1, DIM, dtype=np.float32)
QUERIES: list[dict[str, Any]] = [
    {"positive": "king"},
    {"positive": ["king"], "topn": 5},
    {"positive": ["king", "woman"], "negative": ["man"], "topn": 7},
    {"positive": ["king", "woman"], "negative": "man", "topn": 3},
    {"negative": ["w3"], "topn": 4},
    {"positive": [("king", 2.0), "woman"], "negative": [("man", -0.5)], "topn": 6},
    {"positive": [VECTOR], "topn": 5},
    {"positive": VECTOR, "negative": ["w1"], "topn": 5},
    {"positive": ["paris", "italy"], "negative": ["france"], "restrict_vocab": 50},
    {"positive": ["w150"], "restrict_vocab": 100},  # the query word itself is not a candidate
    {"positive": ["king"], "topn": len(WORDS) + 5},
    {"positive": ["king"], "topn": 0},
    {"positive": ["king"], "topn": -1},
    {"positive": ["king"], "negative": 3, "topn": 5},  # by name, an int is a row, as in gensim
    {"positive": "king", "negative": np.int64(3)},
    {"positive": ["w12"], "clip_start": 10, "clip_end": 60, "topn": 8},
    {"positive": ["king", "w40"], "negative": ["man"], "clip_start": 30, "topn": 6},
    {"positive": ["w150"], "clip_end": 100, "topn": 4},
    {"positive": ["king"], "clip_end": len(WORDS) + 50, "topn": 4},
    {"positive": ["king"], "clip_start": 5, "clip_end": 6, "topn": 3},
    {"positive": ["king"], "indexer": None},
]


@pytest.mark.parametrize("kwargs", QUERIES)
def test_most_similar(pair: tuple[Vectors, KeyedVectors], kwargs: dict[str, Any]) -> None:
    vec, kv = pair
    same(vec.most_similar(**kwargs), kv.most_similar(**kwargs))


@pytest.mark.parametrize("kwargs", [
    {"positive": ["king"]},
    {"positive": ["king", "woman"], "negative": ["man"]},
    {"positive": [VECTOR], "negative": ["w1"]},
    {"positive": ["paris", "italy"], "negative": ["france"], "restrict_vocab": 70},
])
def test_most_similar_all_scores(pair: tuple[Vectors, KeyedVectors],
                                 kwargs: dict[str, Any]) -> None:
    vec, kv = pair
    ours = vec.most_similar(**kwargs, topn=None)
    assert isinstance(ours, np.ndarray) and ours.shape == (kwargs.get("restrict_vocab", len(vec)),)
    same(ours, kv.most_similar(**kwargs, topn=None))


@pytest.mark.parametrize("kwargs", [
    {"positive": ["w12"], "clip_start": 10, "clip_end": 60},
    {"positive": ["king"], "negative": ["man"], "clip_start": 150},
])
def test_most_similar_all_scores_of_clipped_rows(pair: tuple[Vectors, KeyedVectors],
                                                 kwargs: dict[str, Any]) -> None:
    vec, kv = pair
    ours = vec.most_similar(**kwargs, topn=None)
    assert isinstance(ours, np.ndarray)
    assert len(ours) == kwargs.get("clip_end", len(WORDS)) - kwargs["clip_start"]
    same(ours, kv.most_similar(**kwargs, topn=None))


def test_most_similar_positional(pair: tuple[Vectors, KeyedVectors]) -> None:
    vec, kv = pair
    same(vec.most_similar("king", "man", 4), kv.most_similar("king", "man", 4))
    same(vec.most_similar(["queen"], None, 6), kv.most_similar(["queen"], None, 6))
    # gensim's order: positive, negative, topn, clip_start, clip_end, restrict_vocab, indexer
    same(vec.most_similar("w12", None, 5, 10, 30), kv.most_similar("w12", None, 5, 10, 30))
    same(vec.most_similar("king", None, 5, 0, None, 40, None),
         kv.most_similar("king", None, 5, 0, None, 40, None))
    # an integer second and last is embedlab's count; followed by topn, gensim's row number
    assert vec.most_similar("king", 3) == vec.most_similar("king", k=3)
    same(vec.most_similar("king", 3, 5), kv.most_similar("king", 3, 5))


def test_most_similar_refuses_what_gensim_would_misread(
        pair: tuple[Vectors, KeyedVectors]) -> None:
    vec, _ = pair
    for count in (3, np.int64(3)):
        with pytest.raises(TypeError) as type_error:
            vec.most_similar("king", count, topn=5)
        assert str(type_error.value) == ("a second positional integer is the count k, and topn= "
                                         "is a count too; pass one of them (negative=3, by name, "
                                         "is row 3 as a negative key, as in gensim)")
    for kwargs, message in [
            ({"indexer": "annoy"}, "indexer='annoy': approximate indexes (gensim's "
                                   "AnnoyIndexer...) are not supported; drop indexer=: "
                                   "most_similar compares the query with every candidate row "
                                   "exactly"),
            ({"clip_start": -1}, "clip_start must be an integer >= 0 (the first candidate row), "
                                 "got -1; e.g. clip_start=0"),
            ({"clip_end": 0}, "clip_end must be None (up to the last row) or an integer >= 1 "
                              f"(the row after the last candidate), got 0; e.g. "
                              f"clip_end={len(WORDS)}"),
            ({"clip_start": 30, "clip_end": 30}, "clip_start=30 leaves no candidate rows (they "
                                                 "end at row 30: clip_end=30, 200 words); pass "
                                                 "a clip_start below 30"),
            ({"clip_start": 200}, "clip_start=200 leaves no candidate rows (they end at row 200: "
                                  "clip_end=None, 200 words); pass a clip_start below 200"),
            ({"restrict_vocab": 50, "clip_end": 60}, "restrict_vocab=50 and clip_start=0/"
                                                     "clip_end=60 both choose the candidate rows "
                                                     "(gensim ignores clip_start/clip_end then); "
                                                     "pass one of them, e.g. clip_end=50 alone")]:
        with pytest.raises(InputError) as info:
            vec.most_similar("king", **kwargs)
        assert str(info.value) == message


COSMUL: list[dict[str, Any]] = [
    {"positive": "king"},
    {"positive": ["king", "woman"], "negative": ["man"], "topn": 7},
    {"positive": ["king", "woman"], "negative": "man", "topn": 3},
    {"positive": ["bigger", "small", "w9"], "negative": ["big", "w8"], "topn": 5},
    {"positive": [VECTOR, "queen"], "topn": 5},
    {"positive": ["king"], "topn": len(WORDS) + 5},
    {"positive": ["king"], "topn": 0},
]


@pytest.mark.parametrize("kwargs", COSMUL)
def test_most_similar_cosmul(pair: tuple[Vectors, KeyedVectors], kwargs: dict[str, Any]) -> None:
    vec, kv = pair
    same(vec.most_similar_cosmul(**kwargs), kv.most_similar_cosmul(**kwargs))
    if kwargs.get("topn", 10) > 0:
        same(vec.most_similar_cosmul(**{**kwargs, "topn": None}),
             kv.most_similar_cosmul(**{**kwargs, "topn": None}))


def test_most_similar_cosmul_restrict_vocab(pair: tuple[Vectors, KeyedVectors]) -> None:
    # gensim 4.4 accepts restrict_vocab here and ignores it; embedlab answers what it means:
    # gensim's answer on the first N words alone
    vec, _ = pair
    first = KeyedVectors(vector_size=DIM)
    first.add_vectors(list(WORDS[:60]), np.array(vec.matrix[:60]))
    query = {"positive": ["paris", "italy"], "negative": ["france"]}
    same(vec.most_similar_cosmul(**query, topn=8, restrict_vocab=60),
         first.most_similar_cosmul(**query, topn=8))
    same(vec.most_similar_cosmul(**query, topn=None, restrict_vocab=60),
         first.most_similar_cosmul(**query, topn=None))


# ---- similarities -------------------------------------------------------------------------

def test_similarities(pair: tuple[Vectors, KeyedVectors]) -> None:
    vec, kv = pair
    for a, b in (("king", "queen"), ("w3", "w7"), ("w4", "w4"), ("paris", "Paris")):
        assert vec.similarity(a, b) == pytest.approx(float(kv.similarity(a, b)), abs=1e-6)
        assert vec.similarity(w1=a, w2=b) == vec.similarity(a, b)
        assert vec.distance(a, b) == pytest.approx(float(kv.distance(a, b)), abs=1e-6)
    for ws1, ws2 in ((["king", "man"], ["queen", "woman"]), (["w1"], ["w2", "w3", "w1"])):
        assert vec.n_similarity(ws1, ws2) == pytest.approx(float(kv.n_similarity(ws1, ws2)),
                                                           abs=1e-6)
    with pytest.raises(ZeroDivisionError):
        vec.n_similarity([], ["king"])


def test_distances(pair: tuple[Vectors, KeyedVectors]) -> None:
    vec, kv = pair
    same(vec.distances("king"), kv.distances("king"))
    same(vec.distances("king", ["queen", "w3", "king"]), kv.distances("king", ["queen", "w3",
                                                                               "king"]))
    same(vec.distances(VECTOR, ("w1", "w2")), kv.distances(VECTOR, ("w1", "w2")))
    same(vec.distances(VECTOR), kv.distances(VECTOR))
    assert vec.distances("king").dtype == np.float32


@pytest.mark.parametrize("kwargs", [{}, {"topn": 3}, {"topn": 5, "restrict_vocab": 40},
                                    {"topn": None}])
def test_similar_by_word_key_and_vector(pair: tuple[Vectors, KeyedVectors],
                                        kwargs: dict[str, Any]) -> None:
    vec, kv = pair
    same(vec.similar_by_word("king", **kwargs), kv.similar_by_word("king", **kwargs))
    same(vec.similar_by_key("paris", **kwargs), kv.similar_by_key("paris", **kwargs))
    same(vec.similar_by_vector(VECTOR, **kwargs), kv.similar_by_vector(VECTOR, **kwargs))


@pytest.mark.parametrize(("key1", "key2"), [("king", "queen"), ("king", "w100"),
                                            ("w3", "w7"), ("paris", "Paris"), ("w5", "w5")])
def test_closer_than_and_rank(pair: tuple[Vectors, KeyedVectors], key1: str, key2: str) -> None:
    vec, kv = pair
    assert vec.closer_than(key1, key2) == kv.closer_than(key1, key2)
    assert vec.rank(key1, key2) == kv.rank(key1, key2)
    assert all(type(w) is str for w in vec.closer_than(key1, key2))
    with pytest.raises(KeyError, match="Key 'kinq' not present"):
        vec.rank("king", "kinq")


def test_indexes_normed_vectors_and_given_words(pair: tuple[Vectors, KeyedVectors]) -> None:
    vec, kv = pair
    for key in ("king", "w179", 0, 199, np.int64(3)):
        assert vec.get_index(key) == kv.get_index(key)
        assert vec.has_index_for(key) and kv.has_index_for(key)
    for key in ("kinq", 200, -1):
        assert vec.get_index(key, default=7) == kv.get_index(key, default=7) == 7
        assert not vec.has_index_for(key) and not kv.has_index_for(key)
        with pytest.raises(KeyError, match="not present"):
            vec.get_index(key)
    same(vec.get_normed_vectors(), kv.get_normed_vectors())
    same(vec.cosine_similarities(VECTOR, vec.vectors[:10]),
         KeyedVectors.cosine_similarities(VECTOR, kv.vectors[:10]))
    rows = np.stack([VECTOR, np.zeros(DIM, np.float32)])  # a zero vector: cosine 0, as documented
    assert vec.cosine_similarities(VECTOR, rows).tolist() == pytest.approx([1.0, 0.0])
    assert vec.cosine_similarities(np.zeros(DIM, np.float32), rows).tolist() == [0.0, 0.0]
    for key1, keys in (("king", ["man", "queen", "w3"]), ("w3", ["w7", "w8", "w9"]),
                       ("paris", ["rome", "Paris"])):
        assert vec.most_similar_to_given(key1, keys) == kv.most_similar_to_given(key1, keys)


def test_save_word2vec_format_writes_and_overwrites_as_gensim(
        pair: tuple[Vectors, KeyedVectors], tmp_path: Path) -> None:
    vec, kv = pair
    for binary in (False, True):
        ours, theirs = tmp_path / f"ours{binary}", tmp_path / f"theirs{binary}"
        ours.write_text("an older file")  # gensim overwrites: so does the dialect
        vec.save_word2vec_format(str(ours), binary=binary)
        kv.save_word2vec_format(str(theirs), binary=binary)
        back = KeyedVectors.load_word2vec_format(str(ours), binary=binary)
        assert back.index_to_key == kv.index_to_key
        np.testing.assert_array_equal(back.vectors, kv.vectors)
    # gensim's other options at their defaults, positionally too, are what it writes anyway
    vec.save_word2vec_format(str(tmp_path / "d.txt"), None, False, None, True, "", False, "count")
    assert KeyedVectors.load_word2vec_format(str(tmp_path / "d.txt")).index_to_key == \
        kv.index_to_key
    with pytest.raises(InputError) as info:
        vec.save_word2vec_format(tmp_path / "v.txt", fvocab=tmp_path / "v.vocab", append=True)
    assert str(info.value) == ("save_word2vec_format writes fname= and binary= only; drop "
                               "fvocab=, append= (to_npy writes the vocabulary with its counts)")
    assert not (tmp_path / "v.txt").exists()
    with pytest.raises(InputError) as info:  # the counts are fvocab='s alone
        vec.save_word2vec_format(tmp_path / "v.txt", write_header=False)
    assert str(info.value) == ("save_word2vec_format writes fname= and binary= only; drop "
                               "write_header=")
    (tmp_path / "folder").mkdir()
    with pytest.raises(InputError) as info:  # its own argument's name, not to_word2vec's
        vec.save_word2vec_format(tmp_path / "folder")
    assert str(info.value).startswith(f"fname={str(tmp_path / 'folder')!r} is a folder; ")


@pytest.mark.parametrize("words", [
    ["king", "queen", "man", "w3"], ["paris", "rome", "berlin", "tokyo", "w10"], ["w3", "w7"],
    ["w5"],
])
def test_doesnt_match(pair: tuple[Vectors, KeyedVectors], words: list[str]) -> None:
    vec, kv = pair
    assert vec.doesnt_match(words) == kv.doesnt_match(words)
    assert vec.doesnt_match(np.array(words)) == kv.doesnt_match(np.array(words))


def test_a_numpy_array_of_words_is_words_in_every_query(pair: tuple[Vectors, KeyedVectors]
                                                        ) -> None:
    """np.array(["king", "man"]) is two words, as a list of them is (gensim's doesnt_match
    reads it so; its most_similar takes it for a vector and fails in NumPy), not one vector."""
    vec, kv = pair
    words = np.array(["king", "man"])
    same(vec.most_similar(positive=words, negative=np.array(["w3"]), topn=4),
         kv.most_similar(positive=["king", "man"], negative=["w3"], topn=4))
    same(vec.most_similar_cosmul(positive=words, topn=4),
         kv.most_similar_cosmul(positive=["king", "man"], topn=4))
    same(vec.most_similar(positive=np.array(["king", "man"], dtype=object), topn=3),
         kv.most_similar(positive=["king", "man"], topn=3))
    same(vec.distances("king", words), kv.distances("king", ["king", "man"]))
    same(vec.distances("king", np.array([], dtype=str)), kv.distances("king"))


def test_the_gensim_names_of_refusals_and_older_methods(pair: tuple[Vectors, KeyedVectors]
                                                        ) -> None:
    vec, kv = pair
    for caught in (ZeroDivisionError, ValueError):  # gensim's, and embedlab's refusals'
        with pytest.raises(caught, match="At least one of the passed list is empty"):
            vec.n_similarity(["king"], [])
    with pytest.raises(ZeroDivisionError):
        kv.n_similarity(["king"], [])
    assert vec.words_closer_than("king", "w100") == kv.closer_than("king", "w100")
    same(vec.similar_by_key(key="paris", topn=4), kv.similar_by_key(key="paris", topn=4))
    same(vec.similar_by_word(word="paris", topn=4), kv.similar_by_word(word="paris", topn=4))
    with pytest.raises(ValueError, match="unknown metric 'manhattan'; use 'cosine' or "
                                         "'euclidean'"):
        vec.most_similar("king", metric="manhattan")


# ---- evaluation ---------------------------------------------------------------------------

@pytest.fixture
def analogies(tmp_path: Path) -> Path:
    rng = np.random.default_rng(5)
    lines = [": planted"]
    lines += [" ".join(q) for q in PLANTED]
    lines += [" ".join(q).upper() for q in PLANTED]  # matched only case-insensitively
    lines += ["man KING Woman queen", "king queen paris"]  # a line of 3 words is skipped
    lines += [": random", "  ", "Paris france Rome italy"]
    # a case variant of b is the best answer: skipped when case-insensitive, chosen when not
    lines += ["w20 Paris w21 w22", "w30 king w31 King", "w40 KING w41 queen", "w42 paris w43 Paris"]
    for _ in range(40):
        lines.append(" ".join(WORDS[i] for i in rng.choice(len(WORDS), 4, replace=False)))
    lines += [": empty section", ": unknown words", "man king woman unknownword",
              "w190 w1 w2 w3", "w1 w150 w2 w3", "man king woman queen"]
    path = tmp_path / "questions.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("kwargs", [
    {}, {"restrict_vocab": 100}, {"restrict_vocab": 30}, {"case_insensitive": False},
    {"dummy4unknown": True}, {"restrict_vocab": 120, "case_insensitive": False,
                              "dummy4unknown": True},
    {"similarity_function": "most_similar"},
])
def test_evaluate_word_analogies(pair: tuple[Vectors, KeyedVectors], analogies: Path,
                                 kwargs: dict[str, Any]) -> None:
    vec, kv = pair
    score, sections = vec.evaluate_word_analogies(analogies, **kwargs)
    gensim_score, gensim_sections = kv.evaluate_word_analogies(str(analogies), **kwargs)
    assert sections == gensim_sections
    assert score == pytest.approx(gensim_score)
    assert sections[-1]["section"] == "Total accuracy" and sections[-1]["correct"]
    assert vec.evaluate_word_analogies(str(analogies), **kwargs) == (score, sections)


@pytest.fixture
def word_pairs(tmp_path: Path) -> Path:
    rng = np.random.default_rng(9)
    lines = ["# word1\tword2\tscore", "king\tqueen\t8.5", "KING\tQueen\t8.0", "man\twoman\t7.9",
             "paris\tFrance\t6.2", "w4\tw4\t10", "w3\tw7\t0.1", "king\tunknownword\t5",
             "w190\tw2\t1.0", "w1\tw150\t3.5", "not\ta pair", "king\tqueen\tlots", ""]
    for _ in range(30):
        a, b = rng.choice(len(WORDS), 2, replace=False)
        lines.append(f"{WORDS[a]}\t{WORDS[b]}\t{rng.uniform(0, 10):.2f}")
    path = tmp_path / "pairs.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("kwargs", [
    {}, {"restrict_vocab": 100}, {"case_insensitive": False}, {"dummy4unknown": True},
    {"restrict_vocab": 120, "case_insensitive": False, "dummy4unknown": True},
])
def test_evaluate_word_pairs(pair: tuple[Vectors, KeyedVectors], word_pairs: Path,
                             kwargs: dict[str, Any]) -> None:
    vec, kv = pair
    (pearson, pearson_p), (spearman, spearman_p), oov = vec.evaluate_word_pairs(word_pairs,
                                                                                 **kwargs)
    theirs = kv.evaluate_word_pairs(str(word_pairs), **kwargs)
    assert (pearson, pearson_p) == pytest.approx(tuple(theirs[0]), abs=1e-5)
    assert (spearman, spearman_p) == pytest.approx(tuple(theirs[1]), abs=1e-5)
    assert oov == theirs[2]  # to the last bit
    assert oov > 0


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_compressed_question_and_pair_files_are_read_as_gensim_reads_them(
        pair: tuple[Vectors, KeyedVectors], analogies: Path, word_pairs: Path,
        suffix: str) -> None:
    import bz2
    import gzip
    import lzma

    compress = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[suffix]
    vec, kv = pair
    packed = []
    for path in (analogies, word_pairs):
        packed.append(path.with_name(path.name + suffix))
        packed[-1].write_bytes(compress(path.read_bytes()))
    assert vec.evaluate_word_analogies(packed[0]) == vec.evaluate_word_analogies(analogies)
    assert vec.evaluate_word_analogies(packed[0])[1] == \
        kv.evaluate_word_analogies(str(packed[0]))[1]
    assert vec.evaluate_word_pairs(packed[1]) == vec.evaluate_word_pairs(word_pairs)
    assert vec.evaluate_word_pairs(packed[1])[2] == kv.evaluate_word_pairs(str(packed[1]))[2]
    assert vec.evaluate_analogies(packed[0]).total == vec.evaluate_analogies(analogies).total
    assert vec.evaluate_similarity(packed[1]).spearman == \
        vec.evaluate_similarity(word_pairs).spearman
    damaged = packed[1].with_name("damaged.tsv" + suffix)
    damaged.write_bytes(packed[1].read_bytes()[:-5])
    for call in (vec.evaluate_word_pairs, vec.evaluate_similarity):
        with pytest.raises(InputError, match=rf"^cannot decompress [a-z-]+ file {damaged} "
                                             r"\(.+\); the file is damaged or not "):
            call(damaged)


def test_evaluate_word_pairs_delimiter(pair: tuple[Vectors, KeyedVectors],
                                       tmp_path: Path) -> None:
    vec, kv = pair
    path = tmp_path / "pairs.csv"
    path.write_text("king,queen,8.5\nman,woman,7\nw3,w7,0.5\nw4,w5,2\nking\tqueen\t9\n",
                    encoding="utf-8")
    ours = vec.evaluate_word_pairs(path, delimiter=",")
    theirs = kv.evaluate_word_pairs(str(path), delimiter=",")
    assert ours[0] == pytest.approx(tuple(theirs[0]), abs=1e-5)
    assert ours[1] == pytest.approx(tuple(theirs[1]), abs=1e-5)
    assert ours[2] == pytest.approx(theirs[2])


def test_evaluation_errors_name_python_arguments(pair: tuple[Vectors, KeyedVectors],
                                                 tmp_path: Path, word_pairs: Path) -> None:
    vec, _ = pair
    with pytest.raises(InputError, match=r"restrict_vocab must be None or an integer >= 1, "
                                         r"got 0; e\.g\. restrict_vocab=300000"):
        vec.evaluate_word_analogies(word_pairs, restrict_vocab=0)
    with pytest.raises(InputError, match="does not exist; pass the path of a questions-words"):
        vec.evaluate_word_analogies(tmp_path / "missing.txt")
    with pytest.raises(InputError, match="does not exist; pass the path of a 'word1<TAB>"):
        vec.evaluate_word_pairs(tmp_path / "missing.tsv")
    with pytest.raises(InputError, match=r"0 usable word pairs .* check delimiter=';'"):
        vec.evaluate_word_pairs(word_pairs, delimiter=";")
    with pytest.raises(InputError, match="question before the first ': section' line"):
        vec.evaluate_word_analogies(word_pairs)
    with pytest.raises(InputError) as info:
        vec.evaluate_word_analogies(word_pairs, similarity_function="most_similar_cosmul")
    assert str(info.value) == ("similarity_function='most_similar_cosmul': "
                               "evaluate_word_analogies answers with most_similar (3CosAdd) only "
                               "(gensim 4.4 takes another name and ignores it); drop "
                               "similarity_function=, or for 3CosMul call "
                               "evaluate_analogies(path, method='3cosmul')")


@pytest.mark.parametrize(("name", "call"), [
    ("norm", lambda vec, _a, _p: vec.get_vector("king", norm="no")),
    ("case_insensitive", lambda vec, a, _p: vec.evaluate_word_analogies(a, case_insensitive="no")),
    ("dummy4unknown", lambda vec, a, _p: vec.evaluate_word_analogies(a, dummy4unknown="no")),
    ("case_insensitive", lambda vec, _a, p: vec.evaluate_word_pairs(p, case_insensitive="no")),
    ("dummy4unknown", lambda vec, _a, p: vec.evaluate_word_pairs(p, dummy4unknown="no")),
])
def test_a_bool_argument_refuses_what_is_not_a_bool(pair: tuple[Vectors, KeyedVectors],
                                                    analogies: Path, word_pairs: Path,
                                                    name: str, call: Any) -> None:
    """"no" is truthy: get_vector(norm="no") returned the unit vector, the opposite."""
    vec, _ = pair
    with pytest.raises(InputError) as info:
        call(vec, analogies, word_pairs)
    assert str(info.value) == (f"{name}= must be True or False, got the str 'no'; pass e.g. "
                               f"{name}=True")
    np.testing.assert_array_equal(vec.get_vector("king", norm=np.bool_(False)), vec["king"])


def test_a_path_that_is_no_path_is_one_line_naming_the_argument(
        pair: tuple[Vectors, KeyedVectors], analogies: Path, word_pairs: Path) -> None:
    """open() takes an int for a file descriptor: evaluate_word_pairs(fd) read, and closed,
    whatever the process had open there; the others raised Python's raw TypeError."""
    import contextlib
    import os

    vec, _ = pair
    fd = os.open(word_pairs, os.O_RDONLY)
    try:
        with pytest.raises(InputError) as info:
            vec.evaluate_word_pairs(fd)  # type: ignore[arg-type]
        assert str(info.value) == ("pairs= must be the path of a word-pairs file (a str or "
                                   f"os.PathLike), got int {fd}")
        os.fstat(fd)  # still open
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    with pytest.raises(InputError) as info:
        vec.evaluate_word_analogies(5)  # type: ignore[arg-type]
    assert str(info.value) == ("analogies= must be the path of a questions-words file (a str "
                               "or os.PathLike), got int 5")
    with pytest.raises(InputError) as info:
        vec.save_word2vec_format(5)  # type: ignore[arg-type]
    assert str(info.value) == ("fname= must be the path of the word2vec file to write (a str or "
                               "os.PathLike), got int 5")


@pytest.mark.parametrize(("key", "shown"), [(1.5, "float 1.5"), (b"ab", "bytes b'ab'"),
                                            (np.array(3), "ndarray array(3)"),
                                            (None, "NoneType None")])
def test_a_key_of_another_type_is_one_line(pair: tuple[Vectors, KeyedVectors], key: Any,
                                           shown: str) -> None:
    """vec[1.5] was "'float' object is not iterable"; vec[b"ab"] looked up rows 97 and 98."""
    vec, _ = pair
    with pytest.raises(InputError) as info:
        vec[key]
    assert str(info.value) == (f"key_or_keys must be a word (a str), a row number (an int) or "
                               f"a list of them, got {shown}; e.g. vec['king'] or "
                               "vec[['king', 'queen']]")
    np.testing.assert_array_equal(vec[("king", 3)], vec[["king", 3]])


def test_a_missing_file_is_the_file_not_found_error_gensim_raises(
        pair: tuple[Vectors, KeyedVectors], tmp_path: Path) -> None:
    """Code ported from gensim catches OSError: a missing file is one, and an InputError."""
    import embedlab

    vec, kv = pair
    missing = tmp_path / "missing.txt"
    with pytest.raises(FileNotFoundError):
        kv.evaluate_word_pairs(str(missing))
    for call, message in [
            (lambda: embedlab.load(missing), f"{missing} does not exist; pass a run folder, a "
                                             "checkpoint folder or a word2vec/.npy vectors file"),
            (lambda: vec.evaluate_word_analogies(missing), f"analogy file {missing} does not "
                                                           "exist; pass the path of a "
                                                           "questions-words file"),
            (lambda: vec.evaluate_word_pairs(missing), f"word-pairs file {missing} does not "
                                                       "exist; pass the path of a 'word1<TAB>"
                                                       "word2<TAB>score' file"),
            (lambda: vec.evaluate_analogies(missing), f"analogy file {missing} does not exist; "
                                                      "pass the path of a questions-words file"),
            (lambda: vec.evaluate_similarity(missing), f"similarity file {missing} does not "
                                                       "exist; pass the path of a 'word1<TAB>"
                                                       "word2<TAB>score' file")]:
        with pytest.raises(OSError) as info:
            call()
        assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, InputError)
        assert str(info.value) == message
        assert info.value.filename == str(missing)
        # a multiprocessing worker's error reaches its parent: pickle and copy rebuild it
        for again in (pickle.loads(pickle.dumps(info.value)), copy.deepcopy(info.value)):
            assert type(again) is type(info.value) and str(again) == message
            assert (again.filename, again.errno) == (str(missing), errno.ENOENT)
    (tmp_path / "folder.txt").mkdir()  # there, but unreadable: an InputError alone
    with pytest.raises(InputError) as unreadable:
        vec.evaluate_word_analogies(tmp_path / "folder.txt")
    assert not isinstance(unreadable.value, OSError)


# ---- unknown words ------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda v: v["kinq"], lambda v: v[["king", "kinq"]], lambda v: v.get_vector("kinq"),
    lambda v: v.most_similar_cosmul(["king", "kinq"]),
    lambda v: v.most_similar_cosmul(["king"], ["kinq"]),
    lambda v: v.distance("king", "kinq"), lambda v: v.distances("kinq"),
    lambda v: v.distances("king", ["kinq"]),
])
def test_unknown_words_are_gensims_key_error(pair: tuple[Vectors, KeyedVectors],
                                             call: Any) -> None:
    vec, kv = pair
    with pytest.raises(KeyError) as ours:
        call(vec)
    assert ours.value.args == ("Key 'kinq' not present",)
    with pytest.raises(KeyError) as theirs:
        call(kv)
    assert theirs.value.args == ours.value.args


def test_unknown_words_that_gensim_skips_are_key_errors(pair: tuple[Vectors, KeyedVectors]
                                                        ) -> None:
    # gensim 4.4's n_similarity and doesnt_match skip an unknown word; embedlab names it
    vec, kv = pair
    with pytest.raises(KeyError, match="Key 'kinq' not present"):
        vec.n_similarity(["king"], ["kinq", "queen"])
    assert kv.n_similarity(["king"], ["kinq", "queen"]) == pytest.approx(
        vec.n_similarity(["king"], ["queen"]), abs=1e-6)
    with pytest.raises(KeyError, match="Key 'kinq' not present"):
        vec.doesnt_match(["king", "kinq", "queen", "w3"])
    assert kv.doesnt_match(["king", "kinq", "queen", "w3"]) == vec.doesnt_match(
        ["king", "queen", "w3"])


def test_unknown_words_in_most_similar_and_similarity(pair: tuple[Vectors, KeyedVectors]
                                                      ) -> None:
    # embedlab's own methods keep their InputError, with suggestions, which is a KeyError too
    vec, _ = pair
    for call in (lambda: vec.most_similar(positive=["kinq"]),
                 lambda: vec.most_similar(["king"], ["kinq"]),
                 lambda: vec.similarity("king", "kinq")):
        with pytest.raises(KeyError) as e:
            call()
        assert isinstance(e.value, InputError)
        assert str(e.value).startswith("'kinq' is not in the vocabulary (200 words); did you "
                                       "mean king")


def test_a_name_for_another_compressor_is_refused_from_python_too(
        pair: tuple[Vectors, KeyedVectors], tmp_path: Path) -> None:
    vec, _ = pair
    with pytest.raises(InputError) as info:
        vec.save_word2vec_format(tmp_path / "v.zip")
    assert str(info.value).startswith(f"fname='{tmp_path / 'v.zip'}': embedlab does not write "
                                      ".zip files; it compresses for a name ending in .gz, .bz2 "
                                      "or .xz")
    assert not (tmp_path / "v.zip").exists()


# ---- types --------------------------------------------------------------------------------

#: gensim's calls that docs/gensim.md says work, as a user who types with mypy --strict writes
#: them: a row number is a key in every query, a NumPy array of words a list of them
TYPED_CALLS = '''
import numpy as np

import embedlab

vec = embedlab.Vectors(["a", "b", "c", "d"], [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, -1.0]],
                       counts=[4, 3, 2, 1])
assert embedlab.Vectors(np.array(["a", "b"]), np.eye(2)).words == ("a", "b")
sim: float = vec.similarity(1, 2) + vec.similarity("a", np.int64(2)) + vec.similarity(w1=1, w2="b")
distance: float = vec.distance(1, 2)
distances: np.ndarray = vec.distances(1, [2]) + vec.distances("a", np.array(["b", "c"]))
closer: list[str] = vec.closer_than(1, 2) + vec.words_closer_than(1, 2)
rank: int = vec.rank(1, 2)
n_similarity: float = vec.n_similarity([1], [2]) + vec.n_similarity(np.array(["a"]), ["b", 2])
given_row: int = vec.most_similar_to_given(0, [2, 3])
given_word: str = vec.most_similar_to_given("a", ["b", "c"])
assert given_row == 2 and given_word == "c"
vector: np.ndarray = vec.vector(1) + vec[1] + vec[np.array(["a", "b"])].sum(axis=0)
analogy: list[tuple[str, float]] = vec.analogy(1, 2, 3)
odd_word: str = vec.doesnt_match(["a", "b", "c", "d"])
odd_row: int = vec.doesnt_match([0, 1, 2, 3])
assert odd_word == "d" and odd_row == 3
assert isinstance(vec.doesnt_match(np.array(["a", "b", "d"])), str)
by_word: list[tuple[str, float]] = vec.similar_by_word(1, topn=2)
by_key: list[tuple[str, float]] = vec.similar_by_key(1)
by_vector: list[tuple[str, float]] = vec.similar_by_vector(np.ones(2, np.float32), 2)
every: np.ndarray = vec.similar_by_word("a", topn=None) + vec.similar_by_key("a", None)
assert by_word[0][0] == "c" and every.shape == (4,)
nearest: list[tuple[str, float]] = vec.most_similar(1, topn=2) + vec.most_similar_cosmul(1)
row: int = vec.index(np.int64(1))
unit: np.ndarray = vec.get_vector(1, norm=True)
n = np.int64(2)  # NumPy's integers count as Python's, for the type checker too
counted: list[tuple[str, float]] = (vec.most_similar("a", topn=n) + vec.most_similar("a", k=n)
                                    + vec.analogy("a", "b", "c", k=n)
                                    + vec.similar_by_word("a", topn=n, restrict_vocab=n)
                                    + vec.most_similar_cosmul("a", topn=n))
assert len(counted) == 8, counted  # 2 + 2 + 1 (a, b, c excluded) + 1 (of 2 words) + 2
if vec.words == ("z",):  # never true: typed, not run (load and train need files)
    embedlab.load("run", step=n, limit=n)
    embedlab.train(run="run", from_checkpoint=n)
'''

#: calls that fail at run time, which mypy must refuse: (line, call)
UNTYPED_CALLS = ["vec.similarity()", "vec.similarity('a')", "vec.distance('a')"]


def test_mypy_strict_accepts_the_documented_calls_and_refuses_the_failing_ones(
        tmp_path: Path) -> None:
    """mypy --strict rejected similarity(5, 6), doesnt_match(np.array([...]))... that work,
    typed most_similar_to_given(5, [6, 7]) as a str (it is 7), and accepted vec.similarity(),
    a TypeError. The calls are run too: what they return is what the annotations say."""
    import runpy
    import subprocess
    import sys

    pytest.importorskip("mypy")
    (tmp_path / "calls.py").write_text(TYPED_CALLS)
    (tmp_path / "failing.py").write_text(TYPED_CALLS.split("\nsim:")[0] + "\n" +
                                         "\n".join(UNTYPED_CALLS) + "\n")
    first = TYPED_CALLS.split("\nsim:")[0].count("\n") + 2
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", os.devnull,
                           "--no-error-summary", "calls.py", "failing.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert not [e for e in errors if e.startswith("calls.py")], done.stdout
    lines = sorted({int(e.split(":")[1]) for e in errors if e.startswith("failing.py")})
    assert lines == list(range(first, first + len(UNTYPED_CALLS))), done.stdout + done.stderr
    runpy.run_path(str(tmp_path / "calls.py"))


def _public_functions() -> list[str]:
    import inspect

    names = [n for n in dir(Vectors) if not n.startswith("_")] + ["__init__", "__getitem__"]
    return [n for n in names if callable(inspect.getattr_static(Vectors, n)) or
            isinstance(inspect.getattr_static(Vectors, n), property | cached_property)]


@pytest.mark.parametrize("name", _public_functions())
def test_the_type_hints_of_every_public_method_resolve(name: str) -> None:
    """A string alias (Keys) made get_type_hints raise TypeError for most_similar_cosmul and
    NameError 'Key' for most_similar: its names were looked up in each method's module."""
    import inspect
    import typing

    member = inspect.getattr_static(Vectors, name)
    function = member.fget if isinstance(member, property) else getattr(
        member, "func", getattr(member, "__func__", member))
    assert "return" in typing.get_type_hints(function)
