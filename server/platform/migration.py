"""Schema migrations, decided once for both databases: which steps a schema lacks, whether a
schema from a newer pdn may be used as it is, and which version to record.

A schema is an ordered list of steps, each a list of SQL statements; step *n* takes it from
version *n* to *n + 1*. Steps are forward-only and additive: new tables, indexes and columns
that may be NULL or have a default, never a table or column dropped, renamed or retyped; so
the release before reads a schema the new one migrated, and a release rolled back to keeps
its data. pdn 0.1.0 refuses a version it does not know: for it the recorded version stays at
the steps it knows (``legacy``, per schema) and the steps after are counted apart, with the
steps a reader must know (``readable_from``); a schema whose reader needs more is refused
(:class:`SchemaTooNewError`).

Where the version lives differs, and is a :class:`VersionBook`: ``PRAGMA user_version`` or a
table of its own on SQLite (``server.platform.db``), a row of ``pdn_schema`` on PostgreSQL
(``server.platform.pg``). Each opens the transaction and takes the lock; :func:`bring_up`
decides inside it.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from typing import Protocol

__all__ = ["Migrations", "SchemaTooNewError", "VersionBook", "bring_up", "missing_statements"]

log = logging.getLogger("pdn.db")

#: ``MIGRATIONS[n]`` holds the statements that take a schema from version n to n + 1.
Migrations = Sequence[Sequence[str]]


class SchemaTooNewError(sqlite3.DatabaseError):
    """The schema is newer than the migrations this pdn knows."""

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(f"schema version {found} is newer than this pdn's ({supported})")
        self.found = found
        self.supported = supported


class VersionBook(Protocol):
    """One schema's version where a database keeps it, inside an open write transaction."""

    def recorded(self) -> int:
        """The version recorded for pdn 0.1.0 (0 when none is)."""

    def counted(self) -> tuple[int, int] | None:
        """(version, readable_from) counted beyond 0.1.0's, None when nothing is."""

    def count(self, version: int, readable_from: int) -> None:
        """Record the full count of steps, and the steps a reader must know."""

    def run(self, statement: str) -> None:
        """Run one statement of a step."""

    def record(self, version: int) -> None:
        """Record the version pdn 0.1.0 reads."""


def missing_statements(migrations: Migrations, found: int) -> list[str]:
    """The statements that take a schema from version ``found`` to the newest, in order
    (none: it is current); SchemaTooNewError for a schema from a newer pdn."""
    if found > len(migrations):
        raise SchemaTooNewError(found, len(migrations))
    return [statement for step in migrations[found:] for statement in step]


def bring_up(
    book: VersionBook, migrations: Migrations, *, legacy: int | None, name: str = ""
) -> tuple[int, bool]:
    """Bring the schema in ``book`` to ``len(migrations)``: (the version it had, whether steps
    ran). With ``legacy`` (the steps pdn 0.1.0 knows of this schema), the recorded version
    stays at most ``legacy`` and the full count is kept apart. A schema from a newer pdn is
    used as it is, unless its count says a reader must know more (SchemaTooNewError).
    ``name`` prefixes the log lines."""
    target = len(migrations)
    counted = book.recorded()
    steps = book.counted() if legacy is not None else None
    found = max(counted, steps[0]) if steps is not None else counted
    if found > target:
        if steps is None or steps[1] > target:
            raise SchemaTooNewError(found, target)
        log.info(
            "%sdatabase schema version %d is newer than this pdn's (%d): used as it is"
            " (its steps are additive)",
            name,
            found,
            target,
        )
        return found, False
    missing = missing_statements(migrations, found)
    if not missing:
        if legacy is not None and steps is None:
            book.count(target, legacy)  # every database alike
        return found, False
    for statement in missing:
        book.run(statement)
    # The version pdn 0.1.0 reads: what it knows, never lowered (a schema that an unreleased
    # pdn took past it stays refused by 0.1.0).
    book.record(target if legacy is None else max(counted, min(target, legacy)))
    if legacy is not None:
        book.count(target, legacy)
    return found, True
