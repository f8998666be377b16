"""Where the Scheduling and Management Segment keeps its state: :class:`SchedulerStorage`, one
class and one SQL text over SQLite or PostgreSQL (``server.platform.sql``).

SQLite (``scheduler.sqlite3``, WAL, ``synchronous=FULL``: a registration answered 201 survives a
power cut) is the default and right for one scheduler process; PostgreSQL (``pdn scheduler
--database postgresql://...``) serves several scheduler processes on one database.

What is stored:
- the display registry: one row per display, keyed by its normalised URL (upsert), with the
  location as the caller gave it, a name and the sensors learned from the display's own ``GET /``;
- the last *good* version of every schedule (the CDS bytes and their hash), so a broken or
  missing file never loses what was being served, also across a restart;
- the fleet (migration 2): groups of displays (named by the operator or declared by the display
  when it registers), assignments of schedules to a display or a group, which documents were
  pushed to each display (so a change pushes only what differs), and every playback update
  received from the displays (proof of play: ``server.scheduler.playstore``).

What differs on PostgreSQL, where several processes share the database, is said where it
happens: registration order is a sequence (``Database.next_number``); a schedule change is
stored by statements that change the row only where it differs, so of several processes taking
in the same file change one stores it and publishes it (``publish(connection, ...)`` in its
transaction), and the transaction ends with ``NOTIFY pdn_schedules, '<id>'``, which
:meth:`SchedulerStorage.watch_schedules` LISTENs for (``server.platform.pg``). The displays' shared
background reads keep their own columns in the displays table (``server.scheduler.pgfleet``).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from server.platform.sql import Database, Transaction
from server.scheduler.playstore import (
    PLAYS_COMPONENT,
    PLAYS_SCHEMA,
    BackfillClaim,
    BackfillState,
    PlayRecord,
    PlayStorage,
    display_key,
)
from server.scheduler.schema import MIGRATIONS

__all__ = [
    "MIGRATIONS",
    "PLAYLIST_SOURCE",
    "PLAYS_COMPONENT",
    "PLAYS_SCHEMA",
    "SCHEDULES_CHANNEL",
    "Assignment",
    "BackfillClaim",
    "BackfillState",
    "DisplayRecord",
    "PlayRecord",
    "ScheduleConflictError",
    "SchedulerStorage",
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
    #: folder watcher may remove it when its file is gone), ``PLAYLIST_SOURCE`` for a
    #: playlist's.
    source: str = ""


#: publish(connection, schedule): queue a schedule change for its subscribers. ``connection`` is
#: the storage's transaction (the driver's connection) when the outbox can join it (PostgreSQL:
#: one database for both), else None (SQLite: the outbox has a file of its own).
SchedulePublish = Callable[[Any, StoredSchedule], None]


@dataclass(frozen=True)
class Assignment:
    """A schedule assigned to one display (``display`` set) or to a group (``group`` set)."""

    schedule_id: str
    display: str | None = None  # the display's URL
    group: str | None = None
    created: float = 0.0


#: The ``source`` of a schedule made from a playlist (``server.scheduler.playlists``): written
#: and removed only with its playlist, never by a folder or ``PUT /x/schedules``.
PLAYLIST_SOURCE = "playlist"


class ScheduleConflictError(Exception):
    """A playlist's schedule id written as a hand-written schedule, or the other way round."""

    def __init__(self, schedule_id: str, is_playlist: bool) -> None:
        self.schedule_id = schedule_id
        self.is_playlist = is_playlist
        kind = "a playlist" if is_playlist else "a hand-written schedule"
        super().__init__(f"'{schedule_id}' is {kind}")


#: NOTIFY channel of schedule changes (PostgreSQL); the payload is the schedule id.
SCHEDULES_CHANNEL = "pdn_schedules"

#: The displays columns of a DisplayRecord, in _display's order.
_DISPLAY_COLUMNS = "url, location, name, sensors, registered, checked, state"
_SCHEDULE_COLUMNS = "id, xml, digest, root_name, updated, source"


def _assignment_target(assignment: Assignment) -> tuple[str, str]:
    """How an assignment's target is stored: ("display", key) or ("group", name)."""
    if assignment.display is not None:
        return "display", display_key(assignment.display)
    if assignment.group is not None:
        return "group", assignment.group
    raise ValueError("an assignment names a display or a group")


def _display(row: tuple[Any, ...]) -> DisplayRecord:
    return DisplayRecord(
        url=row[0],
        location=json.loads(row[1]),
        name=row[2],
        sensors=json.loads(row[3]),
        registered=row[4],
        checked=row[5],
        pending=row[6] == "pending",
    )


def _schedule(row: tuple[Any, ...]) -> StoredSchedule:
    return StoredSchedule(row[0], bytes(row[1]), row[2], row[3], row[4], row[5])


class SchedulerStorage(PlayStorage):
    """Everything the scheduler stores, in one database (``server.platform.sql``: SQLite or
    PostgreSQL). Safe to call from any thread."""

    def __init__(self, database: Database) -> None:
        """Creates or upgrades the tables (on PostgreSQL under a lock: processes starting
        together migrate once)."""
        self.database = self._db = database
        database.migrate(MIGRATIONS, "scheduler", own_file=True)
        database.migrate(PLAYS_SCHEMA, PLAYS_COMPONENT)
        self._register = (
            "INSERT INTO displays (key, url, location, name, registered, seq, ingest, state)"
            f" VALUES (?, ?, ?, ?, ?, {database.next_number('displays', 'seq')}, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET url = excluded.url,"
            " location = excluded.location, name = COALESCE(excluded.name, displays.name),"
            " checked = NULL, ingest = COALESCE(displays.ingest, excluded.ingest),"
            " state = CASE WHEN excluded.state = 'approved' THEN 'approved'"
            " ELSE displays.state END"
        )

    def close(self) -> None:
        self._db.close()

    # -- displays ---------------------------------------------------------------------------

    def upsert_display(
        self, url: str, location: dict[str, str], name: str | None, *, pending: bool = False
    ) -> None:
        """Add a display or update the one with the same (normalised) URL. ``pending``: the
        registration did not carry the enrolment token; a new display waits for an operator's
        approval, one approved before stays approved."""
        with self._db.transaction() as transaction:
            transaction.execute(
                self._register,
                (
                    display_key(url),
                    url,
                    json.dumps(location),
                    name,
                    time.time(),
                    secrets.token_urlsafe(18),
                    "pending" if pending else "approved",
                ),
            )
            # Its play log is read from the first play not stored.
            self._want_plays(transaction, display_key(url))

    def record_display_info(
        self, url: str, name: str | None, sensors: list[dict[str, str]]
    ) -> None:
        """What the display's own ``GET /`` said; a no-op for an unknown URL."""
        self._db.execute(
            "UPDATE displays SET name = COALESCE(?, name), sensors = ?, checked = ? WHERE key = ?",
            (name, json.dumps(sensors), time.time(), display_key(url)),
        )

    def displays(self) -> list[DisplayRecord]:
        """Every display, in registration order."""
        rows = self._db.rows(f"SELECT {_DISPLAY_COLUMNS} FROM displays ORDER BY seq")
        return [_display(row) for row in rows]

    def display(self, url: str) -> DisplayRecord | None:
        """The registered display with this (normalised) URL, or None."""
        row = self._db.row(
            f"SELECT {_DISPLAY_COLUMNS} FROM displays WHERE key = ?", (display_key(url),)
        )
        return None if row is None else _display(row)

    def approve(self, url: str) -> bool:
        """An operator approved the pending display; False for an unknown URL."""
        return (
            self._db.execute(
                "UPDATE displays SET state = 'approved' WHERE key = ?", (display_key(url),)
            )
            > 0
        )

    def _set(self, column: str, url: str, value: str | None) -> None:
        self._db.execute(
            f"UPDATE displays SET {column} = ? WHERE key = ?", (value, display_key(url))
        )

    def _get(self, column: str, url: str) -> str | None:
        row = self._db.row(f"SELECT {column} FROM displays WHERE key = ?", (display_key(url),))
        return None if row is None or row[0] is None else str(row[0])

    def _by_url(self, column: str) -> dict[str, str]:
        rows = self._db.rows(f"SELECT url, {column} FROM displays WHERE {column} IS NOT NULL")
        return {str(url): str(value) for url, value in rows}

    def ingest_secret(self, url: str) -> str | None:
        """The secret in the URL this display's playback updates come to (made at registration)."""
        return self._get("ingest", url)

    def display_for_secret(self, secret: str) -> str | None:
        row = self._db.row("SELECT url FROM displays WHERE ingest = ?", (secret,))
        return None if row is None else str(row[0])

    def set_push_secret(self, url: str, secret: str | None) -> None:
        """The ``whsec_`` secret the display gave at registration (None: it gave none)."""
        self._set("push_secret", url, secret)

    def push_secret(self, url: str) -> str | None:
        """What pushes to the display are signed with, if it gave a secret."""
        return self._get("push_secret", url)

    def set_push_token(self, url: str, token: str | None) -> None:
        """The token the scheduler got by pairing with the display (``POST /x/pair``)."""
        self._set("push_token", url, token)

    def push_tokens(self) -> dict[str, str]:
        """Every display the scheduler paired with: ``{url: token}``."""
        return self._by_url("push_token")

    def set_tls_pin(self, url: str, pin: str) -> None:
        """The ``sha256:...`` fingerprint of the display's certificate (HTTPS to it is pinned)."""
        self._set("tls_pin", url, pin)

    def tls_pin(self, url: str) -> str | None:
        """The pinned fingerprint of the display at ``url``, if any."""
        return self._get("tls_pin", url)

    def tls_pins(self) -> dict[str, str]:
        """Every pinned display: ``{url: "sha256:..."}``."""
        return self._by_url("tls_pin")

    # -- schedules ---------------------------------------------------------------------------

    def save_schedule(
        self, schedule: StoredSchedule, publish: SchedulePublish | None = None
    ) -> bool:
        """Store the new last good version of a schedule; True when its content changed (new,
        or another digest), and then only, ``publish(connection, schedule)`` is called, in the
        transaction that stores it: of several processes storing the same change, one
        publishes it. :class:`ScheduleConflictError` when the id is a playlist's and the schedule is
        not one, or the other way round (nothing is written)."""
        stored = self._db.row(
            "SELECT digest, source FROM schedules WHERE id = ?", (schedule.schedule_id,)
        )
        if stored == (schedule.digest, schedule.source):
            return False  # the same again: nothing written
        with self._db.transaction() as transaction:
            return self.save_schedule_in(transaction, schedule, publish)

    def save_schedule_in(
        self,
        transaction: Transaction,
        schedule: StoredSchedule,
        publish: SchedulePublish | None = None,
    ) -> bool:
        """:meth:`save_schedule` inside the caller's ``transaction``."""
        before = transaction.row(
            "SELECT source FROM schedules WHERE id = ?", (schedule.schedule_id,)
        )
        if before is not None and (before[0] == PLAYLIST_SOURCE) != (
            schedule.source == PLAYLIST_SOURCE
        ):
            raise ScheduleConflictError(schedule.schedule_id, before[0] == PLAYLIST_SOURCE)
        values = (
            schedule.xml,
            schedule.digest,
            schedule.root_name,
            schedule.updated,
            schedule.source,
            schedule.schedule_id,
        )
        # Each statement changes the row only where it differs: a process storing the
        # same change at once waits for the row, then finds it stored (PostgreSQL).
        changed = (
            transaction.execute(
                "INSERT INTO schedules (xml, digest, root_name, updated, source, id)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                values,
            )
            > 0
            or transaction.execute(
                "UPDATE schedules SET xml = ?, digest = ?, root_name = ?, updated = ?,"
                " source = ? WHERE id = ? AND digest <> ?",
                (*values, schedule.digest),
            )
            > 0
        )
        moved = not changed and (
            transaction.execute(
                "UPDATE schedules SET updated = ?, source = ? WHERE id = ? AND source <> ?",
                (schedule.updated, schedule.source, schedule.schedule_id, schedule.source),
            )
            > 0
        )
        if changed and publish is not None:
            publish(self._joinable(transaction), schedule)
        if changed or moved:
            self._db.notify(transaction, SCHEDULES_CHANNEL, schedule.schedule_id)
        return changed

    def schedule(self, schedule_id: str) -> StoredSchedule | None:
        row = self._db.row(
            f"SELECT {_SCHEDULE_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,)
        )
        return None if row is None else _schedule(row)

    def schedules(self) -> list[StoredSchedule]:
        rows = self._db.rows(f"SELECT {_SCHEDULE_COLUMNS} FROM schedules ORDER BY id")
        return [_schedule(row) for row in rows]

    def delete_schedule(self, schedule_id: str, publish: SchedulePublish | None = None) -> bool:
        """Forget a schedule; False when there was none. ``publish(connection, removed)`` as
        for :meth:`save_schedule`, only by the call that removed it."""
        with self._db.transaction() as transaction:
            return self.delete_schedule_in(transaction, schedule_id, publish)

    def delete_schedule_in(
        self,
        transaction: Transaction,
        schedule_id: str,
        publish: SchedulePublish | None = None,
    ) -> bool:
        """:meth:`delete_schedule` inside the caller's ``transaction``."""
        row = transaction.row(
            f"DELETE FROM schedules WHERE id = ? RETURNING {_SCHEDULE_COLUMNS}", (schedule_id,)
        )
        if row is None:
            return False
        if publish is not None:
            publish(self._joinable(transaction), _schedule(row))
        self._db.notify(transaction, SCHEDULES_CHANNEL, schedule_id)
        return True

    def _joinable(self, transaction: Transaction) -> Any:
        """What ``publish`` joins: the outbox keeps its tables in this database on PostgreSQL;
        on SQLite it has a file of its own (``outbox.sqlite3``), written just before this
        transaction commits (a crash in between: a duplicate, never a lost update)."""
        return transaction.connection if self._db.dialect == "postgresql" else None

    def watch_schedules(self, changed: Callable[[str | None], None]) -> Callable[[], None]:
        """Call ``changed(schedule_id)`` when another process changes a schedule (``None``:
        reload them all, some changes may have been missed); returns a function that stops
        watching. SQLite has one process: nothing to watch."""
        return self._db.listen(SCHEDULES_CHANNEL, changed, name="schedules-listener")

    # -- the fleet ----------------------------------------------------------------------------

    def set_declared_groups(self, url: str, groups: list[str]) -> None:
        """The groups the display itself declared when it registered (replaces the last)."""
        key = display_key(url)
        with self._db.transaction() as transaction:
            transaction.execute(
                "DELETE FROM display_groups WHERE display_key = ? AND source = 'display'", (key,)
            )
            transaction.executemany(
                "INSERT INTO display_groups (display_key, name, source) VALUES (?, ?, 'display')"
                " ON CONFLICT DO NOTHING",
                [(key, group) for group in groups],
            )

    def add_to_group(self, url: str, group: str) -> bool:
        """Put a display in a group (an operator's choice); False when it already was."""
        return (
            self._db.execute(
                "INSERT INTO display_groups (display_key, name, source) VALUES (?, ?, 'operator')"
                " ON CONFLICT DO NOTHING",
                (display_key(url), group),
            )
            > 0
        )

    def remove_from_group(self, url: str, group: str) -> bool:
        """Take a display out of a group, however it got there; False when it was not in it."""
        return (
            self._db.execute(
                "DELETE FROM display_groups WHERE display_key = ? AND name = ?",
                (display_key(url), group),
            )
            > 0
        )

    def groups(self) -> dict[str, list[str]]:
        """Every group and the URLs of its displays."""
        rows = self._db.rows(
            "SELECT DISTINCT g.name, d.url, d.seq FROM display_groups g"
            " JOIN displays d ON d.key = g.display_key ORDER BY g.name, d.seq"
        )
        found: dict[str, list[str]] = {}
        for name, url, _seq in rows:
            found.setdefault(name, []).append(url)
        return found

    def display_groups(self, url: str) -> list[str]:
        rows = self._db.rows(
            "SELECT DISTINCT name FROM display_groups WHERE display_key = ? ORDER BY name",
            (display_key(url),),
        )
        return [row[0] for row in rows]

    def assign(self, assignment: Assignment) -> bool:
        """Add an assignment; False when it existed already."""
        kind, target = _assignment_target(assignment)
        return (
            self._db.execute(
                "INSERT INTO assignments (schedule_id, target_kind, target, created)"
                " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (assignment.schedule_id, kind, target, time.time()),
            )
            > 0
        )

    def unassign(self, assignment: Assignment) -> bool:
        """Remove an assignment; False when there was none."""
        kind, target = _assignment_target(assignment)
        return (
            self._db.execute(
                "DELETE FROM assignments WHERE schedule_id = ? AND target_kind = ? AND target = ?",
                (assignment.schedule_id, kind, target),
            )
            > 0
        )

    def assignments(self) -> list[Assignment]:
        rows = self._db.rows(
            "SELECT a.schedule_id, a.target_kind, a.target, a.created, d.url"
            " FROM assignments a LEFT JOIN displays d"
            " ON a.target_kind = 'display' AND d.key = a.target"
            " ORDER BY a.created, a.schedule_id"
        )
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
        """Ids of the schedules assigned to this display, directly or through its groups."""
        key = display_key(url)
        rows = self._db.rows(
            "SELECT schedule_id, MIN(created) FROM assignments WHERE"
            " (target_kind = 'display' AND target = ?) OR (target_kind = 'group' AND target IN"
            " (SELECT name FROM display_groups WHERE display_key = ?))"
            " GROUP BY schedule_id ORDER BY MIN(created), schedule_id",
            (key, key),
        )
        return [row[0] for row in rows]

    def displays_holding(self, schedule_id: str) -> list[str]:
        """URLs of the displays (in registration order) the schedule is assigned to, directly
        or through a group, or that were pushed it and not its removal since: those a change
        of it concerns. Each part is an index look-up."""
        rows = self._db.rows(
            "SELECT url FROM displays WHERE key IN ("
            " SELECT target FROM assignments WHERE schedule_id = ? AND target_kind = 'display'"
            " UNION SELECT g.display_key FROM assignments a JOIN display_groups g"
            " ON g.name = a.target WHERE a.schedule_id = ? AND a.target_kind = 'group'"
            " UNION SELECT display_key FROM pushed_sets WHERE name = ? AND digest != ''"
            ") ORDER BY seq",
            (schedule_id,) * 3,
        )
        return [row[0] for row in rows]

    def pushed(self, url: str) -> dict[str, str]:
        """Root set name -> digest of each document last pushed to this display; "" for a set
        pushed as removed."""
        rows = self._db.rows(
            "SELECT name, digest FROM pushed_sets WHERE display_key = ?", (display_key(url),)
        )
        return {name: digest for name, digest in rows}

    def set_pushed(self, url: str, name: str, digest: str | None) -> None:
        """Remember a push to the display (``digest`` "": a removal; None: forget the set)."""
        if digest is None:
            self._db.execute(
                "DELETE FROM pushed_sets WHERE display_key = ? AND name = ?",
                (display_key(url), name),
            )
            return
        self._db.execute(
            "INSERT INTO pushed_sets (display_key, name, digest, pushed) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (display_key, name) DO UPDATE SET digest = excluded.digest,"
            " pushed = excluded.pushed",
            (display_key(url), name, digest, time.time()),
        )
