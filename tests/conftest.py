"""Settings every test process shares.

Qt runs for real in the tests, on one X server shared by the whole run (Xvfb, started here
before any test makes the application): Qt Quick draws with Mesa's software OpenGL there, and
its grabs show what the scene shows (the ``offscreen`` platform does not show every kind of
frame). Tests that need an X screen of their own start another. Chromium's sandbox cannot run
as root.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.pgserver import PgServer, PostgresMissingError
from tests.support.release import PREVIOUS_WHEEL, make_wheelhouse, release_venv
from tests.support.xvfb import xvfb

# Fixtures every test directory may use, kept in the support package.
pytest_plugins = [
    "tests.support.inprocess_display",
    "tests.support.notify",
    "tests.support.peer",
]

_shared_x = contextlib.ExitStack()


def pytest_configure(config: pytest.Config) -> None:
    """One Xvfb for the run, unless the run is told which Qt platform to use. Not a child of
    the test process: tests that measure this process's tree would count it."""
    if os.environ.get("QT_QPA_PLATFORM") or _xdist_controller(config):
        return
    display = _shared_x.enter_context(xvfb(1280, 1024, detached=True))
    os.environ["DISPLAY"] = display
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    os.environ.pop("WAYLAND_DISPLAY", None)


def _xdist_controller(config: pytest.Config) -> bool:
    """With ``-n N`` the process pytest starts only hands tests to its workers: each worker
    starts its own Xvfb, this one needs none."""
    workers = getattr(config.option, "numprocesses", None)
    return bool(workers) and not hasattr(config, "workerinput")


def pytest_unconfigure(config: pytest.Config) -> None:
    _shared_x.close()


os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")
# QtMultimedia looks for PipeWire's library and says on stderr when it is not there (here,
# or a kiosk with ALSA or PulseAudio alone): not a finding; the run stays quiet.
os.environ.setdefault("QT_LOGGING_RULES", "qt.multimedia.symbolsresolver=false")
# Chromium must not try the network beyond loopback, nor use a GPU that is not there.
os.environ.setdefault(
    "QTWEBENGINE_CHROMIUM_FLAGS",
    "--disable-gpu --disable-background-networking --disable-component-update",
)


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    """A test that runs ``server.cli.main`` in this process sets the root logger up as a
    service does (a handler on stderr, INFO); undone after it, or the threads of later tests
    would print their records between tests, outside pytest's capture."""
    root = logging.getLogger()

    def ours(handler: logging.Handler) -> bool:  # pytest's capture handlers are its own affair
        return not type(handler).__module__.startswith("_pytest")

    handlers, level = [h for h in root.handlers if ours(h)], root.level
    yield
    root.handlers[:] = handlers + [h for h in root.handlers if not ours(h)]
    root.setLevel(level)


# Releases (tests/support/release.py): made once a session, for every test that reads them.
@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lock's pip and setuptools: the session's one download from the package index."""
    return make_wheelhouse(tmp_path_factory.mktemp("wheelhouse"))


@pytest.fixture(scope="session")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a venv with pdn 0.1.0, for the tests that only run it (none changes it)."""
    return release_venv(tmp_path_factory.mktemp("release-0.1.0"), PREVIOUS_WHEEL)


# A real PostgreSQL (tests/support/pgserver.py): one server per test session, a database per test.
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
