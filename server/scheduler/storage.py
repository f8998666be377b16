"""Where the Scheduling and Management Segment keeps its state, behind one small interface.

The API code and the schedules watcher talk only to :class:`SchedulerStorage`. SQLite (WAL) is
the default and right for one scheduler process; a PostgreSQL class with the same methods can
replace it for networks served by several scheduler processes, without touching the API code.

What is stored:
- the display registry: one row per display, keyed by its normalised URL (upsert), with the
  location as the caller gave it, a name and the sensors learned from the display's own ``GET /``;
- the last *good* version of every schedule (the CDS bytes and their hash), so a broken or
  missing file never loses what was being served, also across a restart.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from server.db import Migrations, connect, migrate

__all__ = [
    "DisplayRecord",
    "SchedulerStorage",
    "SqliteStorage",
    "StoredSchedule",
    "display_key",
]


@dataclass(frozen=True)
class DisplayRecord:
    url: str
    location: dict[str, str]
    name: str | None = None
    sensors: list[dict[str, str]] = field(default_factory=list)
    registered: float = 0.0
    checked: float | None = None  # last successful read of the display's GET /


@dataclass(frozen=True)
class StoredSchedule:
    schedule_id: str
    xml: bytes
    digest: str  # sha256 hex of xml
    root_name: str | None
    updated: float


def display_key(url: str) -> str:
    """The identity of a display URL: scheme and host in lower case, no trailing slash."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


class SchedulerStorage(Protocol):
    """Everything the scheduler stores. Implementations are safe to call from any thread."""

    def upsert_display(self, url: str, location: dict[str, str], name: str | None) -> None:
        """Add a display or update the one with the same (normalised) URL."""

    def record_display_info(
        self, url: str, name: str | None, sensors: list[dict[str, str]]
    ) -> None:
        """What the display's own ``GET /`` said; a no-op for an unknown URL."""

    def displays(self) -> list[DisplayRecord]:
        """Every display, in registration order."""

    def displays_to_check(self, checked_before: float) -> list[str]:
        """URLs of displays never read, or last read before ``checked_before`` (epoch s)."""

    def save_schedule(self, schedule: StoredSchedule) -> None:
        """Store the new last good version of a schedule."""

    def schedule(self, schedule_id: str) -> StoredSchedule | None: ...

    def schedules(self) -> list[StoredSchedule]: ...

    def delete_schedule(self, schedule_id: str) -> bool:
        """Forget a schedule; False when there was none."""

    def close(self) -> None: ...


# MIGRATIONS[n] takes the file from user_version n to n + 1.
MIGRATIONS: Migrations = (
    (
        """CREATE TABLE displays (
            key TEXT PRIMARY KEY,
            url TEXT NOT NULL,
            location TEXT NOT NULL,
            name TEXT,
            sensors TEXT NOT NULL DEFAULT '[]',
            registered REAL NOT NULL,
            checked REAL,
            seq INTEGER NOT NULL
        )""",
        """CREATE TABLE schedules (
            id TEXT PRIMARY KEY,
            xml BLOB NOT NULL,
            digest TEXT NOT NULL,
            root_name TEXT,
            updated REAL NOT NULL
        )""",
    ),
)


class SqliteStorage:
    """:class:`SchedulerStorage` in one SQLite file (WAL, synchronous=FULL)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # A registration answered 201 must survive a power cut: synchronous=FULL.
        self._db = connect(path, synchronous="FULL", busy_timeout=5.0)
        migrate(self._db, MIGRATIONS)

    def _write(self, sql: str, params: tuple[Any, ...]) -> int:
        with self._lock:
            cursor = self._db.execute(sql, params)
            return cursor.rowcount

    def upsert_display(self, url: str, location: dict[str, str], name: str | None) -> None:
        now = time.time()
        self._write(
            """
            INSERT INTO displays (key, url, location, name, registered, seq)
            VALUES (?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM displays))
            ON CONFLICT(key) DO UPDATE SET
                url = excluded.url,
                location = excluded.location,
                name = COALESCE(excluded.name, displays.name),
                checked = NULL
            """,
            (display_key(url), url, json.dumps(location), name, now),
        )

    def record_display_info(
        self, url: str, name: str | None, sensors: list[dict[str, str]]
    ) -> None:
        self._write(
            "UPDATE displays SET name = COALESCE(?, name), sensors = ?, checked = ? WHERE key = ?",
            (name, json.dumps(sensors), time.time(), display_key(url)),
        )

    def displays(self) -> list[DisplayRecord]:
        with self._lock:
            rows = self._db.execute(
                "SELECT url, location, name, sensors, registered, checked FROM displays "
                "ORDER BY seq"
            ).fetchall()
        return [
            DisplayRecord(
                url=row[0],
                location=json.loads(row[1]),
                name=row[2],
                sensors=json.loads(row[3]),
                registered=row[4],
                checked=row[5],
            )
            for row in rows
        ]

    def displays_to_check(self, checked_before: float) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT url FROM displays WHERE checked IS NULL OR checked < ? ORDER BY seq",
                (checked_before,),
            ).fetchall()
        return [row[0] for row in rows]

    def save_schedule(self, schedule: StoredSchedule) -> None:
        self._write(
            """
            INSERT INTO schedules (id, xml, digest, root_name, updated) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(id) DO UPDATE SET xml = excluded.xml, digest = excluded.digest,
                root_name = excluded.root_name, updated = excluded.updated
            """,
            (
                schedule.schedule_id,
                schedule.xml,
                schedule.digest,
                schedule.root_name,
                schedule.updated,
            ),
        )

    def schedule(self, schedule_id: str) -> StoredSchedule | None:
        with self._lock:
            row = self._db.execute(
                "SELECT id, xml, digest, root_name, updated FROM schedules WHERE id = ?",
                (schedule_id,),
            ).fetchone()
        return None if row is None else StoredSchedule(row[0], bytes(row[1]), *row[2:])

    def schedules(self) -> list[StoredSchedule]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, xml, digest, root_name, updated FROM schedules ORDER BY id"
            ).fetchall()
        return [StoredSchedule(row[0], bytes(row[1]), *row[2:]) for row in rows]

    def delete_schedule(self, schedule_id: str) -> bool:
        return self._write("DELETE FROM schedules WHERE id = ?", (schedule_id,)) > 0

    def close(self) -> None:
        with self._lock:
            self._db.close()
