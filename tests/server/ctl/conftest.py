"""What every ``pdn ctl`` test shares: the logging that ``server.cli.main`` sets up, undone."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def keep_logging() -> Iterator[None]:
    """server.cli.main sets up logging on the captured stderr; put the test's back after."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
