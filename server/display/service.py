"""The Display Segment's behaviour, without HTTP and without Qt.

:class:`DisplayService` ties the durable store, the playlist engine and the webhook outbox
together; the Flask blueprint (``server.display.api``) validates requests and calls it, and
``player.app`` adds the Qt side (renderer, GUI thread). Other parts of the display use it
directly too: the schedule follower calls :meth:`DisplayService.apply_cds` with each CDS it
receives.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from cds.parser import parse
from player.config import DisplayConfig
from player.engine import Available, Engine, Playback, Schedule
from player.store import DisplayStore, SensorReading, UnknownSensorError
from server.outbox import Outbox

if TYPE_CHECKING:
    from cds.model import ContentItem, ContentSet

log = logging.getLogger("pdn.display")

PLAYBACK_TOPIC = "playback"

__all__ = ["PLAYBACK_TOPIC", "DisplayService", "Rejected", "ScreenAccess", "UnknownSensorError"]


class ScreenAccess(Protocol):
    """What the API may ask of the screen; implemented on the GUI side (``player.app``)."""

    def grab_png(self, timeout: float) -> bytes:
        """A PNG of what the screen shows; raises TimeoutError or RuntimeError."""

    def status(self) -> dict[str, Any]:
        """``{"alive": bool, "last-frame": RFC 3339 or None, ...}`` (thread-safe)."""

    def set_context(self, readings: dict[str, Any]) -> None:
        """Hand the latest sensor readings to web content (thread-safe, returns at once)."""


@dataclass(frozen=True)
class Rejected:
    """A request understood but refused by the display's policy."""

    reason: str


def encode_json(body: Any) -> bytes:
    """JSON exactly as ``server.http.json_response`` writes it."""
    return (json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def utc_now() -> datetime:
    return datetime.now(UTC)


class DisplayService:
    """One display: its state, its engine and its webhooks."""

    def __init__(
        self,
        *,
        config: DisplayConfig,
        store: DisplayStore,
        outbox: Outbox,
        schedule: Schedule,
        base_url: Callable[[], str],
        clock: Callable[[], datetime] = utc_now,
        available: Available | None = None,
        locate: Callable[[ContentItem], str] | None = None,
        on_documents: Callable[[list[ContentSet]], None] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.outbox = outbox
        self.clock = clock
        self.base_url = base_url
        self.screen: ScreenAccess | None = None
        self.cache_status: Callable[[], dict[str, Any]] | None = None
        self._on_documents = on_documents
        self._lock = threading.Lock()
        self._cds_lock = threading.Lock()
        self._documents: dict[str, ContentSet] = {}
        self._remote: dict[str, ContentSet] = {}
        self._schedule = schedule
        self._last_cds: float | None = None
        self._started = time.monotonic()
        sequence, record = store.playback()
        self._record_json: bytes | None = None
        self._record: dict[str, Any] = record or {
            "content-item": None,
            "content-type": None,
            "origin": "idle",
            "set": None,
            "started": clock().isoformat(),
            "duration": None,
            "sequence": sequence,
        }
        self.engine = Engine(
            clock=clock,
            schedule=schedule,
            store=store,
            available=available,
            locate=locate,
            on_playback=self._playback_changed,
        )
        self._restore_documents()

    # CDS schedules

    def _restore_documents(self) -> None:
        for name, xml, received in self.store.cds_documents():
            try:
                self._documents[name] = parse(xml).root
            except Exception as error:  # a stored document that no longer parses: keep going
                log.error("stored CDS %r cannot be used any more: %s", name, error)
                continue
            self._last_cds = max(self._last_cds or 0.0, received)
        if self._documents:
            log.info("%d CDS document(s) restored: %s", len(self._documents), ", ".join(
                repr(n) for n in self._documents))  # fmt: skip
        self._documents_changed()

    def apply_cds(self, data: bytes) -> str:
        """Add or replace the CDS with this root content-set name (an empty set removes it).

        Raises ``cds.errors.CdsError`` for an invalid document, changing nothing.
        Returns what happened ("added", "replaced", "removed", "unchanged").
        """
        document = parse(data)
        for warning in document.warnings:
            log.warning("CDS: %s", warning)
        root = document.root
        name = root.name or ""
        now = self.clock().timestamp()
        with self._cds_lock:
            if root.type == "inline" and not root.children:
                existed = self.store.delete_cds(name)
                self._documents.pop(name, None)
                outcome = "removed" if existed else "unchanged"
            else:
                outcome = "replaced" if name in self._documents else "added"
                self.store.put_cds(name, data, now)
                self._documents.pop(name, None)
                self._documents[name] = root
            self._last_cds = now
            self._documents_changed()
        log.info("CDS %r %s (%d set(s) scheduled)", name, outcome, len(self._documents))
        return outcome

    def set_remote(self, key: str, content: ContentSet | None) -> None:
        """Plug in (None: take out) the fetched CDS of a remote content-set, by the remote
        set's key or source URI (``Playlist.set_remote``); its files join the cache's list."""
        with self._cds_lock:
            set_remote = getattr(self._schedule, "set_remote", None)
            if set_remote is None:
                raise RuntimeError("this schedule has no remote sets")
            set_remote(key, content)
            if content is None:
                self._remote.pop(key, None)
            else:
                self._remote[key] = content
            self._documents_changed()

    def _documents_changed(self) -> None:
        documents = list(self._documents.values())
        self.engine.set_documents(documents)
        if self._on_documents is not None:
            try:
                self._on_documents(documents + list(self._remote.values()))
            except Exception:
                log.exception("the content cache could not take the new schedule")

    def document_names(self) -> list[str]:
        with self._cds_lock:
            return list(self._documents)

    # Ad-hoc requests

    def request_item(self, url: str, duration: float | None) -> Rejected | None:
        """Queue a single item (JSON ``POST /schedule``); a Rejected says why not."""
        if not self.config.origin_allowed(url):
            log.info("rejected %s: origin not allowed", url)
            return Rejected("the content item's origin is not allowed on this display")
        reason = self.engine.request(url, duration)
        if reason is not None:
            log.info("rejected %s: %s", url, reason)
            return Rejected(reason)
        return None

    # Sensors

    def record_sensing(
        self,
        sensor_id: str,
        sensor_type: str | None,
        *,
        data: Any = None,
        has_data: bool,
        data_source: str | None,
    ) -> None:
        """Keep a reading; raises UnknownSensorError when a new sensor names no type."""
        self.store.record_sensing(
            sensor_id,
            sensor_type,
            data=data,
            has_data=has_data,
            data_source=data_source,
            now=self.clock().timestamp(),
        )
        screen = self.screen
        if screen is not None:
            screen.set_context(self.context())

    def sensors(self) -> list[dict[str, str]]:
        return [
            {"sensor-id": s.sensor_id, "sensor-type": s.sensor_type} for s in self.store.sensors()
        ]

    def context(self) -> dict[str, Any]:
        """The latest reading of every sensor, keyed by sensor-id, for web content."""
        return {s.sensor_id: _reading(s) for s in self.store.sensors()}

    # Playback

    def playback(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._record)

    def playback_json(self) -> bytes:
        """The record as the API sends it, encoded once per change (GET /playback/ is polled)."""
        with self._lock:
            if self._record_json is None:
                self._record_json = encode_json(self._record)
            return self._record_json

    def _playback_changed(self, playback: Playback) -> None:
        """Commit the new record and one webhook event per subscriber, together."""

        def publish(connection: Any, record: dict[str, Any]) -> None:
            body = json.dumps({**record, "display": self.base_url()}).encode()
            self.outbox.publish(PLAYBACK_TOPIC, body, "application/json", connection=connection)

        record = self.store.save_playback(playback.fields(), publish)
        with self._lock:
            self._record = record
            self._record_json = None
        self.outbox.notify()

    def subscribe(self, uri: str) -> bool:
        return self.outbox.subscribe(PLAYBACK_TOPIC, uri)

    def unsubscribe(self, uri: str) -> bool:
        return self.outbox.unsubscribe(PLAYBACK_TOPIC, uri)

    # Display info and health

    def info(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "location": dict(self.config.location or {}),
            "sensors": {"url": "sensing"},
        }
        if self.config.name:
            body["name"] = self.config.name
        return body

    def health(self) -> dict[str, Any]:
        now = self.clock()
        status = self.engine.status()
        screen = self.screen.status() if self.screen is not None else {"alive": False}
        disk = shutil.disk_usage(self.store.path.parent)
        cache = self.cache_status() if self.cache_status is not None else None
        healthy = bool(screen.get("alive")) and disk.free > 50 * 1024 * 1024
        return {
            "status": "ok" if healthy else "degraded",
            "time": now.isoformat(),
            "uptime": round(time.monotonic() - self._started, 3),
            "renderer": screen,
            "playback": self.playback(),
            "engine": {
                "idle": status.idle,
                "queue-length": status.queue_length,
                "current": status.current,
                "pending": status.pending,
                "next-wakeup": status.next_wakeup.isoformat() if status.next_wakeup else None,
                "backed-off": status.backed_off,
            },
            "schedule": {
                "sets": self.document_names(),
                "last-received": _iso(self._last_cds),
                "age": None
                if self._last_cds is None
                else round(now.timestamp() - self._last_cds, 3),
            },
            "cache": cache,
            "disk": {"path": str(self.store.path.parent), "free": disk.free, "total": disk.total},
            "webhooks": self.outbox.stats(),
        }

    def screenshot(self, timeout: float = 5.0) -> bytes:
        if self.screen is None:
            raise RuntimeError("this display has no screen attached")
        return self.screen.grab_png(timeout)


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, UTC).isoformat()


def _reading(sensor: SensorReading) -> dict[str, Any]:
    reading: dict[str, Any] = {"sensor-type": sensor.sensor_type, "updated": _iso(sensor.updated)}
    if sensor.has_data:
        reading["data"] = sensor.data
    if sensor.data_source is not None:
        reading["data-source"] = sensor.data_source
    return reading
