"""The one way pdn opens PostgreSQL: a connection pool, explicit transactions, versioned schema
migrations applied at start (the PostgreSQL counterpart of ``server.db``).

Used by the scheduler when it runs on PostgreSQL (``pdn scheduler --database postgresql://...``)
and by its outbox (``server.pgoutbox``). Needs the ``postgres`` extra (psycopg 3 and
psycopg_pool): ``pip install '.[postgres]'``.

Usage::

    pool = open_pool("postgresql://pdn@db.example/pdn", name="scheduler")
    migrate(pool, MIGRATIONS, component="scheduler")       # safe when several start at once
    with transaction(pool) as connection:
        connection.execute("UPDATE ...")
    pool.close()

Migrations: as in ``server.db``, ``MIGRATIONS[n]`` takes a schema from version n to n + 1. Every
component (the scheduler's tables, the outbox's) keeps its version in one row of
``pdn_schema``. :func:`migrate` takes a transaction-scoped advisory lock first, so when several
processes start at once on a new database, one migrates and the others wait for its commit,
then find the schema current; a crash mid-way leaves the old schema (PostgreSQL's DDL is
transactional). A database from a newer pdn is refused (``server.db.SchemaTooNewError``).
"""

from __future__ import annotations

import logging
import select
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from server.db import Migrations, SchemaTooNewError

__all__ = [
    "MIGRATION_LOCK",
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


def migrate(pool: ConnectionPool[Connection], migrations: Migrations, *, component: str) -> int:
    """Bring ``component``'s schema to ``len(migrations)``; returns the version it had before.

    One transaction under ``pg_advisory_xact_lock``: processes starting together migrate once.
    """
    target = len(migrations)
    with transaction(pool) as connection:
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        connection.execute(
            "CREATE TABLE IF NOT EXISTS pdn_schema ("
            " component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        found = schema_version(connection, component)
        if found > target:
            raise SchemaTooNewError(found, target)
        if found == target:
            return found
        for step in migrations[found:]:
            for statement in step:
                connection.execute(statement.encode())
        connection.execute(
            "INSERT INTO pdn_schema (component, version) VALUES (%s, %s)"
            " ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version",
            (component, target),
        )
    log.info("%s: database schema migrated from version %d to %d", component, found, target)
    return found
