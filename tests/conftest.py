"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from embedlab.errors import messages_for


@pytest.fixture
def cli_messages() -> Iterator[None]:
    """Messages and warnings as the commands give them (flags, and warnings as lines on stderr):
    for tests of library functions that the commands call, whose Python callers are told
    argument names and get ``EmbedlabWarning``s instead."""
    with messages_for("cli"):
        yield
