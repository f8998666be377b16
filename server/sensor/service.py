"""A sensor's parts wired together: source loop, outbox, API server."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from server.outbox import Outbox
from server.sensor.app import TOPIC, create_app
from server.sensor.source import SensorLoop, Source
from server.wsgi import WsgiServer


class SensorService:
    """One sensor: ``start()`` it, read ``url``, ``stop()`` it (the CLI and tests use this)."""

    def __init__(
        self,
        source: Source,
        *,
        sensor_id: str,
        sensor_type: str,
        data_dir: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        interval: float = 10.0,
        poll: float = 1.0,
        token: str | None = None,
    ) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.outbox = Outbox(
            data_dir / "outbox.sqlite3",
            name="sensor",
            # Displays with an API token refuse unauthenticated updates.
            bearer_token=os.environ.get("PDN_DISPLAY_TOKEN") or None,
        )
        self.loop = SensorLoop(
            source, sensor_id, sensor_type, self._publish, interval=interval, poll=poll
        )
        self.app = create_app(self.loop, self.outbox, token=token)
        self.server = WsgiServer(self.app, host, port, name="sensor")

    def _publish(self, body: dict[str, Any]) -> None:
        self.outbox.publish(TOPIC, json.dumps(body).encode(), "application/json")

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> SensorService:
        self.outbox.start()
        self.loop.start()
        return self

    def stop(self) -> None:
        self.server.stop()
        self.loop.stop()
        self.outbox.stop()
