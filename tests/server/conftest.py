"""Fixtures of the server tests: a scheduler test on each storage backend."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def scheduler_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a scheduler test on each storage backend (``pytestmark = pytest.mark.usefixtures(
    "scheduler_backend")``): SQLite files, or a PostgreSQL database of its own (the scheduler
    reads PDN_DATABASE_URL)."""
    if request.param == "postgresql":
        monkeypatch.setenv("PDN_DATABASE_URL", request.getfixturevalue("postgres_url"))
    else:
        monkeypatch.delenv("PDN_DATABASE_URL", raising=False)
    return str(request.param)
