"""Losing the web engine on a real ``pdn display``: every ``QtWebEngineProcess`` killed at once,
and the way back to the screen timed.

Chromium cannot start a render process again once its zygote is gone, so the display exits
with code 3 (``EXIT_SCREEN_LOST``) and its service manager starts it again. :class:`Supervisor`
plays that manager (``Restart=always``, ``RestartSec=0``). Shared by the tests of that exit
(tests/player/test_engine_loss.py) and the benchmark that times it (bench_engine_loss).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import requests
from PySide6.QtGui import QImage

from player.renderer.engineprocs import engine_children
from server.platform.exitcodes import EXIT_SCREEN_LOST
from tests.support.display import DisplayProcess
from tests.support.pages import PageServer, one_page
from tests.support.ports import free_port
from tests.support.waiting import wait_until

RED = b"<!doctype html><html><body style='margin:0;background:#f00'></body></html>"


def red_page() -> PageServer:
    """A page server with the red page at every path (``/red`` is the one scheduled)."""
    return one_page(RED)


def web_engine_processes(pid: int) -> list[int]:
    """Every live QtWebEngineProcess among ``pid``'s descendants (zygotes, renderers, GPU,
    utility), as the display itself finds them (``engine_children``)."""
    found: list[int] = []
    parents = [pid]
    while parents:
        for child in engine_children(parents.pop()):
            if child.alive:
                found.append(child.pid)
                parents.append(child.pid)
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
    """``Restart=always`` with ``RestartSec=0``: a display that exits is started again, on the
    same port, data directory and log."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.display: DisplayProcess | None = None
        self.exits: list[int] = []

    @property
    def data(self) -> Path:
        return self.folder / "data"

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


def playback(url: str) -> dict[str, object] | None:
    try:
        answer = requests.get(url + "/playback/", timeout=5)
    except requests.RequestException:
        return None
    body: dict[str, object] = answer.json()
    return body


def show_red(supervisor: Supervisor, red: PageServer) -> int:
    """The red page scheduled and on the screen; the sequence of its playback record."""
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
    assert display is not None and display.process is not None
    kill_web_engine(display.pid)
    lost = time.monotonic()
    assert display.process.wait(20) == EXIT_SCREEN_LOST

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
