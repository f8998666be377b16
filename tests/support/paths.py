"""Where the checkout and the tests' fixture files are, for tests that run its scripts."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
