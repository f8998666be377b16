"""Fullscreen on a bare X server (Xvfb, no window manager): real pixels, read from the server."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.player.conftest import COLOURS, LoopbackServer
from tests.support.tools import require_tools
from tests.support.xvfb import xvfb as start_xvfb

pytestmark = [pytest.mark.qt, pytest.mark.xvfb]

ROOT = Path(__file__).resolve().parents[3]
WIDTH, HEIGHT = 640, 400


@pytest.fixture(scope="module")
def xvfb() -> Iterator[str]:
    require_tools("import")  # ImageMagick reads the whole X screen back
    with start_xvfb(WIDTH, HEIGHT) as display:
        yield display


class Kiosk:
    def __init__(self, display: str, *args: str) -> None:
        env = dict(os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb")
        env.pop("WAYLAND_DISPLAY", None)
        self.display = display
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.player.renderer.xvfb_kiosk", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def wait_ready(self) -> None:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.strip() == "READY", line

    def send(self, line: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline()

    def screen(self, tmp_path: Path) -> object:
        from PySide6.QtGui import QImage

        target = tmp_path / "root.png"
        env = dict(os.environ, DISPLAY=self.display)
        subprocess.run(["import", "-window", "root", str(target)], env=env, check=True, timeout=30)
        image = QImage(str(target))
        assert not image.isNull()
        return image

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.send("quit")
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


def _rgb(image: object, x: int, y: int) -> tuple[int, int, int]:
    from PySide6.QtGui import QColor

    colour = QColor(image.pixel(x, y))  # type: ignore[attr-defined]
    return (colour.red(), colour.green(), colour.blue())


def test_fullscreen_fills_the_screen_corner_to_corner_and_rotates(
    xvfb: str, http_server: LoopbackServer, tmp_path: Path
) -> None:
    marker = (
        "<!doctype html><body style='margin:0;background:#ff0000'>"
        "<div style='width:50vw;height:50vh;background:#0000ff'></div></body>"
    )
    http_server.served.files["/marker.html"] = (marker.encode(), "text/html")
    corners = {
        0: (1, 1),
        90: (WIDTH - 2, 1),
        180: (WIDTH - 2, HEIGHT - 2),
        270: (1, HEIGHT - 2),
    }
    for rotation in (0, 270):
        kiosk = Kiosk(xvfb, "--rotation", str(rotation), http_server.base + "/marker.html")
        try:
            kiosk.wait_ready()
            image = kiosk.screen(tmp_path)
            assert (image.width(), image.height()) == (WIDTH, HEIGHT)  # type: ignore[attr-defined]
            for angle, (x, y) in corners.items():
                wanted = COLOURS["blue"] if angle == rotation else COLOURS["red"]
                assert _rgb(image, x, y) == wanted, (rotation, angle)
        finally:
            kiosk.close()


@pytest.mark.parametrize("views", [2, 1])
def test_no_blank_frame_on_the_x_server_during_transitions(
    xvfb: str, http_server: LoopbackServer, views: int
) -> None:
    names = ("red", "green", "blue")
    colours = ";".join(",".join(str(v) for v in COLOURS[name]) for name in names)
    urls = [http_server.colour(name) for name in names]
    kiosk = Kiosk(xvfb, "--colours", colours, "--views", str(views), *urls)
    try:
        kiosk.wait_ready()
        result = json.loads(kiosk.send("transitions 15"))
    finally:
        kiosk.close()
    assert result["samples"] > 30
    assert result["bad"] == 0, result
