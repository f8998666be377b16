"""Fixtures for the renderer and cache tests: a loopback HTTP server and a real kiosk renderer.

Chromium's flags must be in place before Qt WebEngine starts, and conftest files are imported
before any test runs, so this sets them up here, whichever test makes the QApplication first.
"""

from __future__ import annotations

import contextlib
import http.server
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from player.renderer.options import prepare_process
from tests.support.reports import Reports

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


class _Handler(http.server.BaseHTTPRequestHandler):
    served: Served
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        served = self.served
        path = self.path.split("?")[0]
        served.requests.append((path, self.headers.get("Range")))
        if served.down:
            self.close_connection = True
            self.connection.close()
            return
        if path in served.slow_paths:
            time.sleep(30)
            return
        slow = re.fullmatch(r"/slow/(\d+)/([0-9a-f]{6})", path)
        if slow:  # the first byte after this many milliseconds (tests of the load race)
            time.sleep(int(slow.group(1)) / 1000)
            path = f"/colour/{slow.group(2)}"
        match = re.fullmatch(r"/colour/([0-9a-f]{6})", path)
        if match:
            body = (
                "<!doctype html><html><body style='margin:0;background:#"
                f"{match.group(1)}'></body></html>"
            ).encode()
            self._send(200, body, "text/html")
            return
        if path not in served.files:
            self._send(404, b"not found", "text/plain")
            return
        body, kind = served.files[path]
        wanted = self.headers.get("Range")
        if wanted and not served.no_range:
            start = int(wanted.removeprefix("bytes=").split("-")[0])
            if start >= len(body):
                self._send(416, b"", kind, {"Content-Range": f"bytes */{len(body)}"})
                return
            headers = {"Content-Range": f"bytes {start}-{len(body) - 1}/{len(body)}"}
            self._send(206, body[start:], kind, headers)
            return
        self._send(200, body, kind)

    def _send(
        self, status: int, body: bytes, kind: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        # The renderer drops loads it has replaced (what the race tests do): no traceback.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


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
    handler = type("Handler", (_Handler,), {"served": served})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stopped = False

    def stop() -> None:
        nonlocal stopped
        if not stopped:
            stopped = True
            server.shutdown()
            server.server_close()

    yield LoopbackServer(f"http://127.0.0.1:{server.server_address[1]}", served, stop)
    stop()


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
