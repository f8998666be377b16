"""The one way pdn opens SQLite: connection settings, explicit transactions, schema migrations.

Every store uses it: the display's state (``player.store``), the content cache's index
(``player.cache``), the scheduler's storage (``server.scheduler.storage``) and the webhook
outbox (``server.platform.outbox``), which shares the file of the segment it serves.

Settings, and why:
- WAL: readers never wait for the writer, and a crash never corrupts the file.
- ``synchronous``: ``FULL`` (the default) puts every commit on disk before the caller goes
  on, for state an answer or a published record depends on; ``NORMAL`` may forget the last
  commits after a power cut (never corrupts), for bookkeeping that can be redone.
- A busy wait instead of an immediate ``database is locked`` when another connection writes.
- Autocommit (``isolation_level=None``): a lone statement commits by itself; several go in
  :func:`transaction` (``BEGIN IMMEDIATE``, so a writer takes the lock before it reads).
- ``check_same_thread=False``: the stores guard their connection with their own lock.
- Mode 0600, whatever the umask: databases hold secrets (token hashes, subscribers' signing
  secrets). A new file is made 0600 before SQLite opens it (its ``-wal`` and ``-shm`` files
  take the database's mode), and an existing one, or its ``-wal``/``-shm``, readable by others
  is tightened at open (``server.platform.atomicfile.tighten``).

Migrations: :func:`migrate` applies the steps a file lacks in one transaction and records the
new version (``server.platform.migration`` decides which, for SQLite and PostgreSQL alike). The
version is ``PRAGMA user_version``, or, for a schema that shares its file with another one (the
outbox's tables live in the display's and the scheduler's files), a one-row table of its own;
the steps counted beyond what pdn 0.1.0 reads are in ``pdn_schema_steps``.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from server.platform.atomicfile import SECRET_MODE, tighten
from server.platform.migration import (
    Migrations,
    SchemaTooNewError,
    bring_up,
    missing_statements,
)

__all__ = [
    "Migrations",
    "SchemaTooNewError",
    "connect",
    "disk_full",
    "last_disk_full",
    "migrate",
    "missing_statements",
    "note_disk_full",
    "schema_version",
    "transaction",
]

log = logging.getLogger("pdn.db")

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


_DISK_FULL_ERRNOS = frozenset((errno.ENOSPC, errno.EDQUOT))
_last_full: list[tuple[float, str]] = []  # the last one alone
_full_lock = threading.Lock()


def disk_full(error: BaseException) -> str | None:
    """What an exception says when its cause is a full disk (SQLite's ``SQLITE_FULL``, or an
    OSError ``ENOSPC``/``EDQUOT``, raised or chained); None for any other error."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, sqlite3.Error) and (
            getattr(seen, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
            or "database or disk is full" in str(seen)
        ):
            return f"SQLite: {seen} (SQLITE_FULL)"
        if isinstance(seen, OSError) and seen.errno in _DISK_FULL_ERRNOS:
            return f"{seen.strerror or seen} ({errno.errorcode.get(seen.errno or 0, '?')})"
        seen = seen.__cause__ or seen.__context__
    return None


def note_disk_full(reason: str) -> None:
    """Remember that a write failed on a full disk (health pages report it)."""
    with _full_lock:
        _last_full[:] = [(time.time(), reason)]
    log.error("a write failed: the disk is full: %s", reason)


def last_disk_full() -> tuple[float, str] | None:
    """(when, why) of the last write that failed on a full disk in this process, or None."""
    with _full_lock:
        return _last_full[0] if _last_full else None


def connect(
    path: Path | str, *, synchronous: Synchronous = "FULL", busy_timeout: float = 10.0
) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, with a busy wait of
    ``busy_timeout`` seconds, usable from any thread (guard it with a lock)."""
    # PRAGMA does not take parameters; the values are checked here.
    if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        raise ValueError(f"unknown synchronous level {synchronous!r}")
    _private(path)
    connection = sqlite3.connect(
        path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
    )
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={synchronous}")
        connection.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
    except BaseException:
        connection.close()
        raise
    return connection


def _private(path: Path | str) -> None:
    """Make the database file 0600 before SQLite opens it (see the module's docstring)."""
    name = str(path)
    if not name or name == ":memory:" or name.startswith("file:"):
        return
    try:
        # O_CREAT's mode is narrowed by the umask, never widened: 0600 at most.
        handle = os.open(name, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, SECRET_MODE)
    except FileNotFoundError:
        return  # no such directory: SQLite says so, as it would
    os.close(handle)
    for suffix in ("", "-wal", "-shm", "-journal"):
        tighten(Path(name + suffix))


@contextmanager
def transaction(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def schema_version(connection: sqlite3.Connection, version_table: str | None = None) -> int:
    """The schema version recorded in the file (0 when none is)."""
    if version_table is None:
        return int(connection.execute("PRAGMA user_version").fetchone()[0])
    _check_name(version_table)
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (version_table,)
    ).fetchone()
    if exists is None:
        return 0
    row = connection.execute(f"SELECT MAX(version) FROM {version_table}").fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


#: The steps each schema counts beyond what pdn 0.1.0 reads (see the module's docstring).
STEPS_TABLE = "pdn_schema_steps"


class _FileBook:
    """A schema's version in an SQLite file (see :class:`server.platform.migration.VersionBook`):
    ``PRAGMA user_version`` or the one row of ``version_table``; the count in
    :data:`STEPS_TABLE` under ``key``."""

    def __init__(self, connection: sqlite3.Connection, version_table: str | None) -> None:
        self._connection = connection
        self._table = version_table
        self._key = version_table or "user_version"

    def recorded(self) -> int:
        return schema_version(self._connection, self._table)

    def counted(self) -> tuple[int, int] | None:
        exists = self._connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (STEPS_TABLE,)
        ).fetchone()
        if exists is None:
            return None
        row = self._connection.execute(
            f"SELECT version, readable_from FROM {STEPS_TABLE} WHERE name = ?", (self._key,)
        ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def count(self, version: int, readable_from: int) -> None:
        self._connection.execute(
            f"CREATE TABLE IF NOT EXISTS {STEPS_TABLE} (name TEXT PRIMARY KEY,"
            " version INTEGER NOT NULL, readable_from INTEGER NOT NULL)"
        )
        self._connection.execute(
            f"INSERT INTO {STEPS_TABLE} (name, version, readable_from) VALUES (?, ?, ?)"
            " ON CONFLICT (name) DO UPDATE SET version = excluded.version",
            (self._key, version, readable_from),
        )

    def run(self, statement: str) -> None:
        self._connection.execute(statement)

    def record(self, version: int) -> None:
        if self._table is None:
            # PRAGMA does not take parameters; version is an int.
            self._connection.execute(f"PRAGMA user_version={int(version)}")
            return
        self._connection.execute(
            f"CREATE TABLE IF NOT EXISTS {self._table} (version INTEGER NOT NULL)"
        )
        self._connection.execute(f"DELETE FROM {self._table}")
        self._connection.execute(f"INSERT INTO {self._table} (version) VALUES (?)", (version,))


def migrate(
    connection: sqlite3.Connection,
    migrations: Migrations,
    *,
    version_table: str | None = None,
    legacy: int | None = None,
) -> int:
    """Bring the schema to ``len(migrations)``; returns the version the file had before.

    The missing steps run in one transaction, with the new version, so a crash leaves the
    old schema or the new one. The version is ``PRAGMA user_version``, or with
    ``version_table`` the single row ``version`` of that table (created when missing), for a
    schema that shares its file with another. ``legacy``: the steps pdn 0.1.0 knows of this
    schema (:func:`server.platform.migration.bring_up` decides).
    """
    # Read inside the write lock: two processes opening a new file migrate it once.
    with transaction(connection):
        found, migrated = bring_up(_FileBook(connection, version_table), migrations, legacy=legacy)
    if migrated:
        log.info("database schema migrated from version %d to %d", found, len(migrations))
    return found


def _check_name(name: str) -> None:
    if not name.isidentifier():
        raise ValueError(f"not a table name: {name!r}")
