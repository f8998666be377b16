"""The display's durable state: one SQLite file under ``--data-dir``.

What survives ``kill -9`` or a power cut: the CDS documents (raw XML as received, one per root
content-set name), the interrupt queues (each request with its remaining time and, for the one
on screen, when it went up: the main zone's, and each other zone's by its layout and name), the
sensors and their latest readings, the playback record with its ``sequence``, and the play log:
every record, kept 90 days and at most :data:`PLAY_LOG_ROWS` rows (``GET /x/plays``).
Subscriptions and queued webhook events live in the same file, in the tables of
:mod:`server.platform.outbox`, so a playback change, its entry in the play log and its events
commit together.

SQLite settings, and why:
- WAL: readers (the API) never wait for the writer (the engine), and a crash never corrupts.
- ``synchronous=FULL`` on this connection: every commit is on disk before the API answers or
  the playback record is published. With NORMAL a power cut may drop the last commits, and the
  ``sequence`` could then go back after reboot, which docs/interface.md ("Display Segment")
  forbids. Writes here are few
  (a request, a CDS, a reading, a playback change), so the fsync per commit costs nothing that
  matters.
- The schema is versioned with ``PRAGMA user_version``; :data:`MIGRATIONS` upgrades old files
  in place (:func:`server.platform.db.migrate`, one transaction), and a file from a newer version is
  refused. The play log is a schema of its own in the file (:data:`PLAY_LOG_MIGRATIONS`, its
  version in the table ``play_log_schema``, as the outbox's tables have theirs): the release
  before it, which refuses a ``user_version`` newer than its own, still opens the file (a
  roll-back), and leaves the log alone. Connections and transactions come from
  :mod:`server.platform.db`.

Thread-safety: one connection guarded by a lock; every public method is one transaction.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.display.port import SensorMessage, UnknownSensorError
from server.platform.db import Migrations, SchemaTooNewError, connect, migrate, transaction

DB_NAME = "display.db"

# MIGRATIONS[n] takes a database from user_version n to n + 1.
MIGRATIONS: Migrations = (
    (
        """CREATE TABLE cds_documents (
            name TEXT PRIMARY KEY,          -- root content-set name ('' when it has none)
            xml BLOB NOT NULL,              -- the document exactly as received
            received REAL NOT NULL          -- UNIX time
        )""",
        """CREATE TABLE interrupts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            url TEXT NOT NULL,
            duration REAL NOT NULL,         -- seconds asked for
            remaining REAL NOT NULL,        -- seconds still owed when not on screen
            received REAL NOT NULL,
            shown_at REAL                   -- UNIX time it went on screen, NULL when waiting
        )""",
        """CREATE TABLE sensors (
            id INTEGER PRIMARY KEY AUTOINCREMENT,  -- order in which the display heard of them
            sensor_id TEXT NOT NULL UNIQUE,
            sensor_type TEXT NOT NULL,
            data TEXT,                      -- JSON text of the latest reading, or NULL
            data_source TEXT,               -- or the URI it can be read from
            updated REAL NOT NULL
        )""",
        """CREATE TABLE playback (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            sequence INTEGER NOT NULL,
            record TEXT NOT NULL            -- JSON of the playback record
        )""",
    ),
    # The request queues of the zones other than main, by the layout (its root set's name) and
    # zone they were made to; a table apart, so the release before, which reads
    # ``interrupts`` as the whole screen's queue, never plays them full screen.
    (
        """CREATE TABLE zone_interrupts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            layout TEXT NOT NULL,
            zone TEXT NOT NULL,
            url TEXT NOT NULL,
            duration REAL NOT NULL,
            remaining REAL NOT NULL,
            received REAL NOT NULL,
            shown_at REAL
        )""",
        "CREATE INDEX zone_interrupts_by_zone ON zone_interrupts (layout, zone, id)",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)
#: The steps pdn 0.1.0 knew: the version it reads stays there (server.platform.db).
RELEASED_STEPS = 1

# The play log, a schema of its own (see the module's docstring).
PLAY_LOG_MIGRATIONS: Migrations = (
    # The play log. Each playback record, written in the transaction that stores
    # it, so a scheduler that missed some (down, unsubscribed) fetches them here.
    (
        """CREATE TABLE plays (
            sequence INTEGER PRIMARY KEY,   -- the record's sequence
            item TEXT,                      -- content-item (NULL: the idle page)
            content_type TEXT,
            set_name TEXT,
            origin TEXT NOT NULL,
            started TEXT NOT NULL,          -- as the record gives it (ISO 8601)
            logged REAL NOT NULL,           -- UNIX time it was written (what expiry looks at)
            duration REAL,
            ended TEXT,                     -- when the next record started
            painted INTEGER NOT NULL        -- 1: the renderer confirmed it on screen
        )""",
        "CREATE INDEX plays_by_logged ON plays (logged)",
    ),
    # Zones: each play is of one zone of the screen ('main' on a screen without a layout),
    # under a layout (NULL: full screen). The plays still going on, found by zone when one ends.
    (
        "ALTER TABLE plays ADD COLUMN zone TEXT NOT NULL DEFAULT 'main'",
        "ALTER TABLE plays ADD COLUMN layout TEXT",
        "CREATE INDEX plays_open ON plays (zone, started) WHERE ended IS NULL",
    ),
)
PLAY_LOG_VERSION_TABLE = "play_log_schema"
#: The play log's steps that 0.2.0, the first release with it, knew: its count is kept in the
#: steps table (server.platform.db), so a later release's additive steps open after a rollback.
#: Constant once released.
PLAY_LOG_RELEASED_STEPS = 1

#: How long the play log keeps a play, and how many it keeps at most (oldest go first).
PLAY_LOG_DAYS = 90
PLAY_LOG_ROWS = 1_000_000
#: How often (in writes) plays past their time are deleted: a delete per write would cost an
#: index look-up each time for nothing, almost always.
_PRUNE_EVERY = 100


class StoreError(Exception):
    """The database cannot be used (newer schema, unreadable file)."""


@dataclass
class QueuedRequest:
    id: int
    url: str
    duration: float
    remaining: float
    received: float
    shown_at: float | None


@dataclass(frozen=True)
class LoggedPlay:
    """One entry of the play log: what the screen showed from ``started`` to ``ended``."""

    sequence: int
    item: str | None
    content_type: str | None
    set_name: str | None
    origin: str
    started: str
    duration: float | None
    ended: str | None
    painted: bool
    zone: str = "main"
    layout: str | None = None

    def json(self) -> dict[str, Any]:
        """As ``GET /x/plays`` gives it: the playback record's names, with ``ended``."""
        return {
            "sequence": self.sequence,
            "zone": self.zone,
            "layout": self.layout,
            "content-item": self.item,
            "content-type": self.content_type,
            "set": self.set_name,
            "origin": self.origin,
            "started": self.started,
            "ended": self.ended,
            "duration": self.duration,
            "painted": self.painted,
        }


@dataclass(frozen=True)
class SensorReading:
    sensor_id: str
    sensor_type: str
    data: Any
    has_data: bool
    data_source: str | None
    updated: float


def _migrate(connection: sqlite3.Connection) -> None:
    try:
        migrate(connection, MIGRATIONS, legacy=RELEASED_STEPS)
        migrate(
            connection,
            PLAY_LOG_MIGRATIONS,
            version_table=PLAY_LOG_VERSION_TABLE,
            legacy=PLAY_LOG_RELEASED_STEPS,
        )
    except SchemaTooNewError as error:
        raise StoreError(
            f"the database has schema version {error.found}, newer than this pdn"
            f" ({SCHEMA_VERSION}); upgrade pdn or use another --data-dir"
        ) from None


def _zones(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A playback record's zones by name (one stored without them: its top, the main zone)."""
    zones = record.get("zones")
    return zones if isinstance(zones, dict) and zones else {"main": record}


class DisplayStore:
    """The display's state in ``DIR/display.db``."""

    def __init__(
        self,
        path: Path,
        *,
        play_log_rows: int = PLAY_LOG_ROWS,
        play_log_days: float = PLAY_LOG_DAYS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``play_log_rows``, ``play_log_days``: the play log's bounds; ``clock``: UNIX time
        (what the log's expiry reads)."""
        if play_log_rows < 1 or play_log_days <= 0:
            raise ValueError("the play log keeps at least one play, for some time")
        self.path = path
        self.play_log_rows = play_log_rows
        self.play_log_days = play_log_days
        self._clock = clock
        self._writes = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._connection = connect(path)
            _migrate(self._connection)
        except sqlite3.DatabaseError as error:
            raise StoreError(f"cannot open the database {path}: {error}") from None
        self._lock = threading.RLock()
        # Counted once; then kept by the writes (health reads it often).
        self._play_count = int(self._read("SELECT COUNT(*) FROM plays")[0][0])

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on the store's connection (for callers that add their rows)."""
        with self._lock, transaction(self._connection) as connection:
            yield connection

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self._connection.execute(sql, params).fetchall())

    # CDS documents

    def cds_documents(self) -> list[tuple[str, bytes, float]]:
        """(name, xml, received) of every stored CDS, oldest first."""
        rows = self._read("SELECT name, xml, received FROM cds_documents ORDER BY received, name")
        return [(str(name), bytes(xml), float(received)) for name, xml, received in rows]

    def put_cds(self, name: str, xml: bytes, received: float) -> None:
        with self.write() as connection:
            connection.execute(
                "INSERT INTO cds_documents (name, xml, received) VALUES (?, ?, ?)"
                " ON CONFLICT(name) DO UPDATE SET xml = excluded.xml, received = excluded.received",
                (name, xml, received),
            )

    def delete_cds(self, name: str) -> bool:
        with self.write() as connection:
            return (
                connection.execute("DELETE FROM cds_documents WHERE name = ?", (name,)).rowcount > 0
            )

    # The interrupt queue

    def queued_requests(self) -> list[QueuedRequest]:
        rows = self._read(
            "SELECT id, url, duration, remaining, received, shown_at FROM interrupts ORDER BY id"
        )
        return [QueuedRequest(*row) for row in rows]

    def push_request(self, url: str, duration: float, received: float) -> int:
        with self.write() as connection:
            cursor = connection.execute(
                "INSERT INTO interrupts (url, duration, remaining, received) VALUES (?, ?, ?, ?)",
                (url, duration, duration, received),
            )
            return int(cursor.lastrowid or 0)

    def update_request(self, request_id: int, remaining: float, shown_at: float | None) -> None:
        with self.write() as connection:
            connection.execute(
                "UPDATE interrupts SET remaining = ?, shown_at = ? WHERE id = ?",
                (remaining, shown_at, request_id),
            )

    def remove_request(self, request_id: int) -> None:
        with self.write() as connection:
            connection.execute("DELETE FROM interrupts WHERE id = ?", (request_id,))

    # The request queues of the other zones

    def zone_requests(self, layout: str, zone: str) -> ZoneRequests:
        """The request queue of ``zone`` of the layout ``layout`` (an ``EngineStore``)."""
        return ZoneRequests(self, layout, zone)

    def keep_zone_requests(self, zones: Collection[tuple[str, str]]) -> int:
        """Forget the requests to every (layout, zone) but ``zones`` (the layouts scheduled
        now); returns how many went."""
        with self.write() as connection:
            gone = 0
            rows = connection.execute("SELECT DISTINCT layout, zone FROM zone_interrupts")
            for layout, zone in list(rows):
                if (layout, zone) not in zones:
                    gone += connection.execute(
                        "DELETE FROM zone_interrupts WHERE layout = ? AND zone = ?", (layout, zone)
                    ).rowcount
            return gone

    # Sensors

    def record_sensing(self, message: SensorMessage, *, now: float) -> SensorReading:
        """Keep the latest reading; UnknownSensorError when a new sensor has no type."""
        sensor_id, sensor_type = message.sensor_id, message.sensor_type
        data, has_data, data_source = message.data, message.has_data, message.data_source
        data_text = json.dumps(data) if has_data else None
        with self.write() as connection:
            row = connection.execute(
                "SELECT sensor_type FROM sensors WHERE sensor_id = ?", (sensor_id,)
            ).fetchone()
            if row is None:
                if not sensor_type:
                    raise UnknownSensorError(sensor_id)
                connection.execute(
                    "INSERT INTO sensors (sensor_id, sensor_type, data, data_source, updated)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (sensor_id, sensor_type, data_text, data_source, now),
                )
            else:
                sensor_type = sensor_type or str(row[0])
                connection.execute(
                    "UPDATE sensors SET sensor_type = ?, data = ?, data_source = ?, updated = ?"
                    " WHERE sensor_id = ?",
                    (sensor_type, data_text, data_source, now, sensor_id),
                )
        return SensorReading(sensor_id, sensor_type, data, has_data, data_source, now)

    def sensors(self) -> list[SensorReading]:
        rows = self._read(
            "SELECT sensor_id, sensor_type, data, data_source, updated FROM sensors ORDER BY id"
        )
        return [
            SensorReading(
                sensor_id=sensor_id,
                sensor_type=sensor_type,
                data=json.loads(data) if data is not None else None,
                has_data=data is not None,
                data_source=data_source,
                updated=updated,
            )
            for sensor_id, sensor_type, data, data_source, updated in rows
        ]

    # The playback record

    def playback(self) -> tuple[int, dict[str, Any] | None]:
        """(sequence, record) as last committed; (0, None) on a new display."""
        rows = self._read("SELECT sequence, record FROM playback WHERE id = 1")
        if not rows:
            return 0, None
        sequence, record = rows[0]
        return int(sequence), json.loads(record)

    def save_playback(
        self,
        fields: dict[str, Any],
        publish: Callable[[sqlite3.Connection, dict[str, Any]], None] | None = None,
        *,
        sequence: int | None = None,
    ) -> dict[str, Any]:
        """Store the next playback record, numbered one after the last (or ``sequence`` when
        that is higher: records shown while the disk was full), in one transaction with
        ``publish(connection, record)`` (which queues the webhook events)."""
        with self.write() as connection:
            row = connection.execute(
                "SELECT sequence, record FROM playback WHERE id = 1"
            ).fetchone()
            sequence = max((int(row[0]) if row else 0) + 1, sequence or 0)
            record = {**fields, "sequence": sequence}
            connection.execute(
                "INSERT INTO playback (id, sequence, record) VALUES (1, ?, ?)"
                " ON CONFLICT(id) DO UPDATE SET sequence = excluded.sequence,"
                " record = excluded.record",
                (sequence, json.dumps(record)),
            )
            # The record before, when it is the one right before (no jump: records shown
            # while the disk was full were never stored, and what ended when is not known).
            before = json.loads(row[1]) if row and int(row[0]) == sequence - 1 else None
            logged = self._log_play(connection, record, before)
            if publish is not None:
                publish(connection, record)
        with self._lock:
            self._play_count += logged
        return record

    # The play log

    def _log_play(
        self,
        connection: sqlite3.Connection,
        record: dict[str, Any],
        before: dict[str, Any] | None,
    ) -> int:
        """Add the record's play (that of its ``zone``) to the play log, end the plays it
        ends, and keep the log in its bounds, in the caller's transaction; how many rows the
        log gained. ``before``: the record right before this one, None after a jump."""
        sequence = int(record["sequence"])
        zone = str(record.get("zone") or "main")
        zones = _zones(record)
        play = zones.get(zone, record)
        now = self._clock()
        if before is not None:
            # The zone's play before this one ended when this one started, and so did the
            # plays of the zones this record no longer has (the layout went or changed).
            shown = _zones(before)
            for name in [zone, *(name for name in shown if name not in zones)]:
                if name in shown:
                    connection.execute(
                        "UPDATE plays SET ended = ? WHERE zone = ? AND started = ?"
                        " AND ended IS NULL AND sequence < ?",
                        (play.get("started"), name, shown[name].get("started"), sequence),
                    )
        added = connection.execute(
            "INSERT INTO plays (sequence, item, content_type, set_name, origin, started, logged,"
            " duration, ended, painted, zone, layout)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)"
            " ON CONFLICT(sequence) DO NOTHING",
            (
                sequence,
                play.get("content-item"),
                play.get("content-type"),
                play.get("set"),
                str(play.get("origin") or ""),
                str(play.get("started") or ""),
                now,
                play.get("duration"),
                # A record is made once the renderer confirmed the item painted
                # (player.playback); the column is there for one that may not be.
                0 if record.get("painted") is False else 1,
                zone,
                record.get("layout"),
            ),
        ).rowcount
        # The row bound: the oldest go (sequence is the key: a range delete, no scan).
        added -= connection.execute(
            "DELETE FROM plays WHERE sequence <= ? - ?", (sequence, self.play_log_rows)
        ).rowcount
        self._writes += 1
        if self._writes % _PRUNE_EVERY == 1:
            added -= self._expire(connection, now)
        return int(added)

    def _expire(self, connection: sqlite3.Connection, now: float) -> int:
        return int(
            connection.execute(
                "DELETE FROM plays WHERE logged < ?", (now - self.play_log_days * 86400.0,)
            ).rowcount
        )

    def expire_plays(self) -> int:
        """Delete the plays older than the log keeps (done every so many writes too); how
        many went."""
        with self.write() as connection:
            gone = self._expire(connection, self._clock())
        with self._lock:
            self._play_count -= gone
        return gone

    def plays(self, since: int, limit: int, zone: str | None = None) -> list[LoggedPlay]:
        """Up to ``limit`` plays of the log with a sequence above ``since`` (of ``zone`` only,
        when given), in order."""
        only = "" if zone is None else " AND zone = ?"
        rows = self._read(
            "SELECT sequence, item, content_type, set_name, origin, started, duration, ended,"
            f" painted, zone, layout FROM plays WHERE sequence > ?{only}"
            " ORDER BY sequence LIMIT ?",
            (since, limit) if zone is None else (since, zone, limit),
        )
        return [
            LoggedPlay(
                sequence=int(sequence),
                item=item,
                content_type=content_type,
                set_name=set_name,
                origin=origin,
                started=started,
                duration=duration,
                ended=ended,
                painted=bool(painted),
                zone=zone_name,
                layout=layout,
            )
            for (sequence, item, content_type, set_name, origin, started, duration, ended,
                 painted, zone_name, layout) in rows
        ]  # fmt: skip

    def play_log_status(self) -> dict[str, Any]:
        """For health: how many plays the log keeps, the first and last sequence, the bounds."""
        with self._lock:
            count = self._play_count
            # Each on its own: SQLite answers a lone MIN or MAX of the key from the b-tree's
            # ends, both in one SELECT by reading every row (230 ms for 1,000,000 plays).
            first, last = self._read(
                "SELECT (SELECT MIN(sequence) FROM plays), (SELECT MAX(sequence) FROM plays)"
            )[0]
        return {
            "plays": count,
            "first-sequence": first,
            "last-sequence": last,
            "max-plays": self.play_log_rows,
            "days": self.play_log_days,
        }


class ZoneRequests:
    """The durable request queue of one zone of one layout (``DisplayStore.zone_requests``),
    as the zone's engine keeps it: the same four calls as the main zone's queue."""

    def __init__(self, store: DisplayStore, layout: str, zone: str) -> None:
        self._store = store
        self._key = (layout, zone)

    def queued_requests(self) -> list[QueuedRequest]:
        rows = self._store._read(
            "SELECT id, url, duration, remaining, received, shown_at FROM zone_interrupts"
            " WHERE layout = ? AND zone = ? ORDER BY id",
            self._key,
        )
        return [QueuedRequest(*row) for row in rows]

    def push_request(self, url: str, duration: float, received: float) -> int:
        with self._store.write() as connection:
            cursor = connection.execute(
                "INSERT INTO zone_interrupts (layout, zone, url, duration, remaining, received)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (*self._key, url, duration, duration, received),
            )
            return int(cursor.lastrowid or 0)

    def update_request(self, request_id: int, remaining: float, shown_at: float | None) -> None:
        with self._store.write() as connection:
            connection.execute(
                "UPDATE zone_interrupts SET remaining = ?, shown_at = ? WHERE id = ?",
                (remaining, shown_at, request_id),
            )

    def remove_request(self, request_id: int) -> None:
        with self._store.write() as connection:
            connection.execute("DELETE FROM zone_interrupts WHERE id = ?", (request_id,))
