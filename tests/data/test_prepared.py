"""The prepared-corpus format: the files on disk, open() and its checks, meta.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from embedlab.data.prepared import PreparedCorpus, is_prepared, vocab_options
from embedlab.data.preparing import prepare
from embedlab.errors import InputError


def decode(pc: PreparedCorpus) -> list[list[str]]:
    return [[pc.vocab.words[i] for i in s] for s in pc.sentences()]


@pytest.fixture
def prepared_dir(corpus_file: Path, tmp_path: Path) -> Path:
    prepare(corpus_file, tmp_path / "out", min_count=1, progress=False)
    return tmp_path / "out"


def test_ids_file_is_raw_little_endian_uint32(corpus_file: Path, tmp_path: Path) -> None:
    prepare(corpus_file, tmp_path / "out", min_count=2, progress=False)
    raw = (tmp_path / "out" / "ids.u32").read_bytes()
    assert raw[:8] == bytes([0, 0, 0, 0, 1, 0, 0, 0])  # the=0, cat=1


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


def test_a_folder_that_cannot_be_read_is_not_prepared(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The question is asked before the corpus is read, where the permission problem is
    named: asking must not raise it as a file that cannot be used."""
    def denied(self: Path) -> bool:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "is_file", denied)
    assert not is_prepared(tmp_path)


def test_the_repr_is_one_short_line(tmp_path: Path) -> None:
    """Shown by a notebook, which would otherwise print every source file of meta.json."""
    (tmp_path / "c.txt").write_text("a b c\nb c\n" * 3)
    out = tmp_path / "p"
    prepare(tmp_path / "c.txt", out, min_count=1, progress=False)
    assert repr(PreparedCorpus.open(out)) == \
        f"PreparedCorpus({str(out)!r}: 15 tokens, 6 sentences, 3 words)"


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
    # every field is checked where the folder is opened, in one line, before anything uses it
    meta_path = prepared_dir / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta[key] = value
    meta_path.write_text(json.dumps(meta))
    for call in (PreparedCorpus.open, vocab_options):
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
    # os.fsdecode gives such a name lone surrogates, which UTF-8 cannot encode: meta.json
    # holds them as \\udcXX escapes
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


def test_vocab_options_include_max_distinct(corpus_file: Path, tmp_path: Path) -> None:
    prepare(corpus_file, tmp_path / "out", min_count=1, max_distinct=40, progress=False)
    assert vocab_options(tmp_path / "out") == {
        "lowercase": False, "min_count": 1, "max_vocab": None, "unk": None, "max_distinct": 40}


def test_open_refuses_a_vocab_count_beyond_int64(prepared_dir: Path) -> None:
    # one line, not "OverflowError: Python int too large to convert" from numpy
    vocab = prepared_dir / "vocab.tsv"
    lines = vocab.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].split("\t")[0] + f"\t{2**63}"
    vocab.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"vocab\.tsv:2: count 9223372036854775808 is too "
                                         r"large \(the most is 9223372036854775807\)"):
        PreparedCorpus.open(prepared_dir)


def test_open_refuses_an_id_beyond_the_vocabulary(prepared_dir: Path) -> None:
    import numpy as np

    ids = np.fromfile(prepared_dir / "ids.u32", dtype="<u4")
    size = len(PreparedCorpus.open(prepared_dir).vocab)
    ids[3] = size
    ids.tofile(prepared_dir / "ids.u32")
    with pytest.raises(InputError, match=f"ids.u32 holds id {size:,} at position 3, but the "
                                         f"vocabulary has {size:,} words"):
        PreparedCorpus.open(prepared_dir)


def test_open_may_leave_the_ids_to_a_reader_that_checks_them(prepared_dir: Path) -> None:
    # the native batch generator checks each id as it reads it: opening for it skips the read
    # of the whole corpus, but not the checks of the sentence ends
    import numpy as np

    ids = np.fromfile(prepared_dir / "ids.u32", dtype="<u4")
    ids[3] = 10**9
    ids.tofile(prepared_dir / "ids.u32")
    opened = PreparedCorpus.open(prepared_dir, check_ids=False)
    assert int(opened.ids[3]) == 10**9 and opened.longest_sentence() > 1
    ends = np.fromfile(prepared_dir / "sentences.i64", dtype="<i8")
    ends[1] = ends[0]
    ends.tofile(prepared_dir / "sentences.i64")
    with pytest.raises(InputError, match=r"sentences\.i64 does not increase strictly at entry 1"):
        PreparedCorpus.open(prepared_dir, check_ids=False)


def test_open_names_the_vocabulary_before_the_ids(prepared_dir: Path) -> None:
    # the ids are checked on a thread beside the vocabulary's read; with both damaged, the
    # vocabulary's problem is the one named, as when they were checked one after the other
    import numpy as np

    ids = np.fromfile(prepared_dir / "ids.u32", dtype="<u4")
    ids[0] = 10**9
    ids.tofile(prepared_dir / "ids.u32")
    (prepared_dir / "vocab.tsv").write_text("the 10\n", encoding="utf-8")
    with pytest.raises(InputError, match="expected 'word<TAB>count'"):
        PreparedCorpus.open(prepared_dir)
