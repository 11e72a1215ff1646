"""Fixtures shared by the tests of the data package."""

from __future__ import annotations

from pathlib import Path

import pytest

#: 14 tokens in 4 sentences (one blank line between): "the" 4 times, "cat" and "sat" twice
TEXT = "the cat sat on the mat\nthe dog sat\n\nrare words here\nthe cat\n"


@pytest.fixture
def corpus_file(tmp_path: Path) -> Path:
    """:data:`TEXT` as ``corpus.txt`` in the test's folder."""
    p = tmp_path / "corpus.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p
