"""Vocabulary: counting with pruning, selection and order, vocab.tsv round trips."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.data.vocab import Vocab, WordCounter, build, build_from_arrays
from embedlab.errors import InputError


def reference_reduce_vocab(tokens: list[str], max_distinct: int) -> tuple[dict[str, int], int]:
    """word2vec.c's LearnVocabFromTrainFile + ReduceVocab, written plainly: after each token,
    *if* the table is over the limit, drop the words seen at most ``reduce`` times."""
    counts: dict[str, int] = {}
    reduce = 1
    for w in tokens:
        counts[w] = counts.get(w, 0) + 1
        if len(counts) > max_distinct:
            counts = {w: c for w, c in counts.items() if c > reduce}
            reduce += 1
    return counts, reduce - 1


_words = st.lists(st.sampled_from([f"w{i}" for i in range(30)]), max_size=40)


@settings(max_examples=100, deadline=None)
@given(blocks=st.lists(_words, max_size=12), max_distinct=st.integers(1, 40))
def test_counter_matches_word2vec_reduce_vocab(blocks: list[list[str]], max_distinct: int) -> None:
    c = WordCounter(max_distinct=max_distinct)
    for b in blocks:
        c.update(b)
    tokens = [w for b in blocks for w in b]
    expected, threshold = reference_reduce_vocab(tokens, max_distinct)
    assert dict(c.counts) == expected and c.prune.threshold == threshold
    assert c.total == len(tokens)
    exact = Counter(tokens)
    if len(exact) <= max_distinct:
        assert c.counts == exact and c.prune.times == 0
    else:
        assert c.prune.times >= 1
        assert c.prune.dropped_tokens >= 1


@settings(max_examples=150, deadline=None)
@given(tokens=st.lists(st.sampled_from([f"w{i}" for i in range(25)]), max_size=300),
       max_distinct=st.integers(1, 20), data=st.data())
def test_pruning_does_not_depend_on_how_the_tokens_are_split(
        tokens: list[str], max_distinct: int, data: st.DataObject) -> None:
    # lines, files and 1 MiB pieces only change where blocks end; the result must not change
    cuts = sorted(data.draw(st.lists(st.integers(0, len(tokens)), max_size=20)))
    whole, split = WordCounter(max_distinct=max_distinct), WordCounter(max_distinct=max_distinct)
    whole.update(tokens)
    for lo, hi in zip([0, *cuts], [*cuts, len(tokens)], strict=True):
        split.update(tokens[lo:hi])
    assert split.counts == whole.counts and split.prune == whole.prune
    assert split.total == whole.total == len(tokens)


def test_pruning_is_reported() -> None:
    c = WordCounter(max_distinct=2)
    c.update(["a", "a", "a", "b", "c", "d"])
    # pruned when 'c' made a third word; 'd' arrives after it
    assert dict(c.counts) == {"a": 3, "d": 1}
    assert (c.prune.times, c.prune.threshold, c.prune.dropped_types,
            c.prune.dropped_tokens) == (1, 1, 2, 2)


def test_the_table_never_holds_a_block_of_new_words_beyond_the_limit() -> None:
    # the documented memory bound: pruning happens as the limit is passed, not after a block
    # (up to 1 MiB of text) of new words has been added
    c = WordCounter(max_distinct=10)
    sizes: list[tuple[int, int]] = []
    real = c._prune

    def spy() -> None:
        before = len(c.counts)
        real()
        sizes.append((before, len(c.counts)))

    c._prune = spy  # type: ignore[method-assign]
    c.update([f"w{i % 300}" for i in range(1000)])
    # over by one word at most, and one pruning always brings it back under (so word2vec.c's
    # `if` and a `while` are the same): the word that went over has count 1 <= reduce
    assert sizes and all(before == 11 and after <= 10 for before, after in sizes)


def test_build_orders_by_count_then_word() -> None:
    v = build({"b": 3, "a": 3, "z": 9, "é": 3, "B": 3, "rare": 1}, min_count=2)
    assert v.words == ("z", "B", "a", "b", "é")  # code-point order breaks ties
    assert v.counts.tolist() == [9, 3, 3, 3, 3]
    assert v.unk is None and len(v) == 5 and v.total == 21
    assert v.id("a") == 2 and v.id("rare") is None and "rare" not in v


def test_max_vocab_keeps_most_frequent() -> None:
    v = build({"a": 5, "b": 4, "c": 3, "d": 2}, min_count=1, max_vocab=2)
    assert v.words == ("a", "b")


def test_unk_is_id_zero_counts_dropped_tokens_and_takes_a_slot() -> None:
    counts = {"a": 5, "b": 4, "c": 3, "d": 2, "UNK": 1}
    v = build(counts, min_count=1, max_vocab=3, unk="UNK")
    assert v.words == ("UNK", "a", "b")
    # dropped c (3) + d (2) + the literal UNK token (1)
    assert v.counts.tolist() == [6, 5, 4]
    assert v.id("c") == 0 and v.id("UNK") == 0 and v.id("b") == 2
    assert v.total == sum(counts.values())


def test_unk_count_uses_the_true_total_when_counts_were_pruned() -> None:
    v = build({"a": 5}, min_count=1, unk="<unk>", total=12)
    assert v.counts.tolist() == [7, 5]


def test_min_count_emptying_the_vocabulary_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"no word occurs at least --min-count 50 times "
                                         r"\(the most frequent, 'a', occurs 7 times\); lower"):
        build({"a": 7, "b": 2}, min_count=50)
    with pytest.raises(InputError, match="no word occurs"):
        build({"a": 7}, min_count=50, unk="UNK")  # UNK alone is no vocabulary
    with pytest.raises(InputError, match="no words"):
        build({}, min_count=1)


def test_the_unk_token_is_not_named_as_the_most_frequent_word() -> None:
    # 'UNK' reaching --min-count is no vocabulary: the message must not name it as the most
    # frequent word (5 times) while saying no word occurs 2 times
    with pytest.raises(InputError) as info:
        build({"UNK": 5, "a": 1, "b": 1}, min_count=2, unk="UNK")
    assert str(info.value) == ("no word besides the --unk token 'UNK' occurs at least "
                               "--min-count 2 times (the most frequent, 'b', occurs 1 time); "
                               "lower --min-count, e.g. --min-count 1")
    with pytest.raises(InputError, match=r"^the corpus has no words besides the --unk token "
                                         r"'UNK'; pass a non-empty corpus$"):
        build({"UNK": 5}, min_count=2, unk="UNK")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"min_count": 0}, "--min-count must be >= 1, got 0; pass e.g. --min-count 5"),
    ({"min_count": -3}, "--min-count must be >= 1, got -3; pass e.g. --min-count 5"),
    ({"max_vocab": 0}, "--max-vocab must be >= 1, got 0; pass e.g. --max-vocab 50000"),
    ({"max_vocab": -1}, "--max-vocab must be >= 1, got -1; pass e.g. --max-vocab 50000"),
    ({"max_vocab": 1, "unk": "UNK"},
     "--max-vocab must be >= 2, got 1; pass e.g. --max-vocab 50000"),  # UNK takes a slot
], ids=["min-count-0", "min-count-negative", "max-vocab-0", "max-vocab-negative",
        "max-vocab-1-with-unk"])
def test_bad_options(kwargs: dict[str, object], message: str) -> None:
    # "a" clears the default --min-count 5, so no other check can raise in the option's stead
    # (with {"a": 1} a missing --max-vocab check still raised: the min-count message)
    with pytest.raises(InputError) as info:
        build({"a": 10}, **kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"min_count": 1}, ("a", "b", "c")),
    ({"max_vocab": 1}, ("a",)),
    ({"max_vocab": 2, "unk": "UNK"}, ("UNK", "a")),
], ids=["min-count-1", "max-vocab-1", "max-vocab-2-with-unk"])
def test_smallest_good_options_build(kwargs: dict[str, object], words: tuple[str, ...]) -> None:
    # the bounds above are exact: the smallest accepted value of each builds a vocabulary
    assert build({"a": 10, "b": 7, "c": 1}, **kwargs).words == words  # type: ignore[arg-type]


def test_vocab_invariants() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        Vocab(("a", "a"), np.array([1, 1]))
    with pytest.raises(ValueError, match="2 words"):
        Vocab(("a", "b"), np.array([1]))
    with pytest.raises(ValueError, match="word 0"):
        Vocab(("a", "UNK"), np.array([1, 1]), unk="UNK")
    v = Vocab(("a",), np.array([3]))
    assert v.counts.dtype == np.int64
    with pytest.raises(ValueError):
        v.counts[0] = 5  # frozen means frozen


# non-whitespace unicode words (any code point UTF-8 can encode, i.e. no lone surrogates)
_word = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12).filter(
    lambda w: w.split() == [w])


@settings(max_examples=150, deadline=None)
@given(words=st.lists(_word, unique=True, max_size=30),
       counts=st.lists(st.integers(0, 2**62), min_size=30, max_size=30),
       with_unk=st.booleans())
def test_tsv_round_trip(tmp_path_factory: pytest.TempPathFactory, words: list[str],
                        counts: list[int], with_unk: bool) -> None:
    unk = words[0] if with_unk and words else None
    v = Vocab(tuple(words), np.array(counts[: len(words)], dtype=np.int64), unk)
    path = tmp_path_factory.mktemp("v") / "vocab.tsv"
    v.save_tsv(path)
    back = Vocab.load_tsv(path, unk=unk)
    assert back == v
    assert back.words == v.words and back.counts.tolist() == v.counts.tolist()
    assert len(path.read_bytes().split(b"\n")) == len(words) + 1  # one line per word


def test_tsv_format_is_word_tab_count(tmp_path: Path) -> None:
    path = tmp_path / "vocab.tsv"
    Vocab(("UNK", "the", "of"), np.array([2, 10, 7]), "UNK").save_tsv(path)
    assert path.read_text(encoding="utf-8") == "UNK\t2\nthe\t10\nof\t7\n"


@pytest.mark.parametrize("content,problem", [
    ("the 10\n", "expected 'word<TAB>count'"),
    ("the\tten\n", "expected 'word<TAB>count'"),
    ("the\t-1\n", "expected 'word<TAB>count'"),
    ("a\t1\na\t2\n", "duplicate"),
    ("a b\t1\n", "invalid word"),
])
def test_bad_tsv_is_an_input_error(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "vocab.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=problem):
        Vocab.load_tsv(path)


def test_tsv_without_expected_unk(tmp_path: Path) -> None:
    path = tmp_path / "vocab.tsv"
    path.write_text("a\t1\n", encoding="utf-8")
    with pytest.raises(InputError, match="first word must be the UNK token 'UNK'"):
        Vocab.load_tsv(path, unk="UNK")


def test_missing_tsv(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read vocabulary"):
        Vocab.load_tsv(tmp_path / "nope.tsv")


@pytest.mark.parametrize("count", [str(2**63), "9" * 5000])
def test_tsv_count_beyond_int64_is_an_input_error(tmp_path: Path, count: str) -> None:
    # int64 holds the counts: a bigger one overflowed numpy (and 5,000 digits hit Python's
    # int-parsing limit) with a traceback instead of naming the line
    path = tmp_path / "vocab.tsv"
    path.write_text(f"a\t5\nb\t{count}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"vocab\.tsv:2: count .* is too large") as info:
        Vocab.load_tsv(path)
    assert "\n" not in str(info.value) and "re-run 'embedlab prepare'" in str(info.value)
    path.write_text(f"a\t5\nb\t{2**63 - 1}\n", encoding="utf-8")  # the largest that fits
    assert Vocab.load_tsv(path).counts.tolist() == [5, 2**63 - 1]


@settings(max_examples=80, deadline=None)
@given(counts=st.dictionaries(st.sampled_from(["a", "b", "c", "é", "語", "UNK", "Z", "aa"]),
                              st.integers(1, 6)),
       min_count=st.integers(1, 4), max_vocab=st.one_of(st.none(), st.integers(2, 5)),
       unk=st.sampled_from([None, "UNK"]))
def test_build_from_arrays_is_build(counts: dict[str, int], min_count: int,
                                    max_vocab: int | None, unk: str | None) -> None:
    words = list(counts)
    array = np.array([counts[w] for w in words], dtype=np.int64)
    try:
        expect = build(counts, min_count=min_count, max_vocab=max_vocab, unk=unk)
    except InputError as exc:
        with pytest.raises(InputError) as info:
            build_from_arrays(words, array, min_count=min_count, max_vocab=max_vocab, unk=unk)
        assert str(info.value) == str(exc)
        return
    got, kept = build_from_arrays(words, array, min_count=min_count, max_vocab=max_vocab,
                                  unk=unk)
    assert got == expect
    assert [words[i] for i in kept] == list(expect.words[unk is not None:])


@pytest.mark.parametrize("line", ["a 1", "a\t", "a\tx", "\t3", "a b\t3", "a\t" + "9" * 19])
def test_load_refuses_bad_lines_the_same_with_fast_checks(tmp_path: Path, line: str) -> None:
    path = tmp_path / "v.tsv"
    path.write_text(f"ok\t5\n{line}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"v\.tsv:2: "):
        Vocab.load_tsv(path)


_SPACES = [chr(c) for c in range(0x110000) if chr(c).isspace() and chr(c) not in "\t\n"]


@pytest.mark.parametrize("space", _SPACES, ids=[f"U+{ord(c):04X}" for c in _SPACES])
def test_every_whitespace_in_a_word_is_refused(tmp_path: Path, space: str) -> None:
    # the array-speed readings (NumPy's, the native library's) find what str.split() splits
    # at, as the line-by-line one does
    from embedlab.data.vocab_tsv import parse_columns
    from embedlab.engines.native import library_if

    path = tmp_path / "vocab.tsv"
    path.write_text(f"the\t10\nx{space}y\t7\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"vocab\.tsv:2: "):
        Vocab.load_tsv(path)
    assert parse_columns(path.read_bytes(), native=False) is None
    if library_if(True) is not None:
        assert parse_columns(path.read_bytes(), native=True) is None


@pytest.mark.parametrize("content", [
    "a\t1\nb\t1",  # no final newline
    "a\t007\nb\t0\n",  # leading zeros
    "é\t3\n€\t2\n日本\t1\n",  # non-ASCII words
    "a\t123456789012345678\nb\t9223372036854775807\n",  # 18 and 19 digits
    "",
])
def test_tsv_variants_read_as_line_by_line(tmp_path: Path, content: str) -> None:
    path = tmp_path / "vocab.tsv"
    path.write_text(content, encoding="utf-8")
    v = Vocab.load_tsv(path)
    lines = [line.split("\t") for line in content.split("\n") if line]
    assert v.words == tuple(w for w, _ in lines)
    assert v.counts.tolist() == [int(c) for _, c in lines]
    v.save_tsv(tmp_path / "out.tsv")  # written in the canonical form
    assert (tmp_path / "out.tsv").read_text(encoding="utf-8") == "".join(
        f"{w}\t{int(c)}\n" for w, c in lines)


def test_save_of_a_loaded_vocab_copies_the_file_while_it_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "vocab.tsv"
    Vocab(("the", "of"), np.array([10, 7])).save_tsv(path)
    v = Vocab.load_tsv(path)
    v.save_tsv(tmp_path / "copy.tsv")
    assert (tmp_path / "copy.tsv").read_bytes() == path.read_bytes()
    v.save_tsv(path)  # onto itself: unchanged
    assert path.read_bytes() == b"the\t10\nof\t7\n"
    path.write_text("the\t999\nof\t1\n", encoding="utf-8")  # changed after the load
    v.save_tsv(tmp_path / "again.tsv")
    assert (tmp_path / "again.tsv").read_bytes() == b"the\t10\nof\t7\n"


def test_index_is_built_on_first_use() -> None:
    v = Vocab(("the", "of"), np.array([10, 7]))
    assert v.index == {"the": 0, "of": 1} and "of" in v and v.id("the") == 0 and v.id("x") is None


def test_an_unreadable_vocabulary_names_its_permissions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A vocab.tsv made unreadable needs its permissions back, not another 'embedlab prepare'."""
    path = tmp_path / "vocab.tsv"
    Vocab(("a", "b"), np.array([2, 1])).save_tsv(path)
    real = Path.read_bytes

    def denied(self: Path) -> bytes:
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(InputError) as e:
        Vocab.load_tsv(path)
    assert str(e.value) == (f"cannot read vocabulary {path} (Permission denied); give your "
                            "user read permission on it")


@pytest.mark.parametrize(("damage", "problem"), [
    (None, "cannot read vocabulary {v} (No such file or directory)"),
    (b"the\t3\nthe\t2\n", "invalid vocabulary {v} (duplicate word 'the': on lines 1 and 2)"),
    (b"the x\t3\n", "invalid word 'the x' in {v}:1: words must be non-empty and contain no "
                    "whitespace"),
    (b"\xff\t3\n", "cannot read vocabulary {v} ('utf-8' codec can't decode byte 0xff"),
])
def test_every_damage_of_a_prepared_folders_vocabulary_names_the_folders_fix(
        tmp_path: Path, damage: bytes | None, problem: str) -> None:
    """Missing, duplicate words, a word with a space, not UTF-8: each names the one fix that
    makes the folder good again, as its other damage does."""
    from embedlab.data.corpus import remake_fix
    from embedlab.data.preparing import prepare

    (tmp_path / "c.txt").write_text("the cat sat on the mat\n")
    folder = tmp_path / "prep"
    prepare(tmp_path / "c.txt", folder, min_count=1, progress=False)
    vocab = folder / "vocab.tsv"
    vocab.unlink()
    if damage is not None:
        vocab.write_bytes(damage)
    with pytest.raises(InputError) as e:
        Vocab.load_tsv(vocab)
    message = str(e.value)
    assert message.startswith(problem.format(v=vocab)), message
    assert message.endswith(f"; {remake_fix(folder)}")


def test_the_fix_of_a_damaged_prepared_folder_holding_other_files_moves_them_first(
        tmp_path: Path) -> None:
    """prepare --force refuses a folder with other files beside the corpus's: the fix says to
    move them out first, instead of a --force that would be refused."""
    from embedlab.data.preparing import prepare

    (tmp_path / "c.txt").write_text("the cat sat on the mat\n")
    folder = tmp_path / "prep"
    prepare(tmp_path / "c.txt", folder, min_count=1, progress=False)
    (folder / "NOTES").write_text("mine")
    (folder / "vocab.tsv").write_text("the\t3\nthe\t2\n")
    with pytest.raises(InputError) as e:
        Vocab.load_tsv(folder / "vocab.tsv")
    assert str(e.value).endswith(
        f"; move the files that are not the prepared corpus's out of {folder}, then re-create "
        f"it with 'embedlab prepare CORPUS --out {folder} --force'")
    (folder / "NOTES").unlink()
    with pytest.raises(InputError) as e:
        Vocab.load_tsv(folder / "vocab.tsv")
    assert str(e.value).endswith(f"; re-create it with 'embedlab prepare CORPUS --out {folder} "
                                 "--force'")


@pytest.fixture(scope="module")
def native_library() -> None:
    from embedlab.engines.native import library_if

    if library_if(True) is None:
        pytest.skip("the native library does not build here")


_piece = st.text(st.sampled_from("ab\u00e9\u8a9e0 \t\u00a0\u2003\x1c\r"), max_size=4)
_line = st.one_of(
    st.tuples(st.text(st.sampled_from("abc\u00e9\u8a9e\u20ac"), min_size=1, max_size=3),
              st.text(st.sampled_from("0123456789"), min_size=1, max_size=20)).map("\t".join),
    st.tuples(_piece, st.text(st.sampled_from("019x \t"), max_size=4)).map("\t".join),
    _piece)


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(_line, max_size=12), final_newline=st.booleans())
def test_the_native_reading_of_vocab_tsv_is_numpys(native_library: None, lines: list[str],
                                                   final_newline: bool) -> None:
    """The same words, counts and form, or the same refusal; and repeated words found."""
    from embedlab.data.vocab_tsv import parse_columns

    data = ("\n".join(lines) + ("\n" if final_newline and lines else "")).encode("utf-8")
    native, numpy = parse_columns(data, native=True), parse_columns(data, native=False)
    if numpy is None:
        assert native is None
        return
    assert native is not None
    assert native[0] == numpy[0] and native[1].tolist() == numpy[1].tolist()
    assert native[2] == numpy[2]
    assert native[3] is (len(set(numpy[0])) == len(numpy[0]))
    assert numpy[3] is (None if data else True)  # NumPy leaves the check to Vocab
    if data:  # and the words' hash, for the checkpoint and the corpus fingerprint
        joined = "\n".join(numpy[0]).encode("utf-8")
        assert native[4].hexdigest() == hashlib.sha256(joined).hexdigest() and numpy[4] is None


@pytest.mark.parametrize("native", [True, False])
def test_a_repeated_word_is_refused_either_way(native_library: None, tmp_path: Path,
                                               native: bool, monkeypatch: pytest.MonkeyPatch,
                                               ) -> None:
    import embedlab.data.vocab_tsv as vocab_tsv
    from embedlab.engines.native import library_if

    lib = library_if(True) if native else None
    monkeypatch.setattr(vocab_tsv, "_native_library", lambda data, build: lib)
    path = tmp_path / "vocab.tsv"
    path.write_text("the\t9\n\u00e9t\u00e9\t5\nof\t4\n\u00e9t\u00e9\t2\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"vocab\.tsv \(duplicate word '\u00e9t\u00e9': on "
                                         r"lines 2 and 4\)"):
        Vocab.load_tsv(path)


def test_a_bad_line_at_the_end_of_a_long_vocabulary_is_found_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The line-by-line reading worked out the fix (reading meta.json) at every line: a CR on
    line 599,990 of 600,000 took 80 s to be refused."""
    import embedlab.data.vocab_tsv as vocab_tsv

    asked: list[object] = []
    real = vocab_tsv.vocabulary_fix
    monkeypatch.setattr(vocab_tsv, "vocabulary_fix", lambda p: asked.append(p) or real(p))
    lines = [f"w{i}\t{1000 - i}" for i in range(1000)]
    path = tmp_path / "vocab.tsv"
    path.write_text("\n".join([*lines[:-1], "w999\t" + "0" * 20 + "1"]) + "\n")  # slow, valid
    assert Vocab.load_tsv(path).counts[-1] == 1 and asked == []
    path.write_text("\n".join([*lines[:-2], "w\r\t2", lines[-1]]) + "\n")
    with pytest.raises(InputError, match=r"vocab\.tsv:999: "):
        Vocab.load_tsv(path)
    assert len(asked) == 1


def test_a_byte_order_mark_before_the_first_word_is_said(tmp_path: Path) -> None:
    """prepare never writes one; an editor's made the most frequent word another, silently."""
    import embedlab

    path = tmp_path / "vocab.tsv"
    path.write_bytes(b"\xef\xbb\xbfthe\t9\nof\t4\n")
    said = (r"vocab\.tsv starts with a UTF-8 byte-order mark \(U\+FEFF\), read as part of its "
            r"first word '\\ufeffthe'; if an editor added it, save the file as UTF-8 without")
    with pytest.warns(embedlab.EmbedlabWarning, match=said), \
            embedlab.errors.messages_for("python"):
        v = Vocab.load_tsv(path)
    assert v.words == ("\ufeffthe", "of")
    # a prepared or run folder's vocabulary is embedlab's: the word is its corpus's own (files
    # joined with their marks), not an editor's
    import warnings

    for marker, record in (("meta.json", {"format": "embedlab-prepared"}),
                           ("config.json", {"data": {}, "model": {}, "optim": {}})):
        folder = tmp_path / marker.split(".")[0]
        folder.mkdir()
        (folder / marker).write_text(json.dumps(record))
        (folder / "vocab.tsv").write_bytes(path.read_bytes())
        with warnings.catch_warnings(), embedlab.errors.messages_for("python"):
            warnings.simplefilter("error")
            assert Vocab.load_tsv(folder / "vocab.tsv").words == ("\ufeffthe", "of")
    # another program's config.json beside it (a model folder) is no run of embedlab's
    other = tmp_path / "model"
    other.mkdir()
    (other / "config.json").write_text('{"architectures": ["x"]}')
    (other / "vocab.tsv").write_bytes(path.read_bytes())
    with pytest.warns(embedlab.EmbedlabWarning, match=said), \
            embedlab.errors.messages_for("python"):
        Vocab.load_tsv(other / "vocab.tsv")


def test_the_words_hash_is_the_checkpoints_vocabulary_hash_and_pickles() -> None:
    import pickle

    from embedlab.training.state import vocabulary_sha256

    v = Vocab(("the", "\u00e9t\u00e9", "of"), np.array([3, 2, 1]))
    first = v.words_sha256()
    first.update(b"more")  # a copy: the next call starts again from the words
    assert v.words_sha256().hexdigest() == vocabulary_sha256(v.words)
    back = pickle.loads(pickle.dumps(v))
    assert back == v and back.words_sha256().hexdigest() == vocabulary_sha256(v.words)


def test_a_copied_or_unpickled_vocabulary_keeps_its_counts_read_only() -> None:
    import copy
    import pickle

    v = Vocab(("a", "b"), np.array([5, 3]))
    for other in (copy.deepcopy(v), copy.copy(v), pickle.loads(pickle.dumps(v))):
        assert other == v and not other.counts.flags.writeable
        with pytest.raises(ValueError):
            other.counts[0] = -7
