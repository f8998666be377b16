"""Move a scheduler's registry from its SQLite files to PostgreSQL (``pdn scheduler --data-dir
DIR --migrate-to postgresql://...``).

Copies everything the scheduler keeps, in one PostgreSQL transaction (all of it or nothing):
displays (in registration order, with their names, sensors and playback-ingest secrets, so the
displays' playback updates keep arriving), schedules (with where they came from), groups,
assignments, what was pushed to each display, proof of play, and from the outbox the
subscriptions and the events not yet delivered (with their event ids: a receiver that already
had one de-duplicates it), and how far each display's plays are accounted for.
Back-off state is not copied: the first delivery is tried at once.

The target must hold no scheduler data yet (its tables are created if need be): copying twice,
or onto a registry in use, is refused rather than merged. Stop the SQLite scheduler first (a
registration it answers during the copy would be lost); then start the schedulers with
``--database``. The SQLite files are only read and are left as they were, to go back to.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

from psycopg_pool import ConnectionPool

from server.platform.outbox import install_schema as install_outbox_schema
from server.platform.pg import Connection, PgDatabase, transaction
from server.platform.sql import SqliteDatabase
from server.scheduler.storage import SchedulerStorage

__all__ = ["MigrationRefusedError", "copy_to_postgres"]

log = logging.getLogger("pdn.scheduler.migrate")

#: SQLite table -> (its columns to read, the PostgreSQL columns they go to).
_TABLES: dict[str, tuple[str, str]] = {
    "displays": (
        "key, url, location, name, sensors, registered, checked, ingest, push_secret, tls_pin,"
        " state, push_token",
        "key, url, location, name, sensors, registered, checked, ingest, push_secret, tls_pin,"
        " state, push_token",
    ),
    "schedules": (
        "id, xml, digest, root_name, updated, source",
        "id, xml, digest, root_name, updated, source",
    ),
    "display_groups": ("display_key, name, source", "display_key, name, source"),
    "assignments": (
        "schedule_id, target_kind, target, created",
        "schedule_id, target_kind, target, created",
    ),
    "pushed_sets": ("display_key, name, digest, pushed", "display_key, name, digest, pushed"),
    "plays": (
        "display_key, display_url, sequence, item, content_type, set_name, origin, started,"
        " started_at, duration, ended, painted, received, zone, layout",
        "display_key, display_url, sequence, item, content_type, set_name, origin, started,"
        " started_at, duration, ended, painted, received, zone, layout",
    ),
    # How far each display's plays are accounted for, and whether its play log is
    # to be read (not who was reading it: no process is, the scheduler is stopped).
    "play_backfill": (
        "display_key, seen, wanted, done, due, failures, error",
        "display_key, seen, wanted, done, due, failures, error",
    ),
}
_ORDER = {"displays": "seq", "plays": "id", "play_backfill": "display_key"}


class MigrationRefusedError(Exception):
    """The copy cannot be made (no registry to copy, or the target already has data)."""


def copy_to_postgres(data_dir: Path, pool: ConnectionPool[Connection]) -> dict[str, int]:
    """Copy the scheduler in ``data_dir`` (``scheduler.sqlite3``, ``outbox.sqlite3``) into the
    database behind ``pool``; returns how many rows of each kind were copied."""
    registry = data_dir / "scheduler.sqlite3"
    if not registry.is_file():
        raise MigrationRefusedError(f"no scheduler registry in {data_dir} (no scheduler.sqlite3)")
    # Opening them migrates old SQLite files to the current schema first (as a start would).
    SchedulerStorage(SqliteDatabase(registry)).close()
    SchedulerStorage(PgDatabase(pool))  # creates or upgrades the PostgreSQL tables
    install_outbox_schema(PgDatabase(pool))
    counts: dict[str, int] = {}
    source = sqlite3.connect(f"file:{registry}?mode=ro", uri=True)
    try:
        with transaction(pool) as target:
            _refuse_if_in_use(target)
            for table, (columns, pg_columns) in _TABLES.items():
                order = _ORDER.get(table, "rowid")
                rows = source.execute(f"SELECT {columns} FROM {table} ORDER BY {order}").fetchall()
                if table == "plays":
                    rows = [(*row[:11], bool(row[11]), *row[12:]) for row in rows]
                _insert(target, table, pg_columns, rows)
                counts[table] = len(rows)
            outbox = data_dir / "outbox.sqlite3"
            if outbox.is_file():
                counts.update(_copy_outbox(outbox, target))
    finally:
        source.close()
    log.info("copied to PostgreSQL: %s", ", ".join(f"{n} {t}" for t, n in counts.items()))
    return counts


def _refuse_if_in_use(target: Connection) -> None:
    for table in ("displays", "schedules", "assignments", "plays", "pdn_outbox_subscriptions"):
        row = target.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()
        if row is not None and row[0]:
            raise MigrationRefusedError(
                f"the database already holds scheduler data (table {table} is not empty); "
                "copy into a new, empty database"
            )


def _insert(target: Connection, table: str, columns: str, rows: list[Any]) -> None:
    if not rows:
        return
    marks = ", ".join(["%s"] * len(columns.split(",")))
    with target.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)


def _copy_outbox(path: Path, target: Connection) -> dict[str, int]:
    outbox = SqliteDatabase(path)
    install_outbox_schema(outbox)  # an old file's tables to the current schema first
    outbox.close()
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        subscriptions = source.execute(
            "SELECT id, topic, uri, signing_secret FROM pdn_outbox_subscriptions ORDER BY id"
        ).fetchall()
        events = source.execute(
            "SELECT subscription_id, event_id, topic, body, content_type FROM pdn_outbox_events"
            " ORDER BY id"
        ).fetchall()
    finally:
        source.close()
    new_ids: dict[int, int] = {}
    for old_id, topic, uri, signing_secret in subscriptions:
        # Signed subscriptions stay signed.
        row = target.execute(
            "INSERT INTO pdn_outbox_subscriptions (topic, uri, signing_secret)"
            " VALUES (%s, %s, %s) RETURNING id",
            (topic, uri, signing_secret),
        ).fetchone()
        assert row is not None
        new_ids[old_id] = int(row[0])
    pending = [
        (new_ids[subscription], event_id, topic, bytes(body), content_type)
        for subscription, event_id, topic, body, content_type in events
        if subscription in new_ids
    ]
    _insert(
        target,
        "pdn_outbox_events",
        "subscription_id, event_id, topic, body, content_type",
        pending,
    )
    return {"subscriptions": len(subscriptions), "pending-events": len(pending)}
