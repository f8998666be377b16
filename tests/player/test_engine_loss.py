"""Web engine loss on a real ``pdn display``: every ``QtWebEngineProcess`` killed at once.

Chromium cannot start a render process again once its zygote is gone, so the display exits
with code 3 (``player.app.EXIT_SCREEN_LOST``) and its service manager starts it again; these
tests play the service manager (``Restart=always``, tests/support/engineloss.py) and time the
way back to the screen.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from player.crashonly import EXITS_FILE
from server.platform.exitcodes import EXIT_SCREEN_LOST
from tests.support.engineloss import (
    Supervisor,
    lose_and_recover,
    playback,
    red_page,
    show_red,
)
from tests.support.pages import PageServer

pytestmark = [pytest.mark.qt, pytest.mark.slow]


@pytest.fixture
def red() -> Iterator[PageServer]:
    with red_page() as server:
        yield server


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Supervisor]:
    supervisor = Supervisor(tmp_path)
    supervisor.start()
    yield supervisor
    supervisor.stop()


def test_every_web_engine_process_killed_the_display_exits_3_and_comes_back(
    supervisor: Supervisor, red: PageServer
) -> None:
    sequence = show_red(supervisor, red)
    took = lose_and_recover(supervisor, red, sequence)
    assert supervisor.exits == [EXIT_SCREEN_LOST]
    assert took < 30, took
    text = supervisor.text()
    assert "zygote process" in text and "exiting with code 3" in text
    # The restart resumed the request (the time it had left), and health is honest again.
    health = requests.get(supervisor.url + "/x/health", timeout=5).json()
    assert health["status"] == "ok", health
    # No hot loop, no flood: the whole episode fits in a small log.
    assert len(text) < 60_000, len(text)


def test_repeated_losses_back_off_between_restarts(supervisor: Supervisor, red: PageServer) -> None:
    sequence = show_red(supervisor, red)
    lose_and_recover(supervisor, red, sequence)  # the first exit: started again at once
    record = playback(supervisor.url)
    assert record is not None and isinstance(record["sequence"], int)
    took = lose_and_recover(supervisor, red, record["sequence"])
    assert supervisor.exits == [EXIT_SCREEN_LOST, EXIT_SCREEN_LOST]
    assert took >= 5, took  # the second exit in a row: waits 5 s before starting again
    assert "waiting 5 s before starting again" in supervisor.text()
    assert (supervisor.data / EXITS_FILE).exists()
