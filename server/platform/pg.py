"""The one way pdn opens PostgreSQL: a connection pool, explicit transactions, versioned schema
migrations applied at start (the PostgreSQL counterpart of ``server.platform.db``), and what only
PostgreSQL does for pdn, each in one place here: :class:`PgDatabase` (``server.platform.sql``'s one
SQL text on a pool), LISTEN/NOTIFY (:meth:`PgDatabase.notify`, :meth:`PgDatabase.listen`: processes
tell each other of a change) and advisory locks (:data:`MIGRATION_LOCK`, :meth:`PgDatabase.lock`).
The claims made with ``FOR UPDATE SKIP LOCKED`` belong to the queues that claim:
``server.scheduler.pgfleet`` (reads of the displays) and ``server.platform.pgoutbox`` (deliveries).

Used by the scheduler when it runs on PostgreSQL (``pdn scheduler --database postgresql://...``)
and by its outbox. Needs the ``postgres`` extra (psycopg 3 and psycopg_pool):
``pip install '.[postgres]'``.

Usage::

    pool = open_pool("postgresql://pdn@db.example/pdn", name="scheduler")
    migrate(pool, MIGRATIONS, component="scheduler")       # safe when several start at once
    with transaction(pool) as connection:
        connection.execute("UPDATE ...")
    pool.close()

Migrations: every component (the scheduler's tables, the outbox's) keeps its version in one row
of ``pdn_schema``, the steps counted beyond what pdn 0.1.0 reads in ``pdn_schema_steps``;
``server.platform.migration`` decides what to run, as on SQLite. :func:`migrate` takes a
transaction-scoped advisory lock first, so when several processes start at once on a new
database, one migrates and the others wait for its commit, then find the schema current; a
crash mid-way leaves the old schema (PostgreSQL's DDL is transactional).
"""

from __future__ import annotations

import functools
import logging
import select
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from server.platform.migration import Migrations, bring_up
from server.platform.sql import (
    RELEASED_POSTGRESQL_STEPS,
    Database,
    Dialect,
    Schema,
    Transaction,
    steps_for,
)

__all__ = [
    "MIGRATION_LOCK",
    "PgDatabase",
    "check_idle_connection",
    "is_postgres_url",
    "migrate",
    "open_pool",
    "schema_version",
    "transaction",
]

log = logging.getLogger("pdn.pg")

#: The advisory lock key every pdn migration takes (an arbitrary 64-bit constant, "pdnmigr").
MIGRATION_LOCK = 0x70646E6D69677200

Connection = psycopg.Connection[Any]


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def open_pool(
    url: str, *, name: str, min_size: int = 1, max_size: int = 10, timeout: float = 30.0
) -> ConnectionPool[Connection]:
    """An open pool of autocommit connections (transactions are explicit: :func:`transaction`).

    Waits up to ``timeout`` seconds for the first connection, so a database that is not there
    is an error at start, not at the first request."""
    pool: ConnectionPool[Connection] = ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        name=name,
        kwargs={"autocommit": True, "application_name": f"pdn-{name}"},
        check=check_idle_connection,
        timeout=timeout,
        open=False,
    )
    pool.open(wait=True, timeout=timeout)
    return pool


def check_idle_connection(connection: Connection) -> None:
    """The pool's check at every checkout, without a round trip when nothing is wrong: an
    idle connection has nothing to read, unless the server closed it (a restart, an
    administrator, a lost backend send a notice or EOF first), and only then is it asked
    (``check_connection``: an empty query), raising so the pool replaces it. A server that
    vanished without a word is found by the statement that fails; the pool drops that
    connection when it comes back (its state is then unknown)."""
    if connection.closed:
        raise psycopg.OperationalError("the connection is closed")
    readable, _writable, _broken = select.select([connection.fileno()], [], [], 0)
    if readable:
        ConnectionPool.check_connection(connection)


@contextmanager
def transaction(pool: ConnectionPool[Connection]) -> Iterator[Connection]:
    """A connection from the pool inside BEGIN ... COMMIT, rolled back on any exception."""
    with pool.connection() as connection, connection.transaction():
        yield connection


def schema_version(connection: Connection, component: str) -> int:
    """The version of ``component``'s schema in the database (0 when none is recorded)."""
    exists = connection.execute("SELECT to_regclass('pdn_schema') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return 0
    row = connection.execute(
        "SELECT version FROM pdn_schema WHERE component = %s", (component,)
    ).fetchone()
    return 0 if row is None else int(row[0])


class _ComponentBook:
    """A component's version in ``pdn_schema``, its count in ``pdn_schema_steps`` (see
    :class:`server.platform.migration.VersionBook`)."""

    def __init__(self, connection: Connection, component: str) -> None:
        self._connection = connection
        self._component = component

    def recorded(self) -> int:
        return schema_version(self._connection, self._component)

    def counted(self) -> tuple[int, int] | None:
        exists = self._connection.execute(
            "SELECT to_regclass('pdn_schema_steps') IS NOT NULL"
        ).fetchone()
        if not exists or not exists[0]:
            return None
        row = self._connection.execute(
            "SELECT version, readable_from FROM pdn_schema_steps WHERE component = %s",
            (self._component,),
        ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def count(self, version: int, readable_from: int) -> None:
        self._connection.execute(
            "CREATE TABLE IF NOT EXISTS pdn_schema_steps (component TEXT PRIMARY KEY,"
            " version INTEGER NOT NULL, readable_from INTEGER NOT NULL)"
        )
        self._connection.execute(
            "INSERT INTO pdn_schema_steps (component, version, readable_from) VALUES (%s, %s, %s)"
            " ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version",
            (self._component, version, readable_from),
        )

    def run(self, statement: str) -> None:
        self._connection.execute(statement.encode())

    def record(self, version: int) -> None:
        self._connection.execute(
            "INSERT INTO pdn_schema (component, version) VALUES (%s, %s)"
            " ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version",
            (self._component, version),
        )


def migrate(
    pool: ConnectionPool[Connection],
    migrations: Migrations,
    *,
    component: str,
    legacy: int | None = None,
) -> int:
    """Bring ``component``'s schema to ``len(migrations)``; returns the version it had before.

    One transaction under ``pg_advisory_xact_lock``: processes starting together migrate once.
    ``legacy``: the steps pdn 0.1.0 knows of this schema (see the module's docstring).
    """
    with transaction(pool) as connection:
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        connection.execute(
            "CREATE TABLE IF NOT EXISTS pdn_schema ("
            " component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        book = _ComponentBook(connection, component)
        found, migrated = bring_up(book, migrations, legacy=legacy, name=f"{component}: ")
    if migrated:
        log.info(
            "%s: database schema migrated from version %d to %d",
            component,
            found,
            len(migrations),
        )
    return found


@functools.lru_cache(maxsize=1024)
def _text(sql: str) -> bytes:
    """``server.platform.sql``'s text for psycopg: ``?`` -> ``%s``, a literal ``%`` doubled."""
    return sql.replace("%", "%%").replace("?", "%s").encode()


class PgDatabase(Database):
    """``server.platform.sql``'s :class:`~server.platform.sql.Database` on a pool of autocommit
    connections."""

    dialect: Dialect = "postgresql"

    def __init__(self, pool: ConnectionPool[Connection], *, own_pool: bool = False) -> None:
        """``own_pool``: close the pool in :meth:`close`."""
        self.pool = pool
        self._own_pool = own_pool

    @contextmanager
    def connection(self) -> Iterator[Transaction]:
        with self.pool.connection() as connection:
            yield Transaction(connection, _text)

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        with self.pool.connection() as connection, connection.transaction():
            yield Transaction(connection, _text)

    def joined(self, connection: Any) -> Transaction:
        if not isinstance(connection, psycopg.Connection):
            raise TypeError(f"not a PostgreSQL connection: {connection!r}")
        return Transaction(connection, _text)

    def migrate(self, schema: Schema, component: str, *, own_file: bool = False) -> int:
        return migrate(
            self.pool,
            steps_for(schema, self.dialect),
            component=component,
            legacy=RELEASED_POSTGRESQL_STEPS.get(component),
        )

    def close(self) -> None:
        if self._own_pool:
            self.pool.close()

    def next_number(self, table: str, column: str) -> str:
        """The column's default, its sequence (``BIGSERIAL``): processes inserting at once
        get different numbers."""
        return "DEFAULT"

    # LISTEN/NOTIFY

    def notify(self, transaction: Transaction, channel: str, payload: str) -> None:
        """PostgreSQL delivers it to every listener when (and only if) the transaction
        commits."""
        transaction.execute("SELECT pg_notify(?, ?)", (channel, payload))

    def listen(
        self, channel: str, heard: Callable[[str | None], None], *, name: str
    ) -> Callable[[], None]:
        """LISTEN on a connection of its own, in a thread; a lost connection is opened again
        (and ``heard(None)`` said: what was sent meanwhile is unknown)."""
        stop = threading.Event()
        thread = threading.Thread(
            target=self._listen, args=(channel, heard, stop), name=name, daemon=True
        )
        thread.start()

        def stop_listening() -> None:
            stop.set()
            thread.join(timeout=5)

        return stop_listening

    def _listen(
        self, channel: str, heard: Callable[[str | None], None], stop: threading.Event
    ) -> None:
        first = True
        while not stop.is_set():
            conninfo = self.pool.conninfo
            try:
                with psycopg.connect(
                    conninfo() if callable(conninfo) else conninfo,
                    autocommit=True,
                    application_name=f"pdn-{channel}",
                ) as connection:
                    connection.execute(f"LISTEN {channel}".encode())
                    if not first:
                        heard(None)  # what was sent while not listening is unknown
                    first = False
                    while not stop.is_set():
                        for notification in connection.notifies(timeout=0.5):
                            heard(notification.payload)
            except Exception as error:  # the database went away: listen again when it is back
                if stop.is_set():
                    return
                log.warning("listening on %s failed (%s); retrying", channel, error)
                stop.wait(1.0)

    # Advisory locks

    def lock(self, transaction: Transaction, key: str) -> None:
        """``pg_advisory_xact_lock`` on the key's hash: held until the transaction ends."""
        transaction.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (key,))
