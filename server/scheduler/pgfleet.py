"""The displays' background reads and what they found, shared by every scheduler process on one
PostgreSQL: :class:`PgProbeQueue` divides the reads, :class:`PgStatusBook` keeps the
fleet status (``GET /x/fleet``) in the database, so any process answers it alike.

Tables (PostgreSQL's own migrations in ``server.scheduler.storage``): the displays table's
``<kind>_due``, ``<kind>_failures`` and ``<kind>_error`` columns (indexed by due time) and
``display_status`` (one row per display:
its status fields as JSON, the revision of its last change from the sequence
``display_status_revision``, and its thumbnail, at most :data:`MAX_SHARED_THUMBNAIL` bytes).
Times are the database's clock, so processes on machines whose clocks differ agree.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from typing import Any

from psycopg_pool import ConnectionPool

from server.platform.pg import Connection
from server.scheduler.fleetstatus import DisplayStatus, merge_status
from server.scheduler.probes import FOLLOWER, KINDS, LEAD, Claim, Finished
from server.scheduler.storage import display_key

log = logging.getLogger("pdn.scheduler.pgfleet")

#: A thumbnail larger than this is not shared (a 320 px wide PNG is far smaller).
MAX_SHARED_THUMBNAIL = 512 * 1024
#: How often a console waiting for changes looks for those made by other processes.
CHANGES_POLL = 1.0

_NOW = "EXTRACT(EPOCH FROM statement_timestamp())"


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown kind of read {kind!r}")
    return kind


#: Displays registered (or approved) since: their lead read due at once, their follower parked
#: until that read finds them, no failure counted.
_MADE_DUE = (
    f"UPDATE displays SET {LEAD}_due = 0, {LEAD}_failures = 0, {LEAD}_error = NULL,"
    f" {FOLLOWER}_due = 'Infinity', {FOLLOWER}_failures = 0, {FOLLOWER}_error = NULL"
    " WHERE key = ANY(%s)"
)


class PgProbeQueue:
    """:class:`server.scheduler.probes.ProbeQueue` in the displays table: one statement claims
    a batch, one records a batch of finished reads. A parked follower read is due at
    ``'Infinity'`` (never, and last in the due index; a new row's default)."""

    def __init__(self, pool: ConnectionPool[Connection]) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._made_due: set[str] = set()  # keys of displays due_now was told of

    def due_now(self, url: str) -> None:
        """Recorded by this process's next claim (the registration wakes its loops), in one
        statement for every display registered meanwhile: a burst of registrations costs one
        write, not one each. A new display's row is due so already (its columns' defaults);
        this is for one registered again, or approved."""
        with self._lock:
            self._made_due.add(display_key(url))

    def claim(self, kind: str, limit: int, lease: float) -> list[Claim]:
        column = _kind(kind)
        with self._lock:
            made_due, self._made_due = self._made_due, set()
        with self._pool.connection() as connection:
            if made_due:
                connection.execute(_MADE_DUE, (sorted(made_due),))
            rows = connection.execute(
                f"UPDATE displays d SET {column}_due = {_NOW} + %s"
                f" FROM (SELECT key, {column}_due AS was_due FROM displays"
                # A pending display (not approved yet) is not read: a stranger's registration
                # does not make the scheduler reach out to the address it gave.
                f" WHERE {column}_due <= {_NOW} AND state = 'approved'"
                f" ORDER BY {column}_due LIMIT %s FOR UPDATE SKIP LOCKED) due"
                f" WHERE d.key = due.key"
                f" RETURNING d.url, d.{column}_failures, d.{column}_error,"
                " due.was_due = 0".encode(),  # 0: made due by its registration
                (lease, limit),
            ).fetchall()
        return [Claim(url, failures, error, first) for url, failures, error, first in rows]

    def done(self, kind: str, finished: list[Finished]) -> None:
        column = _kind(kind)
        due = f"{_NOW} + v.next_in"
        if kind == FOLLOWER:  # parked by the lead read while this one was under way: stays so
            due = f"CASE WHEN d.{FOLLOWER}_due = 'Infinity' THEN 'Infinity' ELSE {due} END"
        follower = ""
        if kind == LEAD:
            follower = (
                f", {FOLLOWER}_due = CASE WHEN v.unreachable THEN 'Infinity'"
                f" WHEN d.{FOLLOWER}_due = 'Infinity' THEN {_NOW} ELSE d.{FOLLOWER}_due END"
                f", {FOLLOWER}_failures = CASE WHEN v.unreachable"
                f" THEN GREATEST(d.{FOLLOWER}_failures, 1) ELSE d.{FOLLOWER}_failures END"
            )
        with self._pool.connection() as connection:
            connection.execute(
                f"UPDATE displays d SET {column}_due = {due}, {column}_failures = v.failures,"
                f" {column}_error = v.error{follower}"
                " FROM unnest(%s::text[], %s::float8[], %s::int[], %s::text[], %s::bool[])"
                " AS v(key, next_in, failures, error, unreachable)"
                " WHERE d.key = v.key".encode(),
                (
                    [display_key(read.url) for read in finished],
                    [read.next_in for read in finished],
                    [read.failures for read in finished],
                    [read.error for read in finished],
                    [read.unreachable for read in finished],
                ),
            )


_STORED_FIELDS = [
    f.name for f in dataclasses.fields(DisplayStatus) if f.name not in ("thumbnail", "revision")
]


def _status(fields: str, revision: int) -> DisplayStatus:
    values = json.loads(fields)
    return DisplayStatus(
        **{name: values[name] for name in _STORED_FIELDS if name in values}, revision=revision
    )


class PgStatusBook:
    """:class:`server.scheduler.fleetstatus.StatusBook` in ``display_status``."""

    def __init__(self, pool: ConnectionPool[Connection]) -> None:
        self._pool = pool
        self._changed = threading.Condition()
        self._stopped = False

    def get(self, url: str) -> DisplayStatus | None:
        with self._pool.connection() as connection:
            row = connection.execute(
                "SELECT fields, revision FROM display_status WHERE key = %s", (display_key(url),)
            ).fetchone()
        return None if row is None else _status(row[0], row[1])

    def update(self, url: str, fields: dict[str, Any]) -> None:
        key = display_key(url)
        thumbnail = fields.get("thumbnail")
        if isinstance(thumbnail, bytes) and len(thumbnail) > MAX_SHARED_THUMBNAIL:
            fields = {
                **{k: v for k, v in fields.items() if k != "thumbnail"},
                "thumbnail_error": f"the thumbnail is over {MAX_SHARED_THUMBNAIL} bytes",
            }
            thumbnail = None
        if thumbnail is None:
            known = self.get(url)
            if known is None:
                if self._insert(url, fields):
                    return  # the display's first status: one statement
            else:
                before = dataclasses.asdict(known)
                merge_status(known, fields)
                if dataclasses.asdict(known) == before:
                    return  # the same again (a display that stays off): no transaction
        with self._pool.connection() as connection, connection.transaction():
            row = connection.execute(
                "SELECT fields, revision FROM display_status WHERE key = %s FOR UPDATE", (key,)
            ).fetchone()
            status = DisplayStatus(url) if row is None else _status(row[0], row[1])
            if row is None:
                # Two processes creating the row at once: the second waits here, then merges.
                connection.execute(
                    "INSERT INTO display_status (key, fields, revision) VALUES (%s, '{}', 0)"
                    " ON CONFLICT (key) DO NOTHING",
                    (key,),
                )
                again = connection.execute(
                    "SELECT fields, revision FROM display_status WHERE key = %s FOR UPDATE",
                    (key,),
                ).fetchone()
                if again is not None and again[0] != "{}":
                    status = _status(again[0], again[1])
            before = dataclasses.asdict(status)
            changed = merge_status(status, fields)
            if dataclasses.asdict(status) == before and thumbnail is None:
                return  # the same again (a display that stays off): nothing written
            stored = json.dumps({name: getattr(status, name) for name in _STORED_FIELDS})
            revision = "nextval('display_status_revision')" if changed else "revision"
            connection.execute(
                f"UPDATE display_status SET fields = %s, revision = {revision}"
                " WHERE key = %s".encode(),
                (stored, key),
            )
            if thumbnail is not None:
                connection.execute(
                    "UPDATE display_status SET thumbnail = %s WHERE key = %s", (thumbnail, key)
                )
        if changed:
            with self._changed:
                self._changed.notify_all()

    def _insert(self, url: str, fields: dict[str, Any]) -> bool:
        """Store the display's first status; False when another process stored one first."""
        status = DisplayStatus(url)
        changed = merge_status(status, fields)
        stored = json.dumps({name: getattr(status, name) for name in _STORED_FIELDS})
        revision = "nextval('display_status_revision')" if changed else "0"
        with self._pool.connection() as connection:
            inserted = connection.execute(
                "INSERT INTO display_status (key, fields, revision)"
                f" VALUES (%s, %s, {revision}) ON CONFLICT (key) DO NOTHING".encode(),
                (display_key(url), stored),
            ).rowcount
        if inserted and changed:
            with self._changed:
                self._changed.notify_all()
        return inserted > 0

    def all(self) -> dict[str, DisplayStatus]:
        with self._pool.connection() as connection:
            rows = connection.execute("SELECT key, fields, revision FROM display_status").fetchall()
        return {key: _status(fields, revision) for key, fields, revision in rows}

    def thumbnail(self, url: str) -> tuple[bytes, float] | None:
        with self._pool.connection() as connection:
            row = connection.execute(
                "SELECT thumbnail, fields FROM display_status WHERE key = %s",
                (display_key(url),),
            ).fetchone()
        if row is None or row[0] is None:
            return None
        taken = json.loads(row[1]).get("thumbnail_taken")
        return bytes(row[0]), float(taken or 0.0)

    def revision(self) -> int:
        with self._pool.connection() as connection:
            row = connection.execute(
                "SELECT COALESCE(MAX(revision), 0) FROM display_status"
            ).fetchone()
        return int(row[0]) if row else 0

    def changes(self, after: int, timeout: float) -> tuple[int, list[str]]:
        """Changes are made by every process: look every :data:`CHANGES_POLL` s (at once
        when this process made one)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._pool.connection() as connection:
                rows = connection.execute(
                    "SELECT fields, revision FROM display_status WHERE revision > %s",
                    (after,),
                ).fetchall()
            if rows or self._stopped:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                return after, []
            with self._changed:
                self._changed.wait(min(left, CHANGES_POLL))
        newest = max([after, *(revision for _fields, revision in rows)])
        return newest, [json.loads(fields)["url"] for fields, _revision in rows]

    def stop(self) -> None:
        self._stopped = True
        with self._changed:
            self._changed.notify_all()
