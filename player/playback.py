"""The playback record: what the screen shows now, kept durably and told to subscribers.

The engine calls :meth:`PlaybackRecord.changed` each time the renderer confirms a new item (or
the idle page) painted. The record and one webhook event per subscriber are committed in one
SQLite transaction (``player.store``, ``server.platform.outbox``), so a power cut never leaves
a record that subscribers were not told about, or an event for a record that was not kept.

The commit is made by this record's own writer thread, in the order of the changes, and the
record is published (``GET /playback/``, the event stream) once it is on disk. The engine
calls from the GUI thread, on the instant an item is shown: a commit there waits for its fsync
(``synchronous=FULL``), and on a disk that others share an fsync can take seconds (3 displays
of a benchmark on one shared disk have frozen together for 38 s, their GUI threads in this
commit while the disk flushed, which is why all of them at once). The screen must not wait for
the disk.

On a full disk the record is kept in memory and stored and sent when space returns, with a
jump in ``sequence`` subscribers can see (``PlaybackRecord._save``); health says why.

A screen split by a layout has one :class:`~player.engine.Playback` per zone change; the record
holds every zone (:func:`merged`): the main zone's fields at the top, as on a screen without a
layout, ``zones`` by name, and ``zone``, the zone whose change made the record. Each change in
any zone is a record of its own, with the next ``sequence``, and one update per subscriber.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import Any

from player.engine import Playback
from player.store import DisplayStore
from player.writer import OrderedWriter
from server.platform.db import disk_full, note_disk_full
from server.platform.http import json_bytes
from server.platform.outbox import Outbox

PLAYBACK_TOPIC = "playback"
Publish = Callable[[sqlite3.Connection, dict[str, Any]], None]
log = logging.getLogger("pdn.playback")
RECENT = 64  # records kept in memory for event-stream clients resuming (Last-Event-ID)
#: What the record says of each zone (the record's top holds the main zone's).
ZONE_FIELDS = ("content-item", "content-type", "origin", "set", "started", "duration")
MAIN = "main"


def merged(record: dict[str, Any], playback: Playback) -> dict[str, Any]:
    """The record (without ``sequence``) after ``playback``, the change of one zone.

    The zones of the same layout are kept; another layout (or none: full screen) keeps only
    the main zone, as it shows until it changes, and the zone that changed. A zone other than
    the main one without a layout is refused (ValueError): there is no such zone to show it.
    """
    if playback.layout is None and playback.zone != MAIN:
        raise ValueError(f"a change in zone {playback.zone!r} without a layout")
    known = normalised(record)
    zones: dict[str, dict[str, Any]] = (
        dict(known["zones"]) if known["layout"] == playback.layout else {MAIN: known["zones"][MAIN]}
    )
    zones[playback.zone] = playback.fields()
    main = zones[MAIN]
    return {**main, "layout": playback.layout, "zones": zones, "zone": playback.zone}


def normalised(record: dict[str, Any]) -> dict[str, Any]:
    """A record with ``layout``, ``zones`` and ``zone``: one stored without them (full screen)
    gets them from its top fields."""
    if isinstance(record.get("zones"), dict) and MAIN in record["zones"]:
        return record
    top = {name: record.get(name) for name in ZONE_FIELDS}
    out = {**top, "layout": None, "zones": {MAIN: top}, "zone": MAIN}
    if "sequence" in record:
        out["sequence"] = record["sequence"]
    return out


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
        # Disk full: the record is kept in memory (self._unsaved says why) and retried.
        self._save_lock = threading.Lock()
        self._unsaved: str | None = None
        self._publish: Publish | None = None
        self._retry: threading.Timer | None = None
        self.retry_interval = 5.0
        self._changes = threading.Condition(self._lock)
        self._recent: deque[tuple[int, bytes]] = deque(maxlen=RECENT)
        sequence, record = store.playback()
        self._encoded: bytes | None = None
        self._record: dict[str, Any] = normalised(
            record
            or {
                "content-item": None,
                "content-type": None,
                "origin": "idle",
                "set": None,
                "started": clock().isoformat(),
                "duration": None,
                "sequence": sequence,
            }
        )
        self._writer = OrderedWriter("playback-writer")

    def current(self) -> dict[str, Any]:
        with self._lock:
            record = self._record
            return {**record, "zones": {name: dict(zone) for name, zone in record["zones"].items()}}

    def encoded(self) -> bytes:
        """The record as the API sends it, encoded once per change (GET /playback/ is polled)."""
        with self._lock:
            if self._encoded is None:
                self._encoded = json_bytes(self._record)
            return self._encoded

    def changed(self, playback: Playback) -> None:
        """Hand the change (of one zone) to the writer, which makes the new record, commits
        it with one webhook event per subscriber, together, and then publishes it. Returns at
        once (never waits for the disk: the module's docstring)."""
        self._writer.submit(self._commit, playback, failed="record the playback change")

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every change handed over is committed and published (False: not within
        ``timeout`` seconds)."""
        return self._writer.flush(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Commit what is queued, then stop the writer."""
        self._writer.close(timeout)

    def _commit(self, playback: Playback) -> None:
        with self._lock:
            fields = merged(self._record, playback)

        def publish(connection: sqlite3.Connection, record: dict[str, Any]) -> None:
            body = json.dumps({**record, "display": self._display_url()}).encode()
            self._outbox.publish(PLAYBACK_TOPIC, body, "application/json", connection=connection)

        record = self._save(fields, publish)
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

    def _save(self, fields: dict[str, Any], publish: Publish) -> dict[str, Any]:
        """Store the record and queue its webhooks; on a full disk, keep it in memory only.

        The record then still tells the truth (``GET /playback/``, the next ``sequence``), and
        a retry every few seconds stores the *current* record and sends it when space returns:
        subscribers get it with a jump in ``sequence`` (the records shown meanwhile were never
        sent), a gap they can see.
        """
        self._publish = publish
        with self._save_lock:
            with self._lock:
                after = int(self._record.get("sequence") or 0) + 1
            try:
                record = self._store.save_playback(fields, publish, sequence=after)
            except Exception as error:
                full = disk_full(error)
                if full is None:
                    raise
                note_disk_full(full)
                self._unsaved = full
                self._retry_later()
                return {**fields, "sequence": after}
            self._unsaved = None
            return record

    def _retry_later(self) -> None:
        if self._retry is None or not self._retry.is_alive():
            self._retry = threading.Timer(self.retry_interval, self._save_unsaved)
            self._retry.daemon = True
            self._retry.start()

    def _save_unsaved(self) -> None:
        """Store and send the record kept in memory while the disk was full."""
        with self._save_lock:
            if self._unsaved is None or self._publish is None:
                return
            with self._lock:
                record = dict(self._record)
            sequence = int(record.pop("sequence"))
            try:
                self._store.save_playback(record, self._publish, sequence=sequence)
            except Exception as error:
                if disk_full(error) is None:
                    log.exception("cannot store the playback record")
                self._retry = None
                self._retry_later()
                return
            self._unsaved = None
        log.info("the disk has room again: playback record %d stored and sent", sequence)
        self._outbox.notify()

    def storage(self) -> dict[str, Any]:
        """For health: whether the current record is stored, and why not."""
        return {"record-stored": self._unsaved is None, "error": self._unsaved}

    def subscribe(self, uri: str, signing_secret: str | None = None) -> bool:
        return self._outbox.subscribe(PLAYBACK_TOPIC, uri, signing_secret)

    def unsubscribe(self, uri: str) -> bool:
        return self._outbox.unsubscribe(PLAYBACK_TOPIC, uri)

    def delivery_stats(self) -> dict[str, Any]:
        return self._outbox.stats()
