"""``preparing.prepare`` called from Python: its messages name its arguments, its warnings are
``EmbedlabWarning``s (the commands' wording is tested in test_preparing.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedlab.data import preparing
from embedlab.errors import EmbedlabWarning, InputError


def test_refusals_name_the_arguments(corpus_file: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError) as e:
        preparing.prepare(corpus_file, tmp_path / "file", min_count=1, progress=False)
    assert str(e.value) == f"out_dir {tmp_path / 'file'} is a file; pass a new folder name"
    preparing.prepare(corpus_file, tmp_path / "p", min_count=1, progress=False)
    with pytest.raises(InputError) as e:
        preparing.prepare(corpus_file, tmp_path / "p", min_count=1, progress=False)
    assert str(e.value) == (f"out_dir {tmp_path / 'p'} already holds a prepared corpus; pass "
                            "force=True to replace it, or choose another folder")
    with pytest.raises(InputError, match=r"at least min_count=99 times .* e\.g\. min_count=4"):
        preparing.prepare(corpus_file, tmp_path / "q", min_count=99, progress=False)


def test_warnings_are_embedlab_warnings(tmp_path: Path) -> None:
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(b"caf\xe9 the the\n")
    with pytest.warns(EmbedlabWarning, match="invalid UTF-8"):
        preparing.prepare(corpus, tmp_path / "p", min_count=1, progress=False)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"force": "no"}, r"^force= must be True or False, got the str 'no'"),
    ({"progress": "no"}, r"^progress= must be True or False, got the str 'no'"),
    ({"run_dir": 5}, r"^run_dir= must be the path of the run folder"),
])
def test_options_of_the_wrong_type_are_refused_before_anything_is_replaced(
        corpus_file: Path, tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    # force="no" is truthy: taken as is, it would replace the corpus it means to keep
    out = tmp_path / "p"
    preparing.prepare(corpus_file, out, min_count=1, progress=False)
    before = (out / "vocab.tsv").read_bytes()
    other = tmp_path / "other.txt"
    other.write_text("x y z x y z\n")
    with pytest.raises(InputError, match=message):
        preparing.prepare(other, out, **{"min_count": 1, "progress": False,  # type: ignore[arg-type]
                                         **kwargs})
    assert (out / "vocab.tsv").read_bytes() == before


@pytest.mark.parametrize(("corpus", "out"), [(None, "p"), ("c.txt", None), (b"c.txt", "p")])
def test_a_path_of_the_wrong_type_is_one_line(tmp_path: Path, corpus: object,
                                              out: object) -> None:
    with pytest.raises(InputError, match=r"^(corpus|out_dir)= (is bytes|must be the path)"):
        preparing.prepare(corpus, out, progress=False)  # type: ignore[arg-type]


def test_the_corpus_folder_messages_name_python_arguments(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("a b c a b c\n")
    with pytest.raises(InputError, match=r"^out_dir .* is inside the corpus folder"):
        preparing.prepare(corpus, corpus / "prep", min_count=1, progress=False)
    preparing.prepare(corpus, tmp_path / "prep", min_count=1, progress=False)
    with pytest.raises(InputError, match=r"is a prepared corpus, not raw text; pass it to "
                                         r"train\(corpus=\.\.\.\) or pass the original text "
                                         r"file to prepare\(\)$"):
        preparing.prepare(tmp_path / "prep", tmp_path / "prep2", min_count=1, progress=False)


def test_a_path_object_named_demo_is_the_file_here(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # Path("./demo") is Path("demo"): with a file demo here, it names that file
    monkeypatch.chdir(tmp_path)
    Path("demo").write_text("here here here words words\n")
    prepared = preparing.prepare(Path("./demo"), tmp_path / "p", min_count=1, progress=False)
    assert sorted(prepared.vocab.words) == ["here", "words"]
