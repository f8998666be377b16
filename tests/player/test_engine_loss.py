"""Web engine loss on a real ``pdn display``: every ``QtWebEngineProcess`` killed at once.

Chromium cannot start a render process again once its zygote is gone, so the display exits
with code 3 (``player.app.EXIT_SCREEN_LOST``) and its service manager starts it again; these
tests play the service manager (``Restart=always``) and time the way back to the screen.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from PySide6.QtGui import QImage

from player.crashonly import EXITS_FILE
from server.platform.exitcodes import EXIT_SCREEN_LOST
from tests.support.display import DisplayProcess
from tests.support.pages import PageServer, one_page
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.qt, pytest.mark.slow]

RED = b"<!doctype html><html><body style='margin:0;background:#f00'></body></html>"


def web_engine_processes(pid: int) -> list[int]:
    """Every QtWebEngineProcess among ``pid``'s descendants (zygotes, renderers, GPU, utility)."""
    rows = subprocess.run(
        ["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    table = [(int(p), int(pp), args) for p, pp, args in (r.split(None, 2) for r in rows if r)]
    found: list[int] = []
    parents = [pid]
    while parents:
        parent = parents.pop()
        for child, ppid, args in table:
            if ppid == parent:
                parents.append(child)
                if "QtWebEngineProcess" in args and "<defunct>" not in args:
                    found.append(child)
    return found


def kill_web_engine(pid: int) -> list[int]:
    victims = web_engine_processes(pid)
    assert victims, "the display has no web engine process to kill"
    for victim in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
    return victims


def screen_is_red(url: str) -> bool:
    try:
        shot = requests.get(url + "/x/screenshot", timeout=5)
    except requests.RequestException:
        return False
    if shot.status_code != 200:
        return False
    image = QImage.fromData(shot.content)
    if image.isNull():
        return False
    points = [
        (image.width() * i // 4, image.height() * j // 4) for i in (1, 2, 3) for j in (1, 2, 3)
    ]
    for x, y in points:
        colour = image.pixelColor(x, y)
        if not (colour.red() > 200 and colour.green() < 50 and colour.blue() < 50):
            return False
    return True


class Supervisor:
    """``Restart=always`` with ``RestartSec=0``: a display that exits is started again."""

    def __init__(self, tmp_path: Path) -> None:
        self.folder = tmp_path
        self.port = free_port()
        self.data = tmp_path / "data"
        self.url = f"http://127.0.0.1:{self.port}"
        self.display: DisplayProcess | None = None
        self.exits: list[int] = []

    def start(self) -> DisplayProcess:
        self.display = DisplayProcess(
            self.folder, ["--host", "127.0.0.1"], platform="offscreen", port=self.port
        ).start()
        return self.display

    def poll(self) -> None:
        """Start the display again if it exited."""
        assert self.display is not None
        code = self.display.returncode
        if code is not None:
            self.exits.append(code)
            self.start()

    def wait_until(self, check: Callable[[], bool], timeout: float) -> float:
        """Seconds until ``check()``, the display started again whenever it exits."""
        started = time.monotonic()

        def checked() -> bool:
            if check():
                return True
            self.poll()
            return False

        wait_until(checked, timeout, lambda: f"the check; log:\n{self.text()[-4000:]}", step=0.1)
        return time.monotonic() - started

    def text(self) -> str:
        return self.display.text() if self.display is not None else ""

    def stop(self) -> None:
        if self.display is not None:
            self.display.stop(30)


@pytest.fixture
def red() -> Iterator[PageServer]:
    with one_page(RED) as server:
        yield server


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Supervisor]:
    supervisor = Supervisor(tmp_path)
    supervisor.start()
    yield supervisor
    supervisor.stop()


def playback(url: str) -> dict[str, object] | None:
    try:
        answer = requests.get(url + "/playback/", timeout=5)
    except requests.RequestException:
        return None
    body: dict[str, object] = answer.json()
    return body


def show_red(supervisor: Supervisor, red: PageServer) -> int:
    url = supervisor.url
    supervisor.wait_until(lambda: playback(url) is not None, 60)
    item = {"content-item": red.url + "/red", "preferred-duration": "10 minutes"}
    assert requests.post(url + "/schedule", json=item, timeout=5).status_code == 202
    supervisor.wait_until(lambda: screen_is_red(url), 30)
    record = playback(url)
    assert record is not None and record["content-item"] == item["content-item"]
    sequence = record["sequence"]
    assert isinstance(sequence, int)
    health = requests.get(url + "/x/health", timeout=5).json()
    assert health["status"] == "ok" and health["renderer"]["screen"]["right"] is True
    return sequence


def lose_and_recover(supervisor: Supervisor, red: PageServer, sequence: int) -> float:
    """Kill every web engine process; seconds until the red page is on screen again and
    /playback/ says so with a new record."""
    display = supervisor.display
    assert display is not None
    kill_web_engine(display.pid)
    lost = time.monotonic()
    assert display.wait(20) == EXIT_SCREEN_LOST

    def back() -> bool:
        record = playback(supervisor.url)
        return (
            record is not None
            and record["content-item"] == red.url + "/red"
            and isinstance(record["sequence"], int)
            and record["sequence"] > sequence
            and screen_is_red(supervisor.url)
        )

    supervisor.wait_until(back, 90)
    return time.monotonic() - lost


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
