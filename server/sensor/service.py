"""A sensor's parts wired together: source loop, outbox, API server.

Its readings go to subscribers with a bearer token only where that token was made for: a
display's own token (pairing, the displays file) to that display's origin, and the shared
``PDN_DISPLAY_TOKEN`` to the displays the file lists; any other subscriber gets none, and is
signed (Standard Webhooks) when it subscribed with a signing secret.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from server.platform.displaycreds import DisplayCredentials
from server.platform.net import is_loopback
from server.platform.standalone import SegmentService, display_token
from server.sensor.app import TOPIC, create_app
from server.sensor.source import SensorLoop, Source

log = logging.getLogger("pdn.sensor")


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
        # The displays' tokens and certificates, by pairing or configuration.
        self.credentials = DisplayCredentials(shared_token=display_token())
        self.outbox = self._outbox(
            data_dir,
            pins=self.credentials.pin,
            # A listed display's token to it alone; no token for any other subscriber.
            tokens=self.credentials.bearer,
        )
        self.loop = SensorLoop(
            source, sensor_id, sensor_type, self._publish, interval=interval, poll=poll
        )
        beyond_loopback = not is_loopback(host)
        if beyond_loopback and token is None:
            log.warning(
                "listening on %s with no token: subscriptions are refused (401) until"
                " PDN_API_TOKEN is set",
                host,
            )
        self.app = create_app(self.loop, self.outbox, token=token, beyond_loopback=beyond_loopback)
        self._listen(self.app, host, port, self.outbox, self.loop)

    def _publish(self, body: dict[str, Any]) -> None:
        # Only the newest reading matters: a dead subscriber's backlog is that one alone.
        self.outbox.publish(TOPIC, json.dumps(body).encode(), "application/json", latest_only=True)
