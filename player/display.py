"""One display's behaviour behind its API, without HTTP and without Qt.

:class:`Display` is what ``server.display``'s HTTP face calls (it implements
:class:`server.display.port.DisplayPort`): it keeps CDS documents and hands them to the engine,
queues single items, keeps sensor readings and hands them to web content, and answers health
and screenshots. The schedule follower and the remote-set fetcher call :meth:`Display.apply_cds`
and :meth:`Display.set_remote` too, the same code path as ``POST /schedule``.
"""

from __future__ import annotations

import functools
import logging
import shutil
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from cds.model import ContentSet, Document
from cds.parser import parse
from cds.playlist import Playlist
from player.config import DisplayConfig
from player.engine import Engine
from player.playback import PlaybackRecord
from player.store import DisplayStore, SensorReading
from player.zones import ZoneEngine
from server.display.port import Rejected, SensorMessage
from server.platform.db import last_disk_full
from server.platform.release import package_version, release_status

log = logging.getLogger("pdn.display")

MIN_FREE_DISK = 50 * 1024 * 1024  # below this the display reports itself degraded


class ScreenAccess(Protocol):
    """What the display may ask of the screen; implemented on the GUI side (``player.screen``)."""

    def grab_png(self, timeout: float) -> bytes:
        """A PNG of what the screen shows; raises TimeoutError or RuntimeError."""

    def status(self) -> dict[str, Any]:
        """``{"alive": bool, "last-frame": RFC 3339 or None, ...}`` (thread-safe)."""

    def set_context(self, readings: dict[str, Any]) -> None:
        """Hand the latest sensor readings to web content (thread-safe, returns at once)."""


class ContentFiles(Protocol):
    """The content cache as the display sees it (``player.cachedcontent``)."""

    def documents_changed(self, documents: list[ContentSet]) -> None:
        """The schedule changed: these documents' files are the ones wanted now."""

    def status(self) -> dict[str, Any]:
        """Files, bytes and downloads, for health."""


class ClockStatus(Protocol):
    """The clock's synchronisation as health reports it (``player.clocksync.ClockSync``)."""

    def status(self) -> dict[str, Any]:
        """Source, synchronised or not, offset in ms (thread-safe; nothing guessed)."""


class MemoryStatus(Protocol):
    """The display's memory as health reports it (``player.memory.MemoryWatch``)."""

    def status(self) -> dict[str, Any]:
        """The tree's PSS and RSS, by role, the budget, profile and recycles, and a
        ``problem`` when memory makes the display degraded (thread-safe)."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class Display:
    """One display: its CDS documents, requests, sensors, playback record and health."""

    def __init__(
        self,
        *,
        config: DisplayConfig,
        store: DisplayStore,
        engine: Engine | ZoneEngine,
        playlist: Playlist,
        playback: PlaybackRecord,
        screen: ScreenAccess | None = None,
        content: ContentFiles | None = None,
        clock: Callable[[], datetime] = utc_now,
        memory: MemoryStatus | None = None,
        clock_sync: ClockStatus | None = None,
    ) -> None:
        self.config = config
        self._memory = memory
        self._clock_sync = clock_sync
        self.engine = engine
        self._store = store
        self._playlist = playlist
        self._playback = playback
        self._screen = screen
        self._content = content
        self._clock = clock
        self._cds_lock = threading.Lock()
        self._documents: dict[str, ContentSet] = {}
        self._remote: dict[str, ContentSet] = {}
        self._last_cds: float | None = None
        self._started = time.monotonic()
        self._restore_documents()

    @property
    def api_token(self) -> str | None:
        return self.config.api_token

    @property
    def protect_reads(self) -> bool:
        return self.config.protect_reads

    @property
    def accepts_cds(self) -> bool:
        return self.config.accept_cds

    # CDS schedules

    def _restore_documents(self) -> None:
        for name, xml, received in self._store.cds_documents():
            try:
                self._documents[name] = self.parse_cds(xml).root
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
        document = self.parse_cds(data)
        for warning in document.warnings:
            log.warning("CDS: %s", warning)
        root = document.root
        name = root.name or ""
        now = self._clock().timestamp()
        with self._cds_lock:
            if root.type == "inline" and not root.children:
                existed = self._store.delete_cds(name)
                self._documents.pop(name, None)
                outcome = "removed" if existed else "unchanged"
            else:
                outcome = "replaced" if name in self._documents else "added"
                self._store.put_cds(name, data, now)
                self._documents.pop(name, None)
                self._documents[name] = root
            self._last_cds = now
            self._documents_changed()
        log.info("CDS %r %s (%d set(s) scheduled)", name, outcome, len(self._documents))
        return outcome

    def parse_cds(self, data: bytes) -> Document:
        """A CDS as this display takes it: every content item's address must be of an origin
        it allows (``allowed_origins``), and a layout's zones may play at most ``[screen]
        video-zones`` videos at once; raises ``cds.errors.CdsError`` with the line at fault."""
        return parse(
            data,
            check_item=self.config.item_refusal,
            video_zones=self.config.screen.video_zone_limit(),
        )

    def set_remote_document(self, key: str, data: bytes) -> None:
        """A remote set's fetched CDS: checked as any other (``parse_cds``), then plugged in."""
        self.set_remote(key, self.parse_cds(data).root)

    def set_remote(self, key: str, content: ContentSet | None) -> None:
        """Plug in (None: take out) the fetched CDS of a remote content-set, by the remote
        set's key or source URI (``Playlist.set_remote``); its files join the cache's list."""
        with self._cds_lock:
            self._playlist.set_remote(key, content)
            if content is None:
                self._remote.pop(key, None)
            else:
                self._remote[key] = content
            self._documents_changed()

    def _documents_changed(self) -> None:
        documents = list(self._documents.values())
        self.engine.set_documents(documents)
        if self._content is not None:
            try:
                self._content.documents_changed(documents + list(self._remote.values()))
            except Exception:
                log.exception("the content cache could not take the new schedule")

    def document_names(self) -> list[str]:
        with self._cds_lock:
            return list(self._documents)

    # Ad-hoc requests

    def request_item(
        self, url: str, duration: float | None, zone: str | None = None
    ) -> Rejected | None:
        """Queue a single item (JSON ``POST /schedule``) in the main zone, or in ``zone`` of
        the layout on screen (``player.zones``); a Rejected says why not."""
        if not self.config.origin_allowed(url):
            log.info("rejected %s: origin not allowed", url)
            return Rejected("the content item's origin is not allowed on this display")
        reason = self.engine.request(url, duration, zone)
        if reason is not None:
            log.info("rejected %s: %s", url, reason)
            return Rejected(reason)
        return None

    # Sensors

    def record_sensing(self, message: SensorMessage) -> None:
        """Keep a reading; raises UnknownSensorError when a new sensor names no type."""
        self._store.record_sensing(message, now=self._clock().timestamp())
        if self._screen is not None:
            self._screen.set_context(self.context())

    def sensors(self) -> list[dict[str, str]]:
        return [
            {"sensor-id": s.sensor_id, "sensor-type": s.sensor_type} for s in self._store.sensors()
        ]

    def context(self) -> dict[str, Any]:
        """The latest reading of every sensor, keyed by sensor-id, for web content."""
        return {s.sensor_id: _reading(s) for s in self._store.sensors()}

    # Playback

    def playback(self) -> dict[str, Any]:
        return self._playback.current()

    def playback_json(self) -> bytes:
        return self._playback.encoded()

    def playback_updates(self, after: int | None, timeout: float) -> list[tuple[int, bytes]]:
        return self._playback.updates_after(after, timeout)

    def plays(self, since: int, limit: int, zone: str | None = None) -> dict[str, Any]:
        status = self._store.play_log_status()
        return {
            "plays": [play.json() for play in self._store.plays(since, limit, zone)],
            "last-sequence": status["last-sequence"],
        }

    def subscribe(self, uri: str, signing_secret: str | None = None) -> bool:
        return self._playback.subscribe(uri, signing_secret)

    def unsubscribe(self, uri: str) -> bool:
        return self._playback.unsubscribe(uri)

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
        now = self._clock()
        status = self.engine.status()
        screen = self._screen.status() if self._screen is not None else {"alive": False}
        disk = shutil.disk_usage(self._store.path.parent)
        cache = self._content.status() if self._content is not None else None
        storage = self._playback.storage()
        full = last_disk_full()
        storage["last-disk-full"] = (
            None if full is None else {"time": _iso(full[0]), "error": full[1]}
        )
        memory = self._memory.status() if self._memory is not None else None
        healthy = (
            bool(screen.get("alive"))
            and disk.free > MIN_FREE_DISK
            and bool(storage["record-stored"])
            and (memory is None or "problem" not in memory)
        )
        return {
            "status": "ok" if healthy else "degraded",
            "version": _version(),
            "release": release_status(),
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
            # The layout splitting the screen (null: full screen) and each zone's engine.
            "zones": (
                self.engine.zones_status()
                if isinstance(self.engine, ZoneEngine)
                else {"layout": None, "zones": {}}
            ),
            "clock": (
                self._clock_sync.status()
                if self._clock_sync is not None
                else {"source": "unknown", "synchronised": None, "offset-ms": None}
            ),
            "sync": self._playlist.sync_status(now),
            "schedule": {
                "sets": self.document_names(),
                "last-received": _iso(self._last_cds),
                "age": None
                if self._last_cds is None
                else round(now.timestamp() - self._last_cds, 3),
            },
            "cache": cache,
            "disk": {"path": str(self._store.path.parent), "free": disk.free, "total": disk.total},
            "storage": storage,
            "play-log": self._store.play_log_status(),
            "webhooks": self._playback.delivery_stats(),
            "memory": memory,
        }

    def screenshot(self, timeout: float = 5.0) -> bytes:
        if self._screen is None:
            raise RuntimeError("this display has no screen attached")
        return self._screen.grab_png(timeout)


@functools.cache
def _version() -> str:
    return package_version()


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, UTC).isoformat()


def _reading(sensor: SensorReading) -> dict[str, Any]:
    reading: dict[str, Any] = {"sensor-type": sensor.sensor_type, "updated": _iso(sensor.updated)}
    if sensor.has_data:
        reading["data"] = sensor.data
    if sensor.data_source is not None:
        reading["data-source"] = sensor.data_source
    return reading
