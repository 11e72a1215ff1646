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
