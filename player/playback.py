"""The playback record: what the screen shows now, kept durably and told to subscribers.

The engine calls :meth:`PlaybackRecord.changed` each time the renderer confirms a new item (or
the idle page) painted. The record and one webhook event per subscriber are committed in one
SQLite transaction (``player.store``, ``server.outbox``), so a power cut never leaves a record
that subscribers were not told about, or an event for a record that was not kept.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import Any

from player.engine import Playback
from player.store import DisplayStore
from server.http import json_bytes
from server.outbox import Outbox

PLAYBACK_TOPIC = "playback"
RECENT = 64  # records kept in memory for event-stream clients resuming (Last-Event-ID)


class PlaybackRecord:
    """The current record (``GET /playback/``) and the playback subscriptions."""

    def __init__(
        self,
        *,
        store: DisplayStore,
        outbox: Outbox,
        display_url: Callable[[], str],
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._outbox = outbox
        self._display_url = display_url
        self._lock = threading.Lock()
        self._changes = threading.Condition(self._lock)
        self._recent: deque[tuple[int, bytes]] = deque(maxlen=RECENT)
        sequence, record = store.playback()
        self._encoded: bytes | None = None
        self._record: dict[str, Any] = record or {
            "content-item": None,
            "content-type": None,
            "origin": "idle",
            "set": None,
            "started": clock().isoformat(),
            "duration": None,
            "sequence": sequence,
        }

    def current(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._record)

    def encoded(self) -> bytes:
        """The record as the API sends it, encoded once per change (GET /playback/ is polled)."""
        with self._lock:
            if self._encoded is None:
                self._encoded = json_bytes(self._record)
            return self._encoded

    def changed(self, playback: Playback) -> None:
        """Commit the new record and one webhook event per subscriber, together."""

        def publish(connection: sqlite3.Connection, record: dict[str, Any]) -> None:
            body = json.dumps({**record, "display": self._display_url()}).encode()
            self._outbox.publish(PLAYBACK_TOPIC, body, "application/json", connection=connection)

        record = self._store.save_playback(playback.fields(), publish)
        with self._lock:
            self._record = record
            self._encoded = None
            self._recent.append((int(record["sequence"]), json_bytes(record)))
            self._changes.notify_all()
        self._outbox.notify()

    def updates_after(self, sequence: int | None, timeout: float) -> list[tuple[int, bytes]]:
        """Records newer than ``sequence`` as ``(sequence, encoded)``, oldest first, waiting up
        to ``timeout`` seconds for one ([] when none came). ``None``, a sequence this display
        never reached, or one older than the records kept: the current record alone."""
        with self._changes:
            current = int(self._record.get("sequence") or 0)
            if (
                sequence is None
                or sequence > current
                or (sequence < current and not any(s == sequence + 1 for s, _ in self._recent))
            ):
                return [(current, json_bytes(self._record))]
            if sequence == current:
                self._changes.wait(timeout)
            return [(s, body) for s, body in self._recent if s > sequence]

    def subscribe(self, uri: str) -> bool:
        return self._outbox.subscribe(PLAYBACK_TOPIC, uri)

    def unsubscribe(self, uri: str) -> bool:
        return self._outbox.unsubscribe(PLAYBACK_TOPIC, uri)

    def delivery_stats(self) -> dict[str, Any]:
        return self._outbox.stats()
