"""One SQL text on SQLite or PostgreSQL: the thin layer the scheduler's storage and the webhook
outbox run on, so each query is written once.

Statements are written in the SQL both databases understand (SQLite 3.35 or newer: ``INSERT ...
ON CONFLICT``, ``RETURNING``, window functions), with ``?`` for each parameter; on PostgreSQL
each ``?`` becomes psycopg's ``%s`` (translated once per text, so no ``?`` may stand inside a
string literal). Types that differ in a table's definition are written ``{real}``, ``{blob}``,
``{bool}``, ``{bigint}`` and ``{serial}`` (an integer primary key that counts up) and filled in
per database (:data:`TYPES`).

A :class:`Database` runs a statement on its own (autocommit) or several in
:meth:`Database.transaction`; :class:`SqliteDatabase` is one file, one connection behind a lock
(``server.platform.db``'s settings), ``server.platform.pg.PgDatabase`` a connection pool. What only
PostgreSQL does (LISTEN/NOTIFY, advisory locks, ``FOR UPDATE SKIP LOCKED`` claims) is not here: the
database's :meth:`~Database.notify` and :meth:`~Database.listen` do nothing on SQLite (one process:
there is nobody to tell) and are ``server.platform.pg``'s on PostgreSQL.

Migrations (:meth:`Database.migrate`): a schema is one ordered list of steps, each a list of
statements for both databases, or for one of them (:func:`only`): the scheduler's two kinds of
database were made by different histories before this layer (SQLite in 7 steps, PostgreSQL in
6) and each keeps counting the steps it ran, so existing databases open unchanged. A step added
from now on is written once, for both.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from server.platform.db import Synchronous, connect, migrate, transaction

__all__ = [
    "TYPES",
    "Database",
    "Dialect",
    "Schema",
    "SqliteDatabase",
    "Transaction",
    "only",
]

Dialect = Literal["sqlite", "postgresql"]

#: The SQLite steps of each component that the first release to have it knew (pdn 0.1.0; the
#: scheduler's proof_of_play came with 0.2.0): the version that release reads stays there, and a
#: later release's additive steps open after a rollback (server.platform.db). Constant: a
#: component's entry never changes once released.
RELEASED_SQLITE_STEPS = {"scheduler": 7, "outbox": 2, "proof_of_play": 1}
#: And on PostgreSQL (server.platform.pg).
RELEASED_POSTGRESQL_STEPS = {"scheduler": 6, "outbox": 2, "proof_of_play": 1}
Params = Sequence[Any]

#: The column types that are written differently, by database.
TYPES: dict[Dialect, dict[str, str]] = {
    "sqlite": {
        "real": "REAL",
        "blob": "BLOB",
        "bool": "INTEGER",
        "bigint": "INTEGER",
        "serial": "INTEGER PRIMARY KEY AUTOINCREMENT",
    },
    "postgresql": {
        "real": "DOUBLE PRECISION",
        "blob": "BYTEA",
        "bool": "BOOLEAN",
        "bigint": "BIGINT",
        "serial": "BIGSERIAL PRIMARY KEY",
    },
}


@dataclass(frozen=True)
class Only:
    """A migration step for one kind of database (see the module's docstring)."""

    dialect: Dialect
    statements: tuple[str, ...]


def only(dialect: Dialect, *statements: str) -> Only:
    return Only(dialect, statements)


#: ``Schema[n]``: the statements of step n + 1, for both databases (a sequence) or for one (Only).
Schema = Sequence[Sequence[str] | Only]


def steps_for(schema: Schema, dialect: Dialect) -> list[list[str]]:
    """The steps one kind of database runs, its types filled in."""
    steps = [
        step.statements if isinstance(step, Only) else step
        for step in schema
        if not isinstance(step, Only) or step.dialect == dialect
    ]
    return [[statement.format(**TYPES[dialect]) for statement in step] for step in steps]


class Transaction:
    """Statements on one connection: inside a transaction, or alone (autocommit)."""

    def __init__(self, connection: Any, text: Callable[[str], Any]) -> None:
        #: The driver's own connection (``sqlite3`` or psycopg): what another part of pdn joins.
        self.connection = connection
        self._text = text

    def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; how many rows it changed."""
        return int(self.connection.execute(self._text(sql), params).rowcount)

    def rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        return list(self.connection.execute(self._text(sql), params).fetchall())

    def row(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        """The first row, or None. Every row is read: a statement with ``RETURNING`` is over
        (SQLite cannot commit while one is still being stepped)."""
        found = self.connection.execute(self._text(sql), params).fetchall()
        return tuple(found[0]) if found else None

    def executemany(self, sql: str, params: Sequence[Params]) -> None:
        if not params:
            return
        cursor = self.connection.cursor()
        try:
            cursor.executemany(self._text(sql), params)
        finally:
            cursor.close()


class Database:
    """One database, SQLite or PostgreSQL; safe to use from any thread."""

    dialect: Dialect

    def connection(self) -> AbstractContextManager[Transaction]:
        """A connection for statements that each commit on their own."""
        raise NotImplementedError

    def transaction(self) -> AbstractContextManager[Transaction]:
        """BEGIN ... COMMIT, rolled back on any exception."""
        raise NotImplementedError

    def joined(self, connection: Any) -> Transaction:
        """Statements on a caller's own connection to this database, inside the caller's
        transaction (the caller commits)."""
        raise NotImplementedError

    def migrate(self, schema: Schema, component: str, *, own_file: bool = False) -> int:
        """Bring ``component``'s tables to the newest step; returns the version they had.
        ``own_file``: on SQLite the version is the file's ``PRAGMA user_version`` (the file is
        the component's), else a one-row table ``<component>_schema`` (the outbox's tables
        share the display's file)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # One statement, alone.

    def execute(self, sql: str, params: Params = ()) -> int:
        with self.connection() as connection:
            return connection.execute(sql, params)

    def rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        with self.connection() as connection:
            return connection.rows(sql, params)

    def row(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        with self.connection() as connection:
            return connection.row(sql, params)

    # What only PostgreSQL does (server.platform.pg); nothing on SQLite, where one process runs.

    def next_number(self, table: str, column: str) -> str:
        """What an INSERT's VALUES gives ``column``: its next number (a counting order, not a
        key; SQLite: one more than the largest, one process counts)."""
        return f"(SELECT COALESCE(MAX({column}), 0) + 1 FROM {table})"

    def notify(self, transaction: Transaction, channel: str, payload: str) -> None:
        """Tell every process listening on ``channel`` when ``transaction`` commits."""

    def listen(
        self, channel: str, heard: Callable[[str | None], None], *, name: str
    ) -> Callable[[], None]:
        """Call ``heard(payload)`` for every notification on ``channel`` (``None``: some may
        have been missed, the connection was lost); returns a function that stops listening."""
        return lambda: None

    def lock(self, transaction: Transaction, key: str) -> None:
        """Hold ``key`` until ``transaction`` ends: one transaction at a time for a key.
        SQLite's transactions take the whole file already."""


def _same(sql: str) -> str:
    return sql


class SqliteDatabase(Database):
    """One SQLite file (WAL), one connection guarded by a lock (``server.platform.db.connect``)."""

    dialect: Dialect = "sqlite"

    def __init__(
        self, path: Path, *, synchronous: Synchronous = "FULL", busy_timeout: float = 10.0
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._connection = connect(path, synchronous=synchronous, busy_timeout=busy_timeout)

    @contextmanager
    def connection(self) -> Iterator[Transaction]:
        with self._lock:
            yield Transaction(self._connection, _same)

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        with self._lock, transaction(self._connection):
            yield Transaction(self._connection, _same)

    def joined(self, connection: Any) -> Transaction:
        if not isinstance(connection, sqlite3.Connection):
            raise TypeError(f"not a connection to {self.path}: {connection!r}")
        return Transaction(connection, _same)

    def migrate(self, schema: Schema, component: str, *, own_file: bool = False) -> int:
        table = None if own_file else f"{component}_schema"
        with self._lock:
            return migrate(
                self._connection,
                steps_for(schema, self.dialect),
                version_table=table,
                legacy=RELEASED_SQLITE_STEPS.get(component),
            )

    def close(self) -> None:
        with self._lock:
            self._connection.close()
