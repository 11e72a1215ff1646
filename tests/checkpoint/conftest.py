from __future__ import annotations

import os

import pytest


@pytest.fixture
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Property tests check logic, not durability; fsync would dominate their run time."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
