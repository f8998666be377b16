"""Fixtures for the player tests: a loopback page server and a real kiosk renderer.

Chromium's flags must be in place before Qt WebEngine starts, and conftest files are imported
before any test runs, so this sets them up here, whichever test makes the QApplication first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from player.renderer.options import prepare_process
from tests.support.pages import PageServer, Reply, Request

if TYPE_CHECKING:
    from player.renderer import KioskRenderer

prepare_process()

RENDERER_SIZE = (320, 240)  # the window of make_renderer's renderers
COLOURS = {
    "red": (255, 0, 0),
    "green": (0, 255, 0),
    "blue": (0, 0, 255),
    "yellow": (255, 255, 0),
    "magenta": (255, 0, 255),
    "cyan": (0, 255, 255),
}


@dataclass
class Served:
    """What the test server serves, set by each test: path -> (body, content type)."""

    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range)
    no_range: bool = False
    slow_paths: set[str] = field(default_factory=set)
    down: bool = False


NO_STORE = {"Cache-Control": "no-store"}


def answer(served: Served, request: Request) -> Reply:
    """What the test server answers: a colour page (``/colour/rrggbb``, late with
    ``/slow/<ms>/rrggbb``), a served file (byte ranges unless ``no_range``), or 404."""
    path = request.route
    wanted = request.headers.get("Range")
    served.requests.append((path, wanted))
    if served.down:
        return Reply(drop=True)
    if path in served.slow_paths:
        return Reply(delay=30, drop=True)
    delay = 0.0
    slow = re.fullmatch(r"/slow/(\d+)/([0-9a-f]{6})", path)
    if slow:  # the first byte after this many milliseconds (tests of the load race)
        delay = int(slow.group(1)) / 1000
        path = f"/colour/{slow.group(2)}"
    match = re.fullmatch(r"/colour/([0-9a-f]{6})", path)
    if match:
        page = f"<!doctype html><html><body style='margin:0;background:#{match.group(1)}'>"
        return Reply(200, (page + "</body></html>").encode(), headers=NO_STORE, delay=delay)
    if path not in served.files:
        return Reply(404, b"not found", "text/plain", NO_STORE)
    body, kind = served.files[path]
    if wanted and not served.no_range:
        start = int(wanted.removeprefix("bytes=").split("-")[0])
        if start >= len(body):
            return Reply(416, b"", kind, {**NO_STORE, "Content-Range": f"bytes */{len(body)}"})
        ranged = {**NO_STORE, "Content-Range": f"bytes {start}-{len(body) - 1}/{len(body)}"}
        return Reply(206, body[start:], kind, ranged)
    return Reply(200, body, kind, NO_STORE)


@dataclass
class LoopbackServer:
    base: str
    served: Served
    stop: Callable[[], None]

    def colour(self, name: str) -> str:
        red, green, blue = COLOURS[name]
        return f"{self.base}/colour/{red:02x}{green:02x}{blue:02x}"


@pytest.fixture
def http_server() -> Iterator[LoopbackServer]:
    served = Served()
    with PageServer(keep_alive=True) as server:
        server.handle(lambda request: answer(served, request))
        yield LoopbackServer(server.url, served, server.close)


@dataclass
class Reports:
    """A RendererListener that records what the renderer reported."""

    shown: list[tuple[int, datetime, float | None]] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)
    ended: list[int] = field(default_factory=list)
    idle: list[datetime] = field(default_factory=list)

    def item_shown(self, token: int, at: datetime, natural_duration: float | None) -> None:
        self.shown.append((token, at, natural_duration))

    def item_failed(self, token: int, reason: str) -> None:
        self.failed.append((token, reason))

    def item_ended(self, token: int) -> None:
        self.ended.append(token)

    def idle_shown(self, at: datetime) -> None:
        self.idle.append(at)

    def shown_tokens(self) -> list[int]:
        return [token for token, _, _ in self.shown]

    def failed_tokens(self) -> list[int]:
        return [token for token, _ in self.failed]


@pytest.fixture
def make_renderer(qapp: object) -> Iterator[Callable[..., tuple[KioskRenderer, Reports]]]:
    """Make real kiosk renderers in a 320x240 window (options override the defaults); each is
    closed after the test."""
    from player.renderer import KioskRenderer, RendererOptions
    from tests.support.pixels import process_for

    made: list[KioskRenderer] = []

    def make(**options: object) -> tuple[KioskRenderer, Reports]:
        settings: dict[str, object] = {
            "fullscreen": False,
            "window_size": RENDERER_SIZE,
            "display_name": "Test display",
            "api_url": "http://127.0.0.1:8080",
            "keep_screen_on": False,
        }
        settings.update(options)
        renderer = KioskRenderer(RendererOptions(**settings))  # type: ignore[arg-type]
        reports = Reports()
        renderer.set_listener(reports)
        made.append(renderer)
        return renderer, reports

    yield make
    for renderer in made:
        renderer.close()
    process_for(0.1)


def write_png(path: Path, rgb: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> Path:
    from PySide6.QtGui import QColor, QImage

    image = QImage(size[0], size[1], QImage.Format.Format_RGB32)
    image.fill(QColor(*rgb))
    assert image.save(str(path))
    return path
