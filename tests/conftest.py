"""Settings every test process shares.

Qt WebEngine runs for real in the tests: offscreen by default (no screen here), on a real
Xvfb where a test needs a whole X screen. Chromium's sandbox cannot run as root.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tests.pgserver import PgServer, PostgresMissingError

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")
# Chromium must not try the network beyond loopback, nor use a GPU that is not there.
os.environ.setdefault(
    "QTWEBENGINE_CHROMIUM_FLAGS",
    "--disable-gpu --disable-background-networking --disable-component-update",
)


# A real PostgreSQL (tests/pgserver.py): one server per test session, a database per test.
@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PgServer]:
    try:
        server = PgServer.start()
    except PostgresMissingError as missing:
        # bash packaging/dev.sh installs Debian's postgresql: missing, the set-up is broken.
        pytest.fail(f"{missing} (bash packaging/dev.sh setup installs it)")
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PgServer) -> Iterator[str]:
    name = f"t{uuid.uuid4().hex[:12]}"
    yield postgres_server.create_database(name)
    postgres_server.drop_database(name)
