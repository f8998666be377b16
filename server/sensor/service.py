"""A sensor's parts wired together: source loop, outbox, API server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from server.displaycreds import DisplayCredentials
from server.sensor.app import TOPIC, create_app
from server.sensor.source import SensorLoop, Source
from server.standalone import SegmentService


class SensorService(SegmentService):
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
        super().__init__("sensor")
        # The displays' tokens and certificates, by pairing or configuration (issue 22).
        self.credentials = DisplayCredentials()
        self.outbox = self._outbox(
            data_dir, pins=self.credentials.pin, tokens=self.credentials.token
        )
        self.loop = SensorLoop(
            source, sensor_id, sensor_type, self._publish, interval=interval, poll=poll
        )
        self.app = create_app(self.loop, self.outbox, token=token)
        self._listen(self.app, host, port, self.outbox, self.loop)

    def _publish(self, body: dict[str, Any]) -> None:
        # Only the newest reading matters: a dead subscriber's backlog is that one alone.
        self.outbox.publish(TOPIC, json.dumps(body).encode(), "application/json", latest_only=True)
