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

Migrations: a schema is an ordered list of steps, each a list of SQL statements; step *n*
takes the schema from version *n* to *n + 1*. :func:`migrate` applies the steps a file lacks
in one transaction and records the new version. The version is ``PRAGMA user_version``, or,
for a schema that shares its file with another one (the outbox's tables live in the display's
and the scheduler's files), a one-row table of its own.

Steps are forward-only and additive: new tables, indexes and columns that may be
NULL or have a default, never a table or column dropped, renamed or retyped; so the release
before reads a file the new one migrated, and a release rolled back to keeps its data. Such a
file opens as it is in an older pdn (:func:`migrate` returns its newer version and logs it).
pdn 0.1.0, released before this rule, refuses a version it does not know: for it the version
above is kept at what it knows (``legacy``, per schema) and the steps after are counted in
``pdn_schema_steps`` (one row per schema), which also holds the steps a reader must know
(``readable_from``): a file whose reader needs more is refused (:class:`SchemaTooNewError`).
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from server.platform.atomicfile import SECRET_MODE, tighten

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

#: ``MIGRATIONS[n]`` holds the statements that take a schema from version n to n + 1.
Migrations = Sequence[Sequence[str]]

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


class SchemaTooNewError(sqlite3.DatabaseError):
    """The file's schema is newer than the migrations this pdn knows."""

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(f"schema version {found} is newer than this pdn's ({supported})")
        self.found = found
        self.supported = supported


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


def _steps_row(connection: sqlite3.Connection, key: str) -> tuple[int, int] | None:
    """(version, readable_from) of ``key`` in :data:`STEPS_TABLE`, None when it has none."""
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (STEPS_TABLE,)
    ).fetchone()
    if exists is None:
        return None
    row = connection.execute(
        f"SELECT version, readable_from FROM {STEPS_TABLE} WHERE name = ?", (key,)
    ).fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def _count_steps(connection: sqlite3.Connection, key: str, version: int, legacy: int) -> None:
    connection.execute(
        f"CREATE TABLE IF NOT EXISTS {STEPS_TABLE} (name TEXT PRIMARY KEY,"
        " version INTEGER NOT NULL, readable_from INTEGER NOT NULL)"
    )
    connection.execute(
        f"INSERT INTO {STEPS_TABLE} (name, version, readable_from) VALUES (?, ?, ?)"
        " ON CONFLICT (name) DO UPDATE SET version = excluded.version",
        (key, version, legacy),
    )


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
    schema that shares its file with another. With ``legacy`` (the steps pdn 0.1.0 knows of
    this schema), that version stays at most ``legacy`` and the full count is kept in
    :data:`STEPS_TABLE`, so pdn 0.1.0 opens the file. A file from a newer pdn opens as it is,
    unless its steps table says a reader must know more steps (SchemaTooNewError).
    """
    target = len(migrations)
    key = version_table or "user_version"
    with transaction(connection):
        # Read inside the write lock: two processes opening a new file migrate it once.
        counted = schema_version(connection, version_table)
        steps = _steps_row(connection, key) if legacy is not None else None
        found = max(counted, steps[0]) if steps is not None else counted
        if found > target:
            if steps is None or steps[1] > target:
                raise SchemaTooNewError(found, target)
            log.info(
                "database schema version %d is newer than this pdn's (%d): opened as it is"
                " (its steps are additive)",
                found,
                target,
            )
            return found
        missing = missing_statements(migrations, found)
        if not missing:
            if legacy is not None and steps is None:
                _count_steps(connection, key, target, legacy)  # every file alike
            return found
        for statement in missing:
            connection.execute(statement)
        # The version pdn 0.1.0 reads: what it knows, never lowered (a file that an unreleased
        # pdn took past it stays refused by 0.1.0, as it was).
        shown = target if legacy is None else max(counted, min(target, legacy))
        if version_table is None:
            # PRAGMA does not take parameters; shown is an int.
            connection.execute(f"PRAGMA user_version={shown}")
        else:
            connection.execute(
                f"CREATE TABLE IF NOT EXISTS {version_table} (version INTEGER NOT NULL)"
            )
            connection.execute(f"DELETE FROM {version_table}")
            connection.execute(f"INSERT INTO {version_table} (version) VALUES (?)", (shown,))
        if legacy is not None:
            _count_steps(connection, key, target, legacy)
    log.info("database schema migrated from version %d to %d", found, target)
    return found


def missing_statements(migrations: Migrations, found: int) -> list[str]:
    """The statements that take a schema from version ``found`` to the newest, in order
    (none: it is current); SchemaTooNewError for a schema from a newer pdn."""
    if found > len(migrations):
        raise SchemaTooNewError(found, len(migrations))
    return [statement for step in migrations[found:] for statement in step]


def _check_name(name: str) -> None:
    if not name.isidentifier():
        raise ValueError(f"not a table name: {name!r}")
