"""The scheduler's storage on PostgreSQL (:class:`PgStorage`), for several scheduler processes
on one database (``pdn scheduler --database postgresql://...``; issue 14).

The same :class:`~server.scheduler.storage.SchedulerStorage` as :class:`SqliteStorage`, table
for table (see its module), through a psycopg connection pool (``server.pg``); the schema is
versioned as component ``scheduler`` in ``pdn_schema`` and migrated at start under an advisory
lock, so processes starting together migrate once.

What differs:
- registration order is a sequence (``seq BIGSERIAL``), safe when processes register at once;
- background reads of the displays are shared: each display's next read of each kind is due
  at a time stored in its row, claimed with ``FOR UPDATE SKIP LOCKED``
  (:class:`server.scheduler.pgfleet.PgProbeQueue`), and what they found is stored
  (``display_status``, :class:`server.scheduler.pgfleet.PgStatusBook`), so every process
  answers ``GET /x/fleet`` alike; a registration makes its display due at once.
- schedules are the database's, not any process's: a change is stored with ``INSERT ... ON
  CONFLICT DO UPDATE ... WHERE digest differs`` and published (``publish(connection, ...)``) in
  that same transaction only when the row changed, so of several processes taking in the same
  file change one publishes it; the transaction ends with ``NOTIFY pdn_schedules, '<id>'`` and
  :meth:`watch_schedules` LISTENs on a connection of its own so each process refreshes its copy.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from server.db import Migrations
from server.pg import Connection, migrate
from server.scheduler.storage import (
    DISPLAY_COLUMNS,
    DISPLAYS_HOLDING,
    UPSERT_STATE,
    Assignment,
    DisplayRecord,
    PlayRecord,
    SchedulePublish,
    StoredSchedule,
    assignment_target,
    display_key,
    display_record,
)

__all__ = ["MIGRATIONS", "SCHEDULES_CHANNEL", "PgStorage"]

log = logging.getLogger("pdn.scheduler.pgstorage")

#: NOTIFY channel of schedule changes; the payload is the schedule id.
SCHEDULES_CHANNEL = "pdn_schedules"
_SCHEDULE_COLUMNS = "id, xml, digest, root_name, updated, source"

MIGRATIONS: Migrations = (
    (
        """CREATE TABLE displays (
            key TEXT PRIMARY KEY,
            url TEXT NOT NULL,
            location TEXT NOT NULL,
            name TEXT,
            sensors TEXT NOT NULL DEFAULT '[]',
            registered DOUBLE PRECISION NOT NULL,
            checked DOUBLE PRECISION,
            seq BIGSERIAL NOT NULL,
            ingest TEXT UNIQUE,
            probe_until DOUBLE PRECISION
        )""",
        "CREATE INDEX displays_by_seq ON displays (seq)",
        """CREATE TABLE schedules (
            id TEXT PRIMARY KEY,
            xml BYTEA NOT NULL,
            digest TEXT NOT NULL,
            root_name TEXT,
            updated DOUBLE PRECISION NOT NULL
        )""",
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
            created DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (schedule_id, target_kind, target)
        )""",
        """CREATE TABLE pushed_sets (
            display_key TEXT NOT NULL,
            name TEXT NOT NULL,
            digest TEXT NOT NULL,
            pushed DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (display_key, name)
        )""",
        """CREATE TABLE plays (
            id BIGSERIAL PRIMARY KEY,
            display_key TEXT NOT NULL,
            display_url TEXT NOT NULL,
            sequence BIGINT NOT NULL,
            item TEXT,
            content_type TEXT,
            set_name TEXT,
            origin TEXT NOT NULL,
            started TEXT NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            duration DOUBLE PRECISION,
            ended TEXT,
            painted BOOLEAN NOT NULL,
            received DOUBLE PRECISION NOT NULL,
            UNIQUE (display_key, sequence, started)
        )""",
        "CREATE INDEX plays_by_time ON plays (started_at)",
        "CREATE INDEX plays_by_display ON plays (display_key, sequence)",
    ),
    (
        # Where each schedule came from (a folder, or the API); those stored before: any folder.
        "ALTER TABLE schedules ADD COLUMN source TEXT NOT NULL DEFAULT '*'",
    ),
    (
        # Background reads shared by the processes (server.scheduler.pgfleet): when each kind
        # of read is due next (epoch s, the database's clock) and how many failed in a row.
        "ALTER TABLE displays DROP COLUMN probe_until,"
        " ADD COLUMN info_due DOUBLE PRECISION NOT NULL DEFAULT 0,"
        " ADD COLUMN info_failures INTEGER NOT NULL DEFAULT 0,"
        " ADD COLUMN health_due DOUBLE PRECISION NOT NULL DEFAULT 0,"
        " ADD COLUMN health_failures INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX displays_info_due ON displays (info_due)",
        "CREATE INDEX displays_health_due ON displays (health_due)",
        # What each display is doing (GET /x/fleet), the same from every process.
        "CREATE SEQUENCE display_status_revision",
        """CREATE TABLE display_status (
            key TEXT PRIMARY KEY,
            fields TEXT NOT NULL,
            revision BIGINT NOT NULL,
            thumbnail BYTEA
        )""",
        "CREATE INDEX display_status_by_revision ON display_status (revision)",
    ),
    (
        # What each kind of read last failed with (server.scheduler.probes.Claim.last_error):
        # a display failing the same way again is not written about again.
        "ALTER TABLE displays ADD COLUMN info_error TEXT, ADD COLUMN health_error TEXT",
        # Fleet.schedule_changed finds where a schedule is assigned or was pushed at once.
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
        # Issue 22: pending registrations, and the token got by pairing (as in SQLite).
        "ALTER TABLE displays ADD COLUMN state TEXT NOT NULL DEFAULT 'approved'",
        "ALTER TABLE displays ADD COLUMN push_token TEXT",
    ),
)

_DISPLAY_COLUMNS = DISPLAY_COLUMNS


def _schedule(row: tuple[Any, ...]) -> StoredSchedule:
    return StoredSchedule(row[0], bytes(row[1]), row[2], row[3], row[4], row[5])


class PgStorage:
    """:class:`SchedulerStorage` in PostgreSQL, shared by every scheduler process."""

    def __init__(self, pool: ConnectionPool[Connection], *, own_pool: bool = False) -> None:
        """``own_pool``: close the pool in :meth:`close`."""
        self._pool = pool
        self._own_pool = own_pool
        migrate(pool, MIGRATIONS, component="scheduler")

    def _write(self, sql: Any, params: tuple[Any, ...]) -> int:
        with self._pool.connection() as connection:
            return connection.execute(sql, params).rowcount

    def _rows(self, sql: Any, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        with self._pool.connection() as connection:
            return connection.execute(sql, params).fetchall()

    def upsert_display(
        self, url: str, location: dict[str, str], name: str | None, *, pending: bool = False
    ) -> None:
        self._write(
            f"""
            INSERT INTO displays (key, url, location, name, registered, ingest, info_due, state)
            VALUES (%s, %s, %s, %s, %s, %s, 'Infinity', %s)
            ON CONFLICT (key) DO UPDATE SET
                url = excluded.url,
                location = excluded.location,
                name = COALESCE(excluded.name, displays.name),
                checked = NULL,
                info_due = 'Infinity', info_failures = 0, info_error = NULL,
                health_due = 0, health_failures = 0, health_error = NULL,
                ingest = COALESCE(displays.ingest, excluded.ingest),
                {UPSERT_STATE}
            """.encode(),
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

    def record_display_info(
        self, url: str, name: str | None, sensors: list[dict[str, str]]
    ) -> None:
        self._write(
            "UPDATE displays SET name = COALESCE(%s, name), sensors = %s, checked = %s"
            " WHERE key = %s",
            (name, json.dumps(sensors), time.time(), display_key(url)),
        )

    def displays(self) -> list[DisplayRecord]:
        rows = self._rows(f"SELECT {_DISPLAY_COLUMNS} FROM displays ORDER BY seq".encode())
        return [display_record(row) for row in rows]

    def save_schedule(
        self, schedule: StoredSchedule, publish: SchedulePublish | None = None
    ) -> bool:
        values = (
            schedule.xml,
            schedule.digest,
            schedule.root_name,
            schedule.updated,
            schedule.source,
            schedule.schedule_id,
        )
        with self._pool.connection() as connection, connection.transaction():
            # The row locked first: a concurrent writer of the same schedule waits here, then
            # sees the digest it stored, so of two processes storing the same change the second
            # changes nothing and publishes nothing.
            for _attempt in range(2):
                row = connection.execute(
                    "SELECT digest, source FROM schedules WHERE id = %s FOR UPDATE",
                    (schedule.schedule_id,),
                ).fetchone()
                if row is not None:
                    break
                inserted = connection.execute(
                    "INSERT INTO schedules (xml, digest, root_name, updated, source, id)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id",
                    values,
                ).fetchone()
                if inserted is not None:
                    break
                # Inserted by another process meanwhile (now committed): compare with it.
            if row is not None:
                if row[0] == schedule.digest and row[1] == schedule.source:
                    return False
                connection.execute(
                    "UPDATE schedules SET xml = %s, digest = %s, root_name = %s, updated = %s,"
                    " source = %s WHERE id = %s",
                    values,
                )
            changed = row is None or row[0] != schedule.digest
            if changed and publish is not None:
                publish(connection, schedule)
            connection.execute(
                "SELECT pg_notify(%s, %s)", (SCHEDULES_CHANNEL, schedule.schedule_id)
            )
        return changed

    def schedule(self, schedule_id: str) -> StoredSchedule | None:
        rows = self._rows(
            f"SELECT {_SCHEDULE_COLUMNS} FROM schedules WHERE id = %s", (schedule_id,)
        )
        return _schedule(rows[0]) if rows else None

    def schedules(self) -> list[StoredSchedule]:
        rows = self._rows(f"SELECT {_SCHEDULE_COLUMNS} FROM schedules ORDER BY id")
        return [_schedule(row) for row in rows]

    def delete_schedule(self, schedule_id: str, publish: SchedulePublish | None = None) -> bool:
        with self._pool.connection() as connection, connection.transaction():
            row = connection.execute(
                f"DELETE FROM schedules WHERE id = %s RETURNING {_SCHEDULE_COLUMNS}",
                (schedule_id,),
            ).fetchone()
            if row is None:
                return False
            if publish is not None:
                publish(connection, _schedule(row))
            connection.execute("SELECT pg_notify(%s, %s)", (SCHEDULES_CHANNEL, schedule_id))
        return True

    def watch_schedules(self, changed: Callable[[str | None], None]) -> Callable[[], None]:
        stop = threading.Event()
        thread = threading.Thread(
            target=self._watch, args=(changed, stop), name="schedules-listener", daemon=True
        )
        thread.start()

        def stop_watching() -> None:
            stop.set()
            thread.join(timeout=5)

        return stop_watching

    def _watch(self, changed: Callable[[str | None], None], stop: threading.Event) -> None:
        first = True
        while not stop.is_set():
            conninfo = self._pool.conninfo
            try:
                with psycopg.connect(
                    conninfo() if callable(conninfo) else conninfo,
                    autocommit=True,
                    application_name="pdn-schedules",
                ) as connection:
                    connection.execute(f"LISTEN {SCHEDULES_CHANNEL}")
                    if not first:
                        changed(None)  # what changed while not listening is unknown
                    first = False
                    while not stop.is_set():
                        for notification in connection.notifies(timeout=0.5):
                            changed(notification.payload)
            except Exception as error:  # the database went away: listen again when it is back
                if stop.is_set():
                    return
                log.warning("listening for schedule changes failed (%s); retrying", error)
                stop.wait(1.0)

    # -- the fleet ----------------------------------------------------------------------------

    def display(self, url: str) -> DisplayRecord | None:
        rows = self._rows(
            f"SELECT {_DISPLAY_COLUMNS} FROM displays WHERE key = %s".encode(),
            (display_key(url),),
        )
        return display_record(rows[0]) if rows else None

    def set_declared_groups(self, url: str, groups: list[str]) -> None:
        key = display_key(url)
        with self._pool.connection() as connection, connection.transaction():
            connection.execute(
                "DELETE FROM display_groups WHERE display_key = %s AND source = 'display'",
                (key,),
            )
            with connection.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO display_groups (display_key, name, source)"
                    " VALUES (%s, %s, 'display') ON CONFLICT DO NOTHING",
                    [(key, group) for group in groups],
                )

    def add_to_group(self, url: str, group: str) -> bool:
        return (
            self._write(
                "INSERT INTO display_groups (display_key, name, source)"
                " VALUES (%s, %s, 'operator') ON CONFLICT DO NOTHING",
                (display_key(url), group),
            )
            > 0
        )

    def remove_from_group(self, url: str, group: str) -> bool:
        return (
            self._write(
                "DELETE FROM display_groups WHERE display_key = %s AND name = %s",
                (display_key(url), group),
            )
            > 0
        )

    def groups(self) -> dict[str, list[str]]:
        rows = self._rows(
            "SELECT DISTINCT g.name, d.url, d.seq FROM display_groups g"
            " JOIN displays d ON d.key = g.display_key ORDER BY g.name, d.seq"
        )
        found: dict[str, list[str]] = {}
        for name, url, _seq in rows:
            found.setdefault(name, []).append(url)
        return found

    def display_groups(self, url: str) -> list[str]:
        rows = self._rows(
            "SELECT DISTINCT name FROM display_groups WHERE display_key = %s ORDER BY name",
            (display_key(url),),
        )
        return [row[0] for row in rows]

    def assign(self, assignment: Assignment) -> bool:
        kind, target = assignment_target(assignment)
        return (
            self._write(
                "INSERT INTO assignments (schedule_id, target_kind, target, created)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (assignment.schedule_id, kind, target, time.time()),
            )
            > 0
        )

    def unassign(self, assignment: Assignment) -> bool:
        kind, target = assignment_target(assignment)
        return (
            self._write(
                "DELETE FROM assignments WHERE schedule_id = %s AND target_kind = %s"
                " AND target = %s",
                (assignment.schedule_id, kind, target),
            )
            > 0
        )

    def assignments(self) -> list[Assignment]:
        rows = self._rows(
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
        key = display_key(url)
        rows = self._rows(
            "SELECT schedule_id, MIN(created) FROM assignments WHERE"
            " (target_kind = 'display' AND target = %s) OR (target_kind = 'group' AND target IN"
            " (SELECT name FROM display_groups WHERE display_key = %s))"
            " GROUP BY schedule_id ORDER BY MIN(created), schedule_id",
            (key, key),
        )
        return [row[0] for row in rows]

    def displays_holding(self, schedule_id: str) -> list[str]:
        return [row[0] for row in self._rows(DISPLAYS_HOLDING, (schedule_id,) * 3)]

    def pushed(self, url: str) -> dict[str, str]:
        rows = self._rows(
            "SELECT name, digest FROM pushed_sets WHERE display_key = %s", (display_key(url),)
        )
        return {name: digest for name, digest in rows}

    def set_pushed(self, url: str, name: str, digest: str | None) -> None:
        if digest is None:
            self._write(
                "DELETE FROM pushed_sets WHERE display_key = %s AND name = %s",
                (display_key(url), name),
            )
            return
        self._write(
            "INSERT INTO pushed_sets (display_key, name, digest, pushed) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (display_key, name) DO UPDATE SET digest = excluded.digest,"
            " pushed = excluded.pushed",
            (display_key(url), name, digest, time.time()),
        )

    def ingest_secret(self, url: str) -> str | None:
        rows = self._rows("SELECT ingest FROM displays WHERE key = %s", (display_key(url),))
        return None if not rows else rows[0][0]

    def display_for_secret(self, secret: str) -> str | None:
        rows = self._rows("SELECT url FROM displays WHERE ingest = %s", (secret,))
        return None if not rows else str(rows[0][0])

    def set_push_secret(self, url: str, secret: str | None) -> None:
        self._write(
            "UPDATE displays SET push_secret = %s WHERE key = %s", (secret, display_key(url))
        )

    def push_secret(self, url: str) -> str | None:
        rows = self._rows("SELECT push_secret FROM displays WHERE key = %s", (display_key(url),))
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def approve(self, url: str) -> bool:
        return (
            self._write(
                "UPDATE displays SET state = 'approved' WHERE key = %s", (display_key(url),)
            )
            > 0
        )

    def set_push_token(self, url: str, token: str | None) -> None:
        self._write("UPDATE displays SET push_token = %s WHERE key = %s", (token, display_key(url)))

    def push_tokens(self) -> dict[str, str]:
        rows = self._rows("SELECT url, push_token FROM displays WHERE push_token IS NOT NULL")
        return {str(url): str(token) for url, token in rows}

    def set_tls_pin(self, url: str, pin: str) -> None:
        self._write("UPDATE displays SET tls_pin = %s WHERE key = %s", (pin, display_key(url)))

    def tls_pin(self, url: str) -> str | None:
        rows = self._rows("SELECT tls_pin FROM displays WHERE key = %s", (display_key(url),))
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def tls_pins(self) -> dict[str, str]:
        rows = self._rows("SELECT url, tls_pin FROM displays WHERE tls_pin IS NOT NULL")
        return {str(url): str(pin) for url, pin in rows}

    def record_play(self, play: PlayRecord) -> bool:
        key = display_key(play.display)
        with self._pool.connection() as connection, connection.transaction():
            inserted = connection.execute(
                "INSERT INTO plays (display_key, display_url, sequence, item, content_type,"
                " set_name, origin, started, started_at, duration, ended, painted, received)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING",
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
                    play.painted,
                    play.received,
                ),
            ).rowcount
            if inserted:
                connection.execute(
                    "UPDATE plays SET ended = %s WHERE display_key = %s AND sequence = %s"
                    " AND ended IS NULL",
                    (play.started, key, play.sequence - 1),
                )
                connection.execute(
                    "UPDATE plays SET ended = (SELECT started FROM plays WHERE display_key = %s"
                    " AND sequence = %s ORDER BY id DESC LIMIT 1)"
                    " WHERE display_key = %s AND sequence = %s AND ended IS NULL",
                    (key, play.sequence + 1, key, play.sequence),
                )
        return inserted > 0

    def plays(
        self, url: str | None = None, since: float | None = None, until: float | None = None
    ) -> list[PlayRecord]:
        where: list[str] = []
        params: list[Any] = []
        if url is not None:
            where.append("display_key = %s")
            params.append(display_key(url))
        if since is not None:
            where.append("started_at >= %s")
            params.append(since)
        if until is not None:
            where.append("started_at < %s")
            params.append(until)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self._rows(
            "SELECT display_url, sequence, item, content_type, set_name, origin, started,"
            " started_at, duration, ended, painted, received FROM plays"
            f" {clause} ORDER BY display_key, sequence, id".encode(),
            params,
        )
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
        if self._own_pool:
            self._pool.close()
