"""Every segment by name, each its real app on a real waitress server on 127.0.0.1: for the
tests that check what all of them serve alike (their API docs page, say)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from server.content.app import DisplayForwarder
from server.display import create_app as create_display_app
from server.platform.wsgi import WsgiServer
from tests.support.content import content_app
from tests.support.scheduler import lobby_folder
from tests.support.scheduler import start as start_scheduler
from tests.support.sensor import light_sensor

SEGMENTS = ("display", "scheduler", "content", "sensor")


@contextlib.contextmanager
def serve_segment(name: str, tmp_path: Path) -> Iterator[str]:
    """One segment's real app on a real server on 127.0.0.1; yields its base URL."""
    with contextlib.ExitStack() as stack:
        if name == "display":
            placeholder: Any = type("Placeholder", (), {"api_token": None})()
            server = WsgiServer(create_display_app(placeholder), "127.0.0.1", 0).start()
            stack.callback(server.stop)
            yield server.url
        elif name == "content":
            forwarder = DisplayForwarder(timeout=1.0)
            stack.callback(forwarder.close)
            app = content_app(forwarder, tmp_path / "no-displays.toml", public="http://c")
            server = WsgiServer(app, "127.0.0.1", 0).start()
            stack.callback(server.stop)
            yield server.url
        elif name == "scheduler":
            scheduler = start_scheduler(tmp_path, lobby_folder(tmp_path))
            stack.callback(scheduler.stop)
            yield scheduler.url
        else:
            sensor = light_sensor(tmp_path, interval=60.0)
            stack.callback(sensor.stop)
            yield sensor.url
