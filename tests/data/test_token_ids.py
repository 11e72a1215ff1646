"""Corpus text to token ids: the one-pass scan and the two-pass count-then-encode agree."""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.data import corpus, prepared, token_ids
from embedlab.data.prepared import PreparedCorpus
from embedlab.data.preparing import prepare
from embedlab.errors import InputError

# these library functions are the commands' own: their messages as the commands give them
pytestmark = pytest.mark.usefixtures("cli_messages")


def decode(pc: PreparedCorpus) -> list[list[str]]:
    return [[pc.vocab.words[i] for i in s] for s in pc.sentences()]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_unk_maps_oov_to_zero_with_exact_count(corpus_file: Path, tmp_path: Path) -> None:
    pc = prepare(corpus_file, tmp_path / "out", min_count=1, max_vocab=3, unk="UNK",
                 progress=False)
    assert pc.vocab.words == ("UNK", "the", "cat")
    assert pc.meta["tokens"] == pc.meta["raw_tokens"] == 14
    assert int(pc.vocab.counts[0]) == int(np.count_nonzero(np.asarray(pc.ids) == 0)) == 8
    assert decode(pc)[1] == ["the", "UNK", "UNK"]


_sentence = st.lists(st.sampled_from(["a", "b", "c", "dé", "語", "x1", "UNK"]), max_size=8)


@settings(max_examples=40, deadline=None)
@given(sentences=st.lists(_sentence, max_size=12), lowercase=st.booleans())
def test_round_trip_with_min_count_one(sentences: list[list[str]], lowercase: bool) -> None:
    nonempty = [s for s in sentences if s]
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "c.txt"
        src.write_text("\n".join(" ".join(s) for s in sentences), encoding="utf-8")
        if not nonempty:
            with pytest.raises(InputError, match="holds no tokens"):
                prepare(src, Path(d) / "out", min_count=1, progress=False)
            return
        pc = prepare(src, Path(d) / "out", min_count=1, lowercase=lowercase, progress=False)
        expect = [[w.lower() for w in s] if lowercase else s for s in nonempty]
        assert decode(pc) == expect
        assert int(pc.vocab.counts.sum()) == len(pc.ids) == pc.raw_tokens
        del pc  # release the memmap before the folder goes


def test_sentences_emptied_by_oov_removal_are_omitted(tmp_path: Path) -> None:
    src = tmp_path / "c.txt"
    src.write_text("a a\nzzz\na\n", encoding="utf-8")
    pc = prepare(src, tmp_path / "out", min_count=2, progress=False)
    assert pc.sentence_ends.tolist() == [2, 3]


_options = st.fixed_dictionaries({
    "lowercase": st.booleans(), "min_count": st.integers(1, 3),
    "max_vocab": st.none() | st.integers(2, 6), "unk": st.none() | st.just("<unk>")})


@settings(max_examples=60, deadline=None)
@given(sentences=st.lists(st.lists(st.sampled_from(["a", "A", "b", "c", "dd", "é", "<unk>", "zz"]),
                                   max_size=9), min_size=1, max_size=14),
       options=_options, piece=st.sampled_from([3, 7, 64, 1 << 20]), chunk=st.integers(1, 9))
def test_one_pass_writes_what_count_then_encode_writes(
        sentences: list[list[str]], options: dict[str, object], piece: int, chunk: int) -> None:
    """The single pass (token_ids.Scan) must be byte for byte the reference two-pass path, also when
    files are read in tiny pieces and ids are mapped in tiny chunks."""
    if not any(sentences):
        return
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr("embedlab.data.corpus.PIECE_BYTES", piece)
        mp.setattr(prepared, "_SCAN_CHUNK", chunk)
        with tempfile.TemporaryDirectory() as d:
            src = Path(d) / "c.txt"
            src.write_text("\n".join(" ".join(s) for s in sentences), encoding="utf-8")

            def outcome(out: Path) -> object:  # the folder's bytes, or the error message
                try:
                    prepare(src, out, progress=False, **options)  # type: ignore[arg-type]
                except InputError as exc:
                    return str(exc)
                return snapshot(out)

            one = outcome(Path(d) / "one")
            mp.setattr(token_ids, "scan", lambda *a, **k: None)  # force the two-pass path
            two = outcome(Path(d) / "two")
        if isinstance(one, dict) and isinstance(two, dict):
            for snap in (one, two):  # the creation time is the only difference allowed
                meta = json.loads(snap.pop("meta.json"))
                meta.pop("created")
                snap["meta.json"] = json.dumps(meta).encode()
        assert one == two
    finally:
        mp.undo()


@settings(max_examples=40, deadline=None)
@given(tokens=st.lists(st.sampled_from([f"w{i}" for i in range(20)]), min_size=1, max_size=150),
       max_distinct=st.integers(1, 12), data=st.data())
def test_pruning_does_not_depend_on_the_layout(tokens: list[str], max_distinct: int,
                                               data: st.DataObject) -> None:
    """The same tokens as one line, as many lines, split over files, read in tiny pieces: the
    same vocabulary and pruning (pruning follows each token, not each block)."""
    breaks = data.draw(st.lists(st.integers(1, len(tokens)), max_size=30))
    files = sorted(set(data.draw(st.lists(st.integers(1, len(tokens) - 1), max_size=3))
                       if len(tokens) > 1 else []))
    piece = data.draw(st.sampled_from([4, 16, 1 << 20]))

    def outcome(folder: Path) -> object:
        try:
            pc = prepare(folder, folder.parent / f"{folder.name}-out", min_count=2,
                         max_distinct=max_distinct, progress=False)
        except InputError as exc:
            return str(exc)
        return pc.vocab.words, pc.vocab.counts.tolist(), pc.meta["pruned"]

    with tempfile.TemporaryDirectory() as d:
        one, many = Path(d) / "one", Path(d) / "many"
        one.mkdir()
        many.mkdir()
        (one / "c.txt").write_text(" ".join(tokens) + "\n", encoding="utf-8")
        lines = "".join(t + ("\n" if i + 1 in breaks else " ") for i, t in enumerate(tokens))
        offsets = [0]
        for cut in files:  # cut the text at the start of token number ``cut``
            offsets.append(sum(len(t) + 1 for t in tokens[:cut]))
        offsets.append(len(lines))
        for n, (lo, hi) in enumerate(itertools.pairwise(offsets)):
            (many / f"part{n:02d}.txt").write_text(lines[lo:hi], encoding="utf-8")
        expected = outcome(one)
        with mock.patch.object(corpus, "PIECE_BYTES", piece):
            assert outcome(many) == expected
