"""The real ``pdn ctl`` (a subprocess) against a real display served on 127.0.0.1."""

from __future__ import annotations

import json
import signal
import struct
import subprocess
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from server.ctl.cli import EXIT_OK, EXIT_REFUSED, EXIT_UNEXPECTED, EXIT_UNREACHABLE
from server.platform.wsgi import WsgiServer
from tests.support.ctl import pdn_ctl, watching
from tests.support.inprocess_display import Display
from tests.support.process import PDN


@pytest.fixture(autouse=True)
def quick_heartbeat(display_server: tuple[Flask, WsgiServer]) -> Iterator[None]:
    app, _server = display_server
    app.config["PDN_SSE_HEARTBEAT"] = 0.5
    yield
    app.config.pop("PDN_SSE_HEARTBEAT", None)


def pdn(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return pdn_ctl(*args, env=env)


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


class FakeScreen:
    def grab_png(self, timeout: float) -> bytes:
        return tiny_png()

    def status(self) -> dict[str, Any]:
        return {"alive": True, "last-frame": None}

    def set_context(self, readings: dict[str, Any]) -> None:
        pass


def test_watch_follows_the_event_stream_without_a_reverse_connection(display: Display) -> None:
    env = {"PDN_API_TOKEN": "t0ken", "PDN_API_URL": display.url}
    with watching("watch", display.url, "--json", env=env) as process:
        assert process.stdout is not None
        first = json.loads(process.stdout.readline())
        assert first == display.playback()
        display.post(
            "/schedule",
            json={"content-item": "http://example.org/w", "preferred-duration": "60 s"},
        )
        update = json.loads(process.stdout.readline())
        assert update["content-item"] == "http://example.org/w"
        assert update["sequence"] == first["sequence"] + 1
        # Nothing was subscribed: the display never calls the watcher back.
        assert display.outbox.subscribers("playback") == []
        assert display.service.playback() == update
        time.sleep(1.2)  # heartbeats pass unprinted
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == EXIT_OK
        assert process.stdout.read() == b""


def test_watch_human_lines_and_unreachable(display: Display) -> None:
    with watching("watch", display.url, text=True) as process:
        assert process.stdout is not None
        assert "idle page" in process.stdout.readline()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == EXIT_OK
    result = pdn("watch", "http://127.0.0.1:9")
    assert result.returncode == EXIT_UNREACHABLE
    assert "cannot reach" in result.stderr


def test_health_summary_json_and_exit_code(display: Display) -> None:
    # The test display has no screen: degraded, exit 1, and the reason is on the page.
    result = pdn("health", display.url)
    assert result.returncode == EXIT_REFUSED, result.stderr
    assert "status: degraded" in result.stdout
    assert "renderer: NOT ANSWERING" in result.stdout
    assert "playing: idle page" in result.stdout
    as_json = pdn("health", display.url, "--json")
    assert as_json.returncode == EXIT_REFUSED
    assert json.loads(as_json.stdout)["status"] == "degraded"
    display.service._screen = FakeScreen()
    healthy = pdn("health", display.url)
    assert healthy.returncode == EXIT_OK, healthy.stdout
    assert "status: ok" in healthy.stdout
    assert "renderer: alive" in healthy.stdout


def test_screenshot_to_a_file_and_without_a_screen(display: Display, tmp_path: Path) -> None:
    target = tmp_path / "shots" / "shot.png"
    target.parent.mkdir()
    result = pdn("screenshot", display.url, str(target))
    assert result.returncode == EXIT_UNEXPECTED
    assert "screen" in result.stderr
    assert not target.exists()
    display.service._screen = FakeScreen()
    result = pdn("screenshot", display.url, str(target))
    assert result.returncode == EXIT_OK, result.stderr
    assert target.read_bytes() == tiny_png()
    assert [p.name for p in target.parent.iterdir()] == ["shot.png"]  # no temporary file left
    to_stdout = subprocess.run(
        [PDN, "ctl", "screenshot", display.url, "-"], capture_output=True, check=False
    )
    assert to_stdout.returncode == EXIT_OK
    assert to_stdout.stdout == tiny_png()


def test_sensing_lists_the_sensors(display: Display) -> None:
    result = pdn("sensing", display.url)
    assert (result.returncode, result.stdout.strip()) == (EXIT_OK, "no sensors known")
    display.post(
        "/sensing", json={"sensor-id": "t1", "sensor-type": "air temperature", "data": 21.5}
    )
    result = pdn("sensing", display.url)
    assert result.returncode == EXIT_OK
    assert result.stdout.strip() == "t1  (air temperature)"
    as_json = pdn("sensing", display.url, "--json")
    assert json.loads(as_json.stdout) == [{"sensor-id": "t1", "sensor-type": "air temperature"}]
