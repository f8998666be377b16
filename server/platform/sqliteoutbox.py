"""The outbox's claims on a SQLite file: the one process that delivers from the file claims
every subscriber with pending events that none of its lanes works on (``server.platform.outbox``
is the outbox, ``server.platform.delivery`` the delivery core, ``server.platform.pgoutbox`` the
claims of several processes on one PostgreSQL).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from server.platform.delivery import Failure, Head, Settings, head_of
from server.platform.sql import SqliteDatabase, Transaction

__all__ = ["GIVE_UP_AFTER", "POLL_INTERVAL", "SQLITE_NOW", "SingleProcessClaims"]

GIVE_UP_AFTER = 24 * 3600.0  # the default of server.platform.limits' subscriber_expiry
POLL_INTERVAL = 2.0  # a publish that joined a caller's transaction is seen this soon
# SQLite's clock in epoch seconds (the outbox's times are REAL there, TIMESTAMPTZ on PostgreSQL).
SQLITE_NOW = "((julianday('now') - 2440587.5) * 86400.0)"


#: A subscriber, its back-off and its oldest event: the columns of server.platform.delivery.head_of.
_HEADS = (
    "SELECT s.id, s.uri, s.attempts, s.next_attempt - ?, ? - s.first_failure,"
    " e.id, e.event_id, e.topic, e.body, e.content_type, s.signing_secret"
    " FROM pdn_outbox_subscriptions s LEFT JOIN pdn_outbox_events e ON e.id ="
    " (SELECT MIN(id) FROM pdn_outbox_events WHERE subscription_id = s.id)"
)


class SingleProcessClaims:
    """The claims of the one process delivering from a SQLite file: every subscriber with
    pending events that none of its lanes works on. Nothing runs out (no lease), nobody else
    publishes (a publish here wakes the loop; one that joined a caller's transaction and was
    not followed by ``notify()`` is seen within :data:`POLL_INTERVAL`). Times are epoch
    seconds of this machine's clock. Its own connection: ``synchronous=NORMAL`` (see
    ``server.platform.outbox``)."""

    errors: tuple[type[Exception], ...] = (sqlite3.Error,)
    transient: tuple[type[Exception], ...] = ()
    poll = POLL_INTERVAL
    lease = None
    #: SQL: seconds since the oldest pending event was queued (for Outbox.stats).
    oldest_age = f"{SQLITE_NOW} - MIN(created)"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._give_up_after = GIVE_UP_AFTER
        self._db: SqliteDatabase | None = None

    def _database(self) -> SqliteDatabase:
        assert self._db is not None, "open() first"
        return self._db

    async def open(self, outbox: Settings) -> None:
        self._give_up_after = outbox.give_up_after
        self._db = SqliteDatabase(self.path, synchronous="NORMAL")

    async def close(self) -> None:
        self._database().close()

    def _heads(self, transaction: Transaction, where: str, params: tuple[Any, ...]) -> list[Head]:
        now = time.time()
        return [head_of(row) for row in transaction.rows(f"{_HEADS} {where}", (now, now, *params))]

    async def claim(self, limit: int, working: Collection[int] = ()) -> list[Head]:
        with self._database().connection() as connection:
            return self._heads(
                connection,
                "WHERE e.id IS NOT NULL AND s.id NOT IN (SELECT value FROM json_each(?))"
                " ORDER BY s.id LIMIT ?",
                (json.dumps(list(working)), limit),
            )

    def _following(self, transaction: Transaction, subscriptions: list[int]) -> list[Head | None]:
        found = {
            h.subscription: h
            for h in self._heads(
                transaction,
                "WHERE s.id IN (SELECT value FROM json_each(?))",
                (json.dumps(subscriptions),),
            )
        }
        return [found.get(sub) for sub in subscriptions]

    async def acknowledge(self, done: list[tuple[int, int]]) -> list[Head | None]:
        with self._database().transaction() as transaction:
            transaction.executemany(
                "DELETE FROM pdn_outbox_events WHERE id = ?", [(row,) for _sub, row in done]
            )
            transaction.executemany(
                "UPDATE pdn_outbox_subscriptions SET attempts = 0, next_attempt = NULL,"
                " first_failure = NULL, last_error = NULL WHERE id = ? AND attempts > 0",
                [(sub,) for sub, _row in done],
            )
            return self._following(transaction, [sub for sub, _row in done])

    async def fail(self, failures: list[Failure]) -> list[tuple[str, float | None]]:
        now = time.time()
        outcomes: list[tuple[str, float | None]] = []
        with self._database().transaction() as transaction:
            for failure in failures:
                row = transaction.row(
                    "SELECT first_failure FROM pdn_outbox_subscriptions WHERE id = ?",
                    (failure.subscription,),
                )
                if row is None:
                    outcomes.append(("lost", None))
                elif row[0] is not None and now - row[0] >= self._give_up_after:
                    transaction.execute(
                        "DELETE FROM pdn_outbox_events WHERE subscription_id = ?",
                        (failure.subscription,),
                    )
                    transaction.execute(
                        "DELETE FROM pdn_outbox_subscriptions WHERE id = ?",
                        (failure.subscription,),
                    )
                    outcomes.append(("expired", now - row[0]))
                else:
                    transaction.execute(
                        "UPDATE pdn_outbox_subscriptions SET attempts = ?, next_attempt = ?,"
                        " first_failure = COALESCE(first_failure, ?), last_error = ?"
                        " WHERE id = ?",
                        (failure.attempts, now + failure.delay, now, failure.error,
                         failure.subscription),
                    )  # fmt: skip
                    outcomes.append(("waiting", None))
        return outcomes

    async def reread(self, subscriptions: list[int]) -> list[Head | None]:
        with self._database().connection() as connection:
            return self._following(connection, subscriptions)

    async def renew(self, subscriptions: list[int]) -> set[int]:
        return set(subscriptions)  # nothing runs out

    async def listen(self, wake: asyncio.Event) -> None:
        """Nobody else publishes to this file."""
