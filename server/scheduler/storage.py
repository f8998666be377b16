"""Where the Scheduling and Management Segment keeps its state, behind one small interface.

The API code and the schedules watcher talk only to :class:`SchedulerStorage`. SQLite (WAL) is
the default and right for one scheduler process; a PostgreSQL class with the same methods can
replace it for networks served by several scheduler processes, without touching the API code.

What is stored:
- the display registry: one row per display, keyed by its normalised URL (upsert), with the
  location as the caller gave it, a name and the sensors learned from the display's own ``GET /``;
- the last *good* version of every schedule (the CDS bytes and their hash), so a broken or
  missing file never loses what was being served, also across a restart;
- the fleet (migration 2): groups of displays (named by the operator or declared by the display
  when it registers), assignments of schedules to a display or a group, which documents were
  pushed to each display (so a change pushes only what differs), and every playback update
  received from the displays (proof of play).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from server.db import Migrations, connect, migrate, transaction

__all__ = [
    "Assignment",
    "DisplayRecord",
    "PlayRecord",
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
    #: Registered without the enrolment token: waits for an operator, nothing is pushed to it.
    pending: bool = False


@dataclass(frozen=True)
class StoredSchedule:
    schedule_id: str
    xml: bytes
    digest: str  # sha256 hex of xml
    root_name: str | None
    updated: float
    #: Where it came from: the resolved path of the schedules folder it was imported from, ""
    #: when written through the API only, "*" for one stored before this was recorded (any
    #: folder watcher may remove it when its file is gone).
    source: str = ""


#: publish(connection, schedule): queue a schedule change for its subscribers. ``connection`` is
#: the storage's transaction when the outbox can join it (PostgreSQL), else None.
SchedulePublish = Callable[[Any, StoredSchedule], None]


@dataclass(frozen=True)
class Assignment:
    """A schedule assigned to one display (``display`` set) or to a group (``group`` set)."""

    schedule_id: str
    display: str | None = None  # the display's URL
    group: str | None = None
    created: float = 0.0


@dataclass(frozen=True)
class PlayRecord:
    """One playback update a display sent: what its screen showed from ``started`` on.

    ``ended`` is the start of the display's next update when that one is the very next in its
    ``sequence`` (else unknown: updates in between were never received, a gap). ``painted``:
    the display sends an update only once its renderer confirmed the item painted.
    """

    display: str
    sequence: int
    item: str | None
    content_type: str | None
    set_name: str | None
    origin: str
    started: str  # ISO 8601, as the display sent it
    started_at: float  # the same, epoch seconds
    duration: float | None
    ended: str | None
    painted: bool
    received: float


def display_key(url: str) -> str:
    """The identity of a display URL: scheme and host in lower case, no trailing slash."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


class SchedulerStorage(Protocol):
    """Everything the scheduler stores. Implementations are safe to call from any thread."""

    def upsert_display(
        self, url: str, location: dict[str, str], name: str | None, *, pending: bool = False
    ) -> None:
        """Add a display or update the one with the same (normalised) URL. ``pending``: the
        registration did not carry the enrolment token; a new display waits for an operator's
        approval, one approved before stays approved."""

    def record_display_info(
        self, url: str, name: str | None, sensors: list[dict[str, str]]
    ) -> None:
        """What the display's own ``GET /`` said; a no-op for an unknown URL."""

    def displays(self) -> list[DisplayRecord]:
        """Every display, in registration order."""

    def save_schedule(
        self, schedule: StoredSchedule, publish: SchedulePublish | None = None
    ) -> bool:
        """Store the new last good version of a schedule; True when its content changed (new,
        or another digest), and then only, ``publish(connection, schedule)`` is called: in the
        same transaction on PostgreSQL (so of several processes storing the same change, one
        publishes it), just before the write on SQLite (a crash in between: a duplicate)."""

    def schedule(self, schedule_id: str) -> StoredSchedule | None: ...

    def schedules(self) -> list[StoredSchedule]: ...

    def delete_schedule(self, schedule_id: str, publish: SchedulePublish | None = None) -> bool:
        """Forget a schedule; False when there was none. ``publish(connection, removed)`` as
        for :meth:`save_schedule`, only by the call that removed it."""

    def watch_schedules(self, changed: Callable[[str | None], None]) -> Callable[[], None]:
        """Call ``changed(schedule_id)`` when another process changes a schedule (``None``:
        reload them all, some changes may have been missed); returns a function that stops
        watching. SQLite has one process: nothing to watch."""

    # -- the fleet ----------------------------------------------------------------------------

    def display(self, url: str) -> DisplayRecord | None:
        """The registered display with this (normalised) URL, or None."""

    def set_declared_groups(self, url: str, groups: list[str]) -> None:
        """The groups the display itself declared when it registered (replaces the last)."""

    def add_to_group(self, url: str, group: str) -> bool:
        """Put a display in a group (an operator's choice); False when it already was."""

    def remove_from_group(self, url: str, group: str) -> bool:
        """Take a display out of a group, however it got there; False when it was not in it."""

    def groups(self) -> dict[str, list[str]]:
        """Every group and the URLs of its displays."""

    def display_groups(self, url: str) -> list[str]: ...

    def assign(self, assignment: Assignment) -> bool:
        """Add an assignment; False when it existed already."""

    def unassign(self, assignment: Assignment) -> bool:
        """Remove an assignment; False when there was none."""

    def assignments(self) -> list[Assignment]: ...

    def schedules_for(self, url: str) -> list[str]:
        """Ids of the schedules assigned to this display, directly or through its groups."""

    def displays_holding(self, schedule_id: str) -> list[str]:
        """URLs of the displays (in registration order) the schedule is assigned to, directly
        or through a group, or that were pushed it and not its removal since: those a change
        of it concerns."""

    def pushed(self, url: str) -> dict[str, str]:
        """Root set name -> digest of each document last pushed to this display; "" for a set
        pushed as removed."""

    def set_pushed(self, url: str, name: str, digest: str | None) -> None:
        """Remember a push to the display (``digest`` "": a removal; None: forget the set)."""

    def ingest_secret(self, url: str) -> str | None:
        """The secret in the URL this display's playback updates come to (made at registration)."""

    def display_for_secret(self, secret: str) -> str | None: ...

    def set_push_secret(self, url: str, secret: str | None) -> None:
        """The ``whsec_`` secret the display gave at registration (None: it gave none)."""

    def push_secret(self, url: str) -> str | None:
        """What pushes to the display are signed with, if it gave a secret."""

    def approve(self, url: str) -> bool:
        """An operator approved the pending display; False for an unknown URL."""

    def set_push_token(self, url: str, token: str | None) -> None:
        """The token the scheduler got by pairing with the display (``POST /x/pair``)."""

    def push_tokens(self) -> dict[str, str]:
        """Every display the scheduler paired with: ``{url: token}``."""

    def set_tls_pin(self, url: str, pin: str) -> None:
        """The ``sha256:...`` fingerprint of the display's certificate (HTTPS to it is pinned)."""

    def tls_pin(self, url: str) -> str | None:
        """The pinned fingerprint of the display at ``url``, if any."""

    def tls_pins(self) -> dict[str, str]:
        """Every pinned display: ``{url: "sha256:..."}``."""

    def record_play(self, play: PlayRecord) -> bool:
        """Store a playback update; False when this very update was stored before."""

    def plays(
        self, url: str | None = None, since: float | None = None, until: float | None = None
    ) -> list[PlayRecord]:
        """Stored updates, by display then sequence, started in [since, until)."""

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
    (
        "ALTER TABLE displays ADD COLUMN ingest TEXT",
        """CREATE TABLE display_groups (
            display_key TEXT NOT NULL,
            name TEXT NOT NULL,
            source TEXT NOT NULL CHECK (source IN ('display', 'operator')),
            PRIMARY KEY (display_key, name, source)
        )""",
        """CREATE TABLE assignments (
            schedule_id TEXT NOT NULL,
            target_kind TEXT NOT NULL CHECK (target_kind IN ('display', 'group')),
            target TEXT NOT NULL,
            created REAL NOT NULL,
            PRIMARY KEY (schedule_id, target_kind, target)
        )""",
        """CREATE TABLE pushed_sets (
            display_key TEXT NOT NULL,
            name TEXT NOT NULL,
            digest TEXT NOT NULL,
            pushed REAL NOT NULL,
            PRIMARY KEY (display_key, name)
        )""",
        """CREATE TABLE plays (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            display_key TEXT NOT NULL,
            display_url TEXT NOT NULL,
            sequence INTEGER NOT NULL,
            item TEXT,
            content_type TEXT,
            set_name TEXT,
            origin TEXT NOT NULL,
            started TEXT NOT NULL,
            started_at REAL NOT NULL,
            duration REAL,
            ended TEXT,
            painted INTEGER NOT NULL,
            received REAL NOT NULL,
            UNIQUE (display_key, sequence, started)
        )""",
        "CREATE INDEX plays_by_time ON plays (started_at)",
        "CREATE INDEX plays_by_display ON plays (display_key, sequence)",
    ),
    (
        # Displays registered before migration 2 get their playback-ingest secret now, so the
        # scheduler subscribes to their updates without waiting for them to register again.
        "UPDATE displays SET ingest = lower(hex(randomblob(18))) WHERE ingest IS NULL",
    ),
    (
        # Where each schedule came from (a folder, or the API); those stored before: any folder.
        "ALTER TABLE schedules ADD COLUMN source TEXT NOT NULL DEFAULT '*'",
    ),
    (
        # A registration takes MAX(seq) + 1; listing is by seq; a schedule change looks up
        # where it is assigned or was pushed (Fleet.schedule_changed): indexes, not scans.
        "CREATE INDEX displays_by_seq ON displays (seq)",
        "CREATE INDEX pushed_sets_by_name ON pushed_sets (name)",
        "CREATE INDEX display_groups_by_name ON display_groups (name)",
    ),
    (
        # What a display gave when it registered (issue 22): the secret pushes to it are
        # signed with, and the fingerprint of its TLS certificate, pinned.
        "ALTER TABLE displays ADD COLUMN push_secret TEXT",
        "ALTER TABLE displays ADD COLUMN tls_pin TEXT",
    ),
    (
        # Issue 22: a display that registered without the enrolment token is 'pending' until
        # an operator approves it (those registered before were taken: 'approved'); and the
        # token the scheduler got by pairing with a display (the console's "Add a display").
        "ALTER TABLE displays ADD COLUMN state TEXT NOT NULL DEFAULT 'approved'",
        "ALTER TABLE displays ADD COLUMN push_token TEXT",
    ),
)

#: The displays columns of a DisplayRecord, in display_record's order (both backends).
DISPLAY_COLUMNS = "url, location, name, sensors, registered, checked, state"
#: upsert_display's rule for the state (both backends): approved stays approved.
UPSERT_STATE = (
    "state = CASE WHEN excluded.state = 'approved' THEN 'approved' ELSE displays.state END"
)

_SCHEDULE_COLUMNS = "id, xml, digest, root_name, updated, source"

#: SchedulerStorage.displays_holding in either backend (``%s``: SQLite's ``?``), three times
#: the schedule id; each part is an index look-up.
DISPLAYS_HOLDING = (
    "SELECT url FROM displays WHERE key IN ("
    " SELECT target FROM assignments WHERE schedule_id = %s AND target_kind = 'display'"
    " UNION SELECT g.display_key FROM assignments a JOIN display_groups g ON g.name = a.target"
    "  WHERE a.schedule_id = %s AND a.target_kind = 'group'"
    " UNION SELECT display_key FROM pushed_sets WHERE name = %s AND digest != ''"
    ") ORDER BY seq"
)


def assignment_target(assignment: Assignment) -> tuple[str, str]:
    """How an assignment's target is stored by every backend: ("display", key) or ("group",
    name)."""
    if assignment.display is not None:
        return "display", display_key(assignment.display)
    if assignment.group is not None:
        return "group", assignment.group
    raise ValueError("an assignment names a display or a group")


def display_record(row: tuple[Any, ...]) -> DisplayRecord:
    """A row of DISPLAY_COLUMNS, JSON as text: both backends."""
    return DisplayRecord(
        url=row[0],
        location=json.loads(row[1]),
        name=row[2],
        sensors=json.loads(row[3]),
        registered=row[4],
        checked=row[5],
        pending=row[6] == "pending",
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

    def upsert_display(
        self, url: str, location: dict[str, str], name: str | None, *, pending: bool = False
    ) -> None:
        now = time.time()
        self._write(
            f"""
            INSERT INTO displays (key, url, location, name, registered, seq, ingest, state)
            VALUES (?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM displays), ?, ?)
            ON CONFLICT(key) DO UPDATE SET
                url = excluded.url,
                location = excluded.location,
                name = COALESCE(excluded.name, displays.name),
                checked = NULL,
                ingest = COALESCE(displays.ingest, excluded.ingest),
                {UPSERT_STATE}
            """,
            (
                display_key(url),
                url,
                json.dumps(location),
                name,
                now,
                secrets.token_urlsafe(18),
                "pending" if pending else "approved",
            ),
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
                f"SELECT {DISPLAY_COLUMNS} FROM displays ORDER BY seq"
            ).fetchall()
        return [display_record(row) for row in rows]

    def save_schedule(
        self, schedule: StoredSchedule, publish: SchedulePublish | None = None
    ) -> bool:
        with self._lock:
            row = self._db.execute(
                "SELECT digest, source FROM schedules WHERE id = ?", (schedule.schedule_id,)
            ).fetchone()
            changed = row is None or row[0] != schedule.digest
            if not changed and row[1] == schedule.source:
                return False
            if changed and publish is not None:
                publish(None, schedule)
            self._db.execute(
                """
                INSERT INTO schedules (id, xml, digest, root_name, updated, source)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET xml = excluded.xml, digest = excluded.digest,
                    root_name = excluded.root_name, updated = excluded.updated,
                    source = excluded.source
                """,
                (
                    schedule.schedule_id,
                    schedule.xml,
                    schedule.digest,
                    schedule.root_name,
                    schedule.updated,
                    schedule.source,
                ),
            )
        return changed

    def schedule(self, schedule_id: str) -> StoredSchedule | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_SCHEDULE_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,)
            ).fetchone()
        return None if row is None else StoredSchedule(row[0], bytes(row[1]), *row[2:])

    def schedules(self) -> list[StoredSchedule]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_SCHEDULE_COLUMNS} FROM schedules ORDER BY id"
            ).fetchall()
        return [StoredSchedule(row[0], bytes(row[1]), *row[2:]) for row in rows]

    def delete_schedule(self, schedule_id: str, publish: SchedulePublish | None = None) -> bool:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_SCHEDULE_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,)
            ).fetchone()
            if row is None:
                return False
            if publish is not None:
                publish(None, StoredSchedule(row[0], bytes(row[1]), *row[2:]))
            self._db.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,))
        return True

    def watch_schedules(self, changed: Callable[[str | None], None]) -> Callable[[], None]:
        return lambda: None

    # -- the fleet ----------------------------------------------------------------------------

    def display(self, url: str) -> DisplayRecord | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {DISPLAY_COLUMNS} FROM displays WHERE key = ?",
                (display_key(url),),
            ).fetchone()
        return None if row is None else display_record(row)

    def set_declared_groups(self, url: str, groups: list[str]) -> None:
        key = display_key(url)
        with self._lock, transaction(self._db):
            self._db.execute(
                "DELETE FROM display_groups WHERE display_key = ? AND source = 'display'", (key,)
            )
            self._db.executemany(
                "INSERT OR IGNORE INTO display_groups (display_key, name, source) "
                "VALUES (?, ?, 'display')",
                [(key, group) for group in groups],
            )

    def add_to_group(self, url: str, group: str) -> bool:
        return (
            self._write(
                "INSERT OR IGNORE INTO display_groups (display_key, name, source) "
                "VALUES (?, ?, 'operator')",
                (display_key(url), group),
            )
            > 0
        )

    def remove_from_group(self, url: str, group: str) -> bool:
        return (
            self._write(
                "DELETE FROM display_groups WHERE display_key = ? AND name = ?",
                (display_key(url), group),
            )
            > 0
        )

    def groups(self) -> dict[str, list[str]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT g.name, d.url, d.seq FROM display_groups g "
                "JOIN displays d ON d.key = g.display_key ORDER BY g.name, d.seq"
            ).fetchall()
        found: dict[str, list[str]] = {}
        for name, url, _seq in rows:
            found.setdefault(name, []).append(url)
        return found

    def display_groups(self, url: str) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT name FROM display_groups WHERE display_key = ? ORDER BY name",
                (display_key(url),),
            ).fetchall()
        return [row[0] for row in rows]

    def assign(self, assignment: Assignment) -> bool:
        kind, target = assignment_target(assignment)
        return (
            self._write(
                "INSERT OR IGNORE INTO assignments (schedule_id, target_kind, target, created) "
                "VALUES (?, ?, ?, ?)",
                (assignment.schedule_id, kind, target, time.time()),
            )
            > 0
        )

    def unassign(self, assignment: Assignment) -> bool:
        kind, target = assignment_target(assignment)
        return (
            self._write(
                "DELETE FROM assignments WHERE schedule_id = ? AND target_kind = ? AND target = ?",
                (assignment.schedule_id, kind, target),
            )
            > 0
        )

    def assignments(self) -> list[Assignment]:
        with self._lock:
            rows = self._db.execute(
                "SELECT a.schedule_id, a.target_kind, a.target, a.created, d.url "
                "FROM assignments a LEFT JOIN displays d "
                "ON a.target_kind = 'display' AND d.key = a.target "
                "ORDER BY a.created, a.schedule_id"
            ).fetchall()
        return [
            Assignment(
                schedule_id=row[0],
                display=(row[4] or row[2]) if row[1] == "display" else None,
                group=row[2] if row[1] == "group" else None,
                created=row[3],
            )
            for row in rows
        ]

    def schedules_for(self, url: str) -> list[str]:
        key = display_key(url)
        with self._lock:
            rows = self._db.execute(
                "SELECT schedule_id, MIN(created) FROM assignments WHERE "
                "(target_kind = 'display' AND target = ?) OR (target_kind = 'group' AND target IN "
                "(SELECT name FROM display_groups WHERE display_key = ?)) "
                "GROUP BY schedule_id ORDER BY MIN(created), schedule_id",
                (key, key),
            ).fetchall()
        return [row[0] for row in rows]

    def displays_holding(self, schedule_id: str) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                DISPLAYS_HOLDING.replace("%s", "?"), (schedule_id,) * 3
            ).fetchall()
        return [row[0] for row in rows]

    def pushed(self, url: str) -> dict[str, str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT name, digest FROM pushed_sets WHERE display_key = ?", (display_key(url),)
            ).fetchall()
        return {name: digest for name, digest in rows}

    def set_pushed(self, url: str, name: str, digest: str | None) -> None:
        if digest is None:
            self._write(
                "DELETE FROM pushed_sets WHERE display_key = ? AND name = ?",
                (display_key(url), name),
            )
            return
        self._write(
            "INSERT INTO pushed_sets (display_key, name, digest, pushed) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (display_key, name) DO UPDATE SET digest = excluded.digest, "
            "pushed = excluded.pushed",
            (display_key(url), name, digest, time.time()),
        )

    def ingest_secret(self, url: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT ingest FROM displays WHERE key = ?", (display_key(url),)
            ).fetchone()
        return None if row is None else row[0]

    def set_push_secret(self, url: str, secret: str | None) -> None:
        self._write("UPDATE displays SET push_secret = ? WHERE key = ?", (secret, display_key(url)))

    def push_secret(self, url: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT push_secret FROM displays WHERE key = ?", (display_key(url),)
            ).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def approve(self, url: str) -> bool:
        return (
            self._write("UPDATE displays SET state = 'approved' WHERE key = ?", (display_key(url),))
            > 0
        )

    def set_push_token(self, url: str, token: str | None) -> None:
        self._write("UPDATE displays SET push_token = ? WHERE key = ?", (token, display_key(url)))

    def push_tokens(self) -> dict[str, str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT url, push_token FROM displays WHERE push_token IS NOT NULL"
            ).fetchall()
        return {str(url): str(token) for url, token in rows}

    def set_tls_pin(self, url: str, pin: str) -> None:
        self._write("UPDATE displays SET tls_pin = ? WHERE key = ?", (pin, display_key(url)))

    def tls_pin(self, url: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT tls_pin FROM displays WHERE key = ?", (display_key(url),)
            ).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def tls_pins(self) -> dict[str, str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT url, tls_pin FROM displays WHERE tls_pin IS NOT NULL"
            ).fetchall()
        return {str(url): str(pin) for url, pin in rows}

    def display_for_secret(self, secret: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT url FROM displays WHERE ingest = ?", (secret,)
            ).fetchone()
        return None if row is None else str(row[0])

    def record_play(self, play: PlayRecord) -> bool:
        key = display_key(play.display)
        with self._lock, transaction(self._db):
            inserted = self._db.execute(
                "INSERT OR IGNORE INTO plays (display_key, display_url, sequence, item, "
                "content_type, set_name, origin, started, started_at, duration, ended, painted, "
                "received) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    play.display,
                    play.sequence,
                    play.item,
                    play.content_type,
                    play.set_name,
                    play.origin,
                    play.started,
                    play.started_at,
                    play.duration,
                    play.ended,
                    int(play.painted),
                    play.received,
                ),
            ).rowcount
            if inserted:
                # The update before this one ended when this one started; an update after it
                # (received first: delivery retried) tells when this one ended.
                self._db.execute(
                    "UPDATE plays SET ended = ? WHERE display_key = ? AND sequence = ? "
                    "AND ended IS NULL",
                    (play.started, key, play.sequence - 1),
                )
                self._db.execute(
                    "UPDATE plays SET ended = (SELECT started FROM plays WHERE display_key = ? "
                    "AND sequence = ? ORDER BY id DESC LIMIT 1) "
                    "WHERE display_key = ? AND sequence = ? AND ended IS NULL",
                    (key, play.sequence + 1, key, play.sequence),
                )
        return inserted > 0

    def plays(
        self, url: str | None = None, since: float | None = None, until: float | None = None
    ) -> list[PlayRecord]:
        where: list[str] = []
        params: list[Any] = []
        if url is not None:
            where.append("display_key = ?")
            params.append(display_key(url))
        if since is not None:
            where.append("started_at >= ?")
            params.append(since)
        if until is not None:
            where.append("started_at < ?")
            params.append(until)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with self._lock:
            rows = self._db.execute(
                "SELECT display_url, sequence, item, content_type, set_name, origin, started, "
                "started_at, duration, ended, painted, received FROM plays "
                f"{clause} ORDER BY display_key, sequence, id",
                params,
            ).fetchall()
        return [
            PlayRecord(
                display=row[0],
                sequence=row[1],
                item=row[2],
                content_type=row[3],
                set_name=row[4],
                origin=row[5],
                started=row[6],
                started_at=row[7],
                duration=row[8],
                ended=row[9],
                painted=bool(row[10]),
                received=row[11],
            )
            for row in rows
        ]

    def close(self) -> None:
        with self._lock:
            self._db.close()
