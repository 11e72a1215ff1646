"""Prepared corpus: ids round trip, atomic writes, refusal of bad input, open() checks."""

from __future__ import annotations

import errno
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.data import corpus
from embedlab.data import prepared as prep
from embedlab.data.prepared import PreparedCorpus, is_prepared, prepare
from embedlab.errors import InputError

TEXT = "the cat sat on the mat\nthe dog sat\n\nrare words here\nthe cat\n"


def decode(pc: PreparedCorpus) -> list[list[str]]:
    return [[pc.vocab.words[i] for i in s] for s in pc.sentences()]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


@pytest.fixture
def corpus_file(tmp_path: Path) -> Path:
    p = tmp_path / "corpus.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


def test_prepare_writes_ids_vocab_and_meta(corpus_file: Path, tmp_path: Path) -> None:
    pc = prepare(corpus_file, tmp_path / "out", min_count=2, progress=False)
    assert pc.vocab.words == ("the", "cat", "sat")
    assert decode(pc) == [["the", "cat", "sat", "the"], ["the", "sat"], ["the", "cat"]]
    assert pc.sentence_ends.tolist() == [4, 6, 8]
    assert pc.ids.dtype == np.dtype("<u4") and isinstance(pc.ids, np.memmap)
    assert not pc.ids.flags.writeable
    m = pc.meta
    assert (m["raw_tokens"], m["tokens"], m["sentences"], m["vocab_size"]) == (14, 8, 3, 3)
    assert pc.raw_tokens == 14
    assert m["source"] == str(corpus_file.resolve()) and m["pruned"] is None
    assert m["source_files"][0]["size"] == corpus_file.stat().st_size
    assert (tmp_path / "out" / "ids.u32").stat().st_size == 8 * 4
    assert is_prepared(tmp_path / "out") and not is_prepared(tmp_path)
    assert leftovers(tmp_path) == []


def test_ids_file_is_raw_little_endian_uint32(corpus_file: Path, tmp_path: Path) -> None:
    prepare(corpus_file, tmp_path / "out", min_count=2, progress=False)
    raw = (tmp_path / "out" / "ids.u32").read_bytes()
    assert raw[:8] == bytes([0, 0, 0, 0, 1, 0, 0, 0])  # the=0, cat=1


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


def test_folder_and_compressed_corpus(tmp_path: Path) -> None:
    import gzip
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "1.txt").write_text("a b\n", encoding="utf-8")
    (tmp_path / "src" / "2.txt.gz").write_bytes(gzip.compress(b"b c"))
    pc = prepare(tmp_path / "src", tmp_path / "out", min_count=1, progress=False)
    assert decode(pc) == [["a", "b"], ["b", "c"]]
    assert len(pc.meta["source_files"]) == 2


def test_invalid_utf8_gives_one_warning_line(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "c.txt"
    src.write_bytes(b"good \xff word " * 3 + b"good " * 100)
    pc = prepare(src, tmp_path / "out", min_count=1, progress=False)
    err = capsys.readouterr().err.splitlines()
    assert err == [f"embedlab: warning: replaced 3 invalid UTF-8 sequences in {src} with U+FFFD; "
                   "re-encode the corpus as UTF-8 if that is wrong"]
    assert pc.meta["invalid_utf8"] == 3


def test_pruning_gives_a_warning_and_meta(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "c.txt"
    src.write_text("a a a a b c d e f\n", encoding="utf-8")
    pc = prepare(src, tmp_path / "out", min_count=1, max_distinct=3, progress=False)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "pruned rare words 1 time(s)" in err[0]
    assert "raise --max-distinct" in err[0]
    # pruned as 'd' made a fourth word (b, c, d dropped), like word2vec.c; e and f come after
    assert pc.meta["pruned"] == {"times": 1, "threshold": 1, "dropped_types": 3,
                                 "dropped_tokens": 3}
    assert pc.vocab.words == ("a", "e", "f")


# ---- bad input: refused, and nothing on disk damaged --------------------------------------------
def test_out_is_a_file(corpus_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_bytes(b"precious")
    with pytest.raises(InputError, match=r"--out .*out is a file; pass a new folder name"):
        prepare(corpus_file, out, min_count=1, progress=False)
    assert out.read_bytes() == b"precious" and leftovers(tmp_path) == []


def test_out_is_a_non_empty_other_folder(corpus_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not empty and holds no prepared corpus"):
        prepare(corpus_file, out, min_count=1, force=True, progress=False)
    assert snapshot(out) == {"notes.txt": b"mine"}


def test_empty_out_folder_is_used(corpus_file: Path, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    assert prepare(corpus_file, tmp_path / "out", min_count=1, progress=False).meta["tokens"] == 14


def test_existing_prepared_needs_force(corpus_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    prepare(corpus_file, out, min_count=2, progress=False)
    before = snapshot(out)
    with pytest.raises(InputError, match="already holds a prepared corpus; pass --force"):
        prepare(corpus_file, out, min_count=1, progress=False)
    assert snapshot(out) == before
    pc = prepare(corpus_file, out, min_count=1, force=True, progress=False)
    assert pc.meta["min_count"] == 1 and len(pc.vocab) > 3
    assert leftovers(tmp_path) == []


def test_force_through_a_symbolic_link_replaces_the_link(corpus_file: Path,
                                                        tmp_path: Path) -> None:
    # The link itself is replaced by the new folder; the folder it pointed to is left as it
    # was, and no hidden '.out.old-*' link is left beside it.
    target = tmp_path / "data" / "real"
    prepare(corpus_file, target, min_count=2, progress=False)
    before = snapshot(target)
    link = tmp_path / "out"
    link.symlink_to(target, target_is_directory=True)
    pc = prepare(corpus_file, link, min_count=1, force=True, progress=False)
    assert pc.meta["min_count"] == 1 and not link.is_symlink()
    assert snapshot(target) == before
    assert leftovers(tmp_path) == []


def test_force_replaces_a_damaged_prepared_folder(corpus_file: Path, tmp_path: Path) -> None:
    # Opening it says "re-create it with 'embedlab prepare CORPUS --out DIR --force'"; that
    # command must then work, while a folder of other files stays protected even with --force.
    out = tmp_path / "out"
    prepare(corpus_file, out, min_count=2, progress=False)
    (out / "meta.json").write_text('{"format": "embedlab-prep')
    with pytest.raises(InputError, match="not a valid prepared corpus"):
        PreparedCorpus.open(out)
    with pytest.raises(InputError, match="holds a damaged prepared corpus; pass --force"):
        prepare(corpus_file, out, min_count=1, progress=False)  # not without --force
    assert prepare(corpus_file, out, min_count=1, force=True, progress=False).meta["min_count"] == 1
    (out / "notes.txt").write_text("mine")
    (out / "meta.json").write_text("{}")
    with pytest.raises(InputError, match="holds no prepared corpus"):
        prepare(corpus_file, out, min_count=1, force=True, progress=False)
    assert (out / "notes.txt").read_text() == "mine"


def test_failed_replacement_keeps_the_old_prepared_folder(corpus_file: Path,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "out"
    prepare(corpus_file, out, min_count=2, progress=False)
    before = snapshot(out)
    with pytest.raises(InputError, match="no word occurs at least --min-count 99"):
        prepare(corpus_file, out, min_count=99, force=True, progress=False)
    assert snapshot(out) == before and leftovers(tmp_path) == []
    PreparedCorpus.open(out)


def test_crash_while_encoding_leaves_nothing(corpus_file: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(prep, "_encode", boom)  # the two-pass path (pruning)
    monkeypatch.setattr(prep._Scan, "encode", boom)  # the one-pass path
    for max_distinct in (2, 10_000):
        with pytest.raises(KeyboardInterrupt):
            prepare(corpus_file, tmp_path / "out", min_count=1, max_distinct=max_distinct,
                    progress=False)
        assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


_options = st.fixed_dictionaries({
    "lowercase": st.booleans(), "min_count": st.integers(1, 3),
    "max_vocab": st.none() | st.integers(2, 6), "unk": st.none() | st.just("<unk>")})


@settings(max_examples=60, deadline=None)
@given(sentences=st.lists(st.lists(st.sampled_from(["a", "A", "b", "c", "dd", "é", "<unk>", "zz"]),
                                   max_size=9), min_size=1, max_size=14),
       options=_options, piece=st.sampled_from([3, 7, 64, 1 << 20]), chunk=st.integers(1, 9))
def test_one_pass_writes_what_count_then_encode_writes(
        sentences: list[list[str]], options: dict[str, object], piece: int, chunk: int) -> None:
    """The single pass (_Scan) must be byte for byte the reference two-pass path, also when
    files are read in tiny pieces and ids are mapped in tiny chunks."""
    if not any(sentences):
        return
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr("embedlab.data.corpus.PIECE_BYTES", piece)
        mp.setattr(prep, "_SCAN_CHUNK", chunk)
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
            mp.setattr(prep, "_scan", lambda *a, **k: None)  # force the two-pass path
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
    same vocabulary and pruning (pruning used to run after each block, so it depended on lines)."""
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


@pytest.mark.parametrize("data,problem", [
    (b"", "holds no tokens"),
    (b" \n\t\n", "holds no tokens"),
    (b"\x00\x01\x02\x03" * 64, "looks binary"),
])
def test_bad_corpus_content(tmp_path: Path, data: bytes, problem: str) -> None:
    src = tmp_path / "c.txt"
    src.write_bytes(data)
    with pytest.raises(InputError, match=problem):
        prepare(src, tmp_path / "out", min_count=1, progress=False)
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_missing_corpus(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="corpus not found"):
        prepare(tmp_path / "nope", tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_out_inside_the_corpus_folder(tmp_path: Path) -> None:
    (tmp_path / "c.txt").write_text("a b c\n")
    with pytest.raises(InputError, match="inside the corpus folder"):
        prepare(tmp_path, tmp_path / "out", min_count=1, progress=False)
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_a_run_folder_inside_the_corpus_folder_is_named_as_such(tmp_path: Path) -> None:
    # train prepares into RUN/prepared and has no --out: the message names the run folder
    (tmp_path / "c.txt").write_text("a b c\n")
    run = tmp_path / "runs" / "r"
    with pytest.raises(InputError) as info:
        prepare(tmp_path, run / "prepared", min_count=1, progress=False, run_dir=run)
    assert str(info.value) == (f"the run folder {run} is inside the corpus folder {tmp_path}; "
                               "its files would be read as corpus text — pass --run or "
                               "--runs-dir outside it")
    assert not (tmp_path / "runs").exists() and leftovers(tmp_path) == []


def test_vocab_options_include_max_distinct(corpus_file: Path, tmp_path: Path) -> None:
    prepare(corpus_file, tmp_path / "out", min_count=1, max_distinct=40, progress=False)
    assert prep.vocab_options(tmp_path / "out") == {
        "lowercase": False, "min_count": 1, "max_vocab": None, "unk": None, "max_distinct": 40}


@pytest.mark.parametrize("kwargs,flag", [({"min_count": 0}, "--min-count"),
                                         ({"max_vocab": 0}, "--max-vocab"),
                                         ({"unk": "a b"}, "--unk"),
                                         ({"max_distinct": 0}, "--max-distinct")])
def test_bad_options(corpus_file: Path, tmp_path: Path, kwargs: dict[str, object],
                     flag: str) -> None:
    with pytest.raises(InputError, match=flag):
        prepare(corpus_file, tmp_path / "out", progress=False, **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


# ---- special corpora ----------------------------------------------------------------------------
def test_demo_uses_the_demo_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("embedlab.data.demo")

    def write_demo_corpus(path: Path, seed: int = 0) -> Path:
        Path(path).write_text("king queen man woman\n" * 10, encoding="utf-8")
        return Path(path)

    fake.write_demo_corpus = write_demo_corpus  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "embedlab.data.demo", fake)
    pc = prepare("demo", tmp_path / "out", min_count=1, progress=False)
    assert pc.meta["source"] == "demo" and pc.meta["tokens"] == 40
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "ids.u32", "meta.json", "sentences.i64", "vocab.tsv"]


def test_text8_uses_the_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from embedlab.data import download

    cached = tmp_path / "text8"
    cached.write_text(" a b a b a", encoding="utf-8")
    monkeypatch.setattr(download, "fetch_text8", lambda **kw: cached)
    pc = prepare("text8", tmp_path / "out", min_count=1, progress=False)
    assert pc.meta["source"] == "text8" and decode(pc) == [["a", "b", "a", "b", "a"]]


# ---- open() ------------------------------------------------------------------------------------
@pytest.fixture
def prepared_dir(corpus_file: Path, tmp_path: Path) -> Path:
    prepare(corpus_file, tmp_path / "out", min_count=1, progress=False)
    return tmp_path / "out"


def test_open_detects_truncated_ids(prepared_dir: Path) -> None:
    ids = prepared_dir / "ids.u32"
    ids.write_bytes(ids.read_bytes()[:-4])
    with pytest.raises(InputError, match=r"not a valid prepared corpus \(ids\.u32 holds 13 ids, "
                                         r"meta\.json says 14\)"):
        PreparedCorpus.open(prepared_dir)


def test_open_detects_odd_sized_ids(prepared_dir: Path) -> None:
    ids = prepared_dir / "ids.u32"
    ids.write_bytes(ids.read_bytes()[:-1])
    with pytest.raises(InputError, match="not a multiple of 4"):
        PreparedCorpus.open(prepared_dir)


def test_open_detects_other_version(prepared_dir: Path) -> None:
    meta_path = prepared_dir / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["format_version"] = 99
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(InputError, match="format version 99"):
        PreparedCorpus.open(prepared_dir)


def test_open_a_non_prepared_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"not a valid prepared corpus \(no meta\.json\)"):
        PreparedCorpus.open(tmp_path)
    (tmp_path / "meta.json").write_text("{not json")
    with pytest.raises(InputError, match=r"unreadable meta\.json"):
        PreparedCorpus.open(tmp_path)
    assert not is_prepared(tmp_path)


def test_longest_sentence(tmp_path: Path) -> None:
    text = tmp_path / "c.txt"
    text.write_text("a b\na b c d\n" + "a\n" * 5, encoding="utf-8")
    pc = prepare(text, tmp_path / "out", min_count=1, progress=False)
    assert pc.longest_sentence() == 4
    text.write_text("a\nb\n", encoding="utf-8")
    assert prepare(text, tmp_path / "o2", min_count=1, progress=False).longest_sentence() == 1


@pytest.mark.parametrize("key,value", [
    ("raw_tokens", "x"), ("raw_tokens", float("nan")), ("raw_tokens", -1), ("raw_tokens", 1.5),
    ("raw_tokens", True), ("raw_tokens", 3), ("raw_tokens", 2**64), ("tokens", "14"),
    ("unk", 5), ("unk", ""), ("unk", "a b"), ("lowercase", "yes"), ("min_count", 0),
    ("max_vocab", "3"), ("max_distinct", None), ("vocab_size", [1]), ("sentences", None),
    ("invalid_utf8", -2), ("source", 7), ("source_files", "x"), ("source_files", [5]),
    ("source_files", [{"path": 1, "size": 1, "mtime": 0.0}]), ("pruned", 5),
    ("pruned", {"times": "1"}), ("embedlab_version", None), ("created", 1),
])
def test_open_refuses_a_damaged_meta_field(prepared_dir: Path, key: str, value: object) -> None:
    # an edited meta.json used to fail later with ValueError/TypeError (after train had made
    # a stub run folder); every field is checked where the folder is opened
    meta_path = prepared_dir / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta[key] = value
    meta_path.write_text(json.dumps(meta))
    for call in (PreparedCorpus.open, prep.vocab_options):
        with pytest.raises(InputError, match=rf"is not a valid prepared corpus \(meta\.json: "
                                             rf"{key} ") as info:
            call(prepared_dir)
        assert "\n" not in str(info.value) and "embedlab prepare" in str(info.value)


def test_open_accepts_a_meta_without_the_optional_fields(prepared_dir: Path) -> None:
    meta_path = prepared_dir / "meta.json"
    meta = json.loads(meta_path.read_text())
    for key in ("embedlab_version", "created", "source", "source_files", "lowercase",
                "min_count", "max_vocab", "unk", "max_distinct", "invalid_utf8", "pruned"):
        del meta[key]
    meta_path.write_text(json.dumps(meta))
    assert PreparedCorpus.open(prepared_dir).raw_tokens == 14


def test_a_file_name_that_is_not_utf8_is_recorded_losslessly(tmp_path: Path) -> None:
    # os.fsdecode gives such a name lone surrogates, which UTF-8 cannot encode: writing
    # meta.json failed with UnicodeEncodeError. They are now written as \\udcXX escapes.
    folder = tmp_path / "c"
    folder.mkdir()
    name = os.fsdecode(b"f\xfe.txt")
    try:
        (folder / name).write_text("a b a b\n", encoding="utf-8")
    except (OSError, UnicodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    pc = prepare(folder, tmp_path / "out", min_count=1, progress=False)
    raw = (tmp_path / "out" / "meta.json").read_bytes()
    raw.decode("utf-8")  # still valid UTF-8 (and JSON)
    assert b"\\udcfe" in raw
    assert os.fsencode(pc.meta["source_files"][0]["path"]).endswith(b"/f\xfe.txt")
    again = PreparedCorpus.open(tmp_path / "out")
    assert again.meta == pc.meta and decode(again) == [["a", "b", "a", "b"]]


def test_non_ascii_names_stay_readable_in_meta(tmp_path: Path) -> None:
    src = tmp_path / "café.txt"
    src.write_text("a b\n", encoding="utf-8")
    prepare(src, tmp_path / "out", min_count=1, progress=False)
    assert "café.txt" in (tmp_path / "out" / "meta.json").read_text(encoding="utf-8")


@pytest.mark.parametrize("where,error", [
    # numpy's tofile reports a full disk with no errno and no file name
    ("ids", OSError("90909 requested and 0 written")),
    ("vocab", OSError(errno.ENOSPC, "No space left on device")),
    ("meta", OSError(errno.EDQUOT, "Disk quota exceeded")),
])
def test_full_disk_is_one_line_and_leaves_nothing(corpus_file: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch, where: str,
                                                  error: OSError) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise error

    target = {"ids": (np.ndarray, "tofile"), "vocab": (prep.Vocab, "save_tsv"),
              "meta": (prep, "_write_json")}[where]
    out = tmp_path / "data" / "out"
    prepare(corpus_file, out, min_count=2, progress=False)
    before = snapshot(out)
    if where == "ids":  # np.ndarray's methods cannot be patched: patch the module's writer
        monkeypatch.setattr(prep, "_write_array", fail)
    else:
        monkeypatch.setattr(*target, fail)
    for dest, force in ((out, True), (tmp_path / "new" / "out", False)):
        with pytest.raises(InputError, match=r"cannot write the prepared corpus .*out \(.*\); "
                                             r"free disk space or pass --out on another disk"
                           ) as info:
            prepare(corpus_file, dest, min_count=1, force=force, progress=False)
        assert "\n" not in str(info.value)
    assert snapshot(out) == before and leftovers(out.parent) == []
    assert not (tmp_path / "new").exists()


def test_unwritable_out_is_one_line(corpus_file: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "x")

    monkeypatch.setattr(prep.Vocab, "save_tsv", fail)
    with pytest.raises(InputError, match=r"\(Permission denied\); pass --out in a writable "
                                         "folder"):
        prepare(corpus_file, tmp_path / "out", min_count=1, progress=False)
    assert leftovers(tmp_path) == [] and not (tmp_path / "out").exists()


_SIGTERM_CHILD = """
import os, signal, sys
from embedlab.data import prepared as prep
corpus, out, where = sys.argv[1:]

def stop_here(real, only=""):
    def hook(*args, **kwargs):
        if only in str(args[0]):
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)
    return hook

if where == "encoding":  # the new folder is half-written
    prep.Vocab.save_tsv = stop_here(prep.Vocab.save_tsv)
elif where == "commit":  # the old folder has been moved aside, the new one not yet in place
    prep.os.replace = stop_here(prep.os.replace)
else:  # removing the old folder after the new one is in place
    prep.shutil.rmtree = stop_here(prep.shutil.rmtree, only=".old-")
prep.prepare_into(corpus, out, min_count=1, force=True, progress=False)
"""


@pytest.mark.parametrize("where", ["encoding", "commit", "removing"])
def test_sigterm_during_prepare_force_leaves_no_hidden_folders(corpus_file: Path, tmp_path: Path,
                                                               where: str) -> None:
    # SIGTERM's default action ended the process at once, leaving '.out.tmp-*' and
    # '.out.old-*' folders as big as a prepared corpus; now it cleans up like Ctrl-C does
    out = tmp_path / "out"
    prepare(corpus_file, out, min_count=2, progress=False)
    before = snapshot(out)
    proc = subprocess.run([sys.executable, "-c", _SIGTERM_CHILD, str(corpus_file), str(out),
                           where], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert "Traceback" not in proc.stderr
    assert leftovers(tmp_path) == []
    PreparedCorpus.open(out)  # the old folder or the new one, whole
    if where != "removing":
        assert snapshot(out) == before


def test_hidden_folders_of_dead_processes_are_swept(corpus_file: Path, tmp_path: Path) -> None:
    # left by a prepare killed with SIGKILL (or by an older embedlab killed with SIGTERM)
    dead, alive = 2**22 + 12345, os.getpid()  # above Linux's largest pid: never running
    for name in (f".out.tmp-{dead}-0a1b2c", f".out.old-{dead}-17000", f".out.tmp-{alive}-abcd",
                 f".other.tmp-{dead}-ab", ".out.tmp-0a1b2c3d4e5f"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "ids.u32").write_bytes(b"\0" * 8)
    prepare(corpus_file, tmp_path / "out", min_count=1, progress=False)
    # a live process's folder, another --out's, and an unnamed owner's are left alone
    assert leftovers(tmp_path) == sorted([f".out.tmp-{alive}-abcd", f".other.tmp-{dead}-ab",
                                          ".out.tmp-0a1b2c3d4e5f"])


def test_min_count_unmet_after_pruning_says_to_raise_max_distinct(tmp_path: Path) -> None:
    # 'a' occurs 3 times, but pruning at --max-distinct 1 leaves it a count of 1: the old
    # message ("the most frequent, 'a', occurs 1 times; lower --min-count") blamed --min-count.
    # Pruned to nothing at all, it said "the corpus has no words".
    src = tmp_path / "c.txt"
    for text in ("a\nb\na\nc\na\n", "a\nb\n"):
        src.write_text(text, encoding="utf-8")
        with pytest.raises(InputError) as info:
            prepare(src, tmp_path / "out", min_count=2, max_distinct=1, progress=False)
        message = str(info.value)
        assert message.startswith("no word occurs at least --min-count 2 times in the counts "
                                  "left after pruning to --max-distinct 1 (")
        assert "lower bounds" in message
        assert message.endswith("; raise --max-distinct, e.g. --max-distinct 10000000")
        assert "\n" not in message and leftovers(tmp_path) == []


def test_open_refuses_a_vocab_count_beyond_int64(prepared_dir: Path) -> None:
    # train --corpus PREPARED stopped with "OverflowError: Python int too large to convert"
    vocab = prepared_dir / "vocab.tsv"
    lines = vocab.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].split("\t")[0] + f"\t{2**63}"
    vocab.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"vocab\.tsv:2: count 9223372036854775808 is too "
                                         r"large \(the most is 9223372036854775807\)"):
        PreparedCorpus.open(prepared_dir)
