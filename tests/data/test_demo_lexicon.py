"""The demo lexicon: one role per word, pools of the planned sizes, the same on every call."""

from __future__ import annotations

from collections import Counter

from embedlab.data.demo_lexicon import Lexicon, lexicon


def all_words(lex: Lexicon) -> list[str]:
    words = list(lex.noise)
    for fam in lex.families:
        words += [w for row in fam.rows for w in row]
        words += [w for pool in fam.factor_pools for w in pool]
    for pool in lex.entity_pools.values():
        words += pool
    return words


def test_every_word_has_one_role() -> None:
    repeated = [w for w, n in Counter(all_words(lexicon())).items() if n > 1]
    assert repeated == []


def test_words_are_plain_lowercase_tokens() -> None:
    for word in all_words(lexicon()):
        assert word.isascii() and word.isalpha() and word == word.lower()


def test_families_have_a_word_per_factor_and_a_pool_per_entity() -> None:
    lex = lexicon()
    assert [fam.name for fam in lex.families] == ["geography", "gender", "number", "tense"]
    for fam in lex.families:
        assert len(fam.factor_pools) == len(fam.factors)
        assert all(len(row) == len(fam.factors) for row in fam.rows)
        assert all(len(pool) == 8 for pool in fam.factor_pools)
        for e in range(len(fam.rows)):
            assert len(lex.entity_pools[(fam.name, e)]) == 6
        for _, a, b in fam.sections:
            assert 0 <= a < len(fam.factors) and 0 <= b < len(fam.factors)


def test_the_lexicon_is_a_constant() -> None:
    lex = lexicon()
    assert lexicon() is lex
    geography = lex.families[0]
    assert geography.rows[0][0].endswith("ia")  # invented country names
    assert geography.rows[0][2] == geography.rows[0][0].removesuffix("ia") + "ish"
    assert lex.noise[0] == "the"
