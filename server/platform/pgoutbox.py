"""The webhook outbox on PostgreSQL, shared by several processes (the scheduler, ``--database
postgresql://...``): :class:`PgOutbox` is ``server.platform.outbox.Outbox`` (read its docstring
first: the same tables, statements and delivery rules) with :class:`LeasedClaims`, this database's
way of dividing the deliveries between processes.

Usage::

    pool = server.platform.pg.open_pool(url, name="scheduler")
    outbox = PgOutbox(pool, name="scheduler")             # creates or upgrades its tables
    outbox.start()
    outbox.subscribe("schedule:lobby", uri)
    with server.platform.pg.transaction(pool) as connection:      # the caller's own transaction
        connection.execute("UPDATE ...")
        outbox.publish("schedule:lobby", body, "text/xml", connection=connection)
    outbox.notify()                                       # optional: PostgreSQL wakes them all

What differs from one process on SQLite, and why:

- **Exactly once in total, across processes.** A subscriber's events are delivered by one
  process at a time: a process *claims* the subscriber (its row in ``pdn_outbox_subscriptions``:
  ``owner`` and ``lease_until``) with ``SELECT ... FOR UPDATE SKIP LOCKED``, so processes
  claiming together take disjoint subscribers and never wait for each other, then delivers that
  subscriber's events in order, deleting each after its 2xx. While it works it renews its
  leases (every third of ``lease``). A process killed with ``kill -9`` renews nothing: when its
  leases run out (``lease``, 30 s by default) the others take its subscribers over and deliver
  what it had not: the event it had in flight is sent again with the same ``X-PDN-Event-Id``
  (it was never acknowledged, or its 2xx came back but the delete never committed; receivers
  de-duplicate by that id: docs/interface.md, "Pushed updates"). No event is ever sent by two
  live processes.
- **Fast for thousands of subscribers.** Claims, acknowledgements, failures and re-reads are
  one statement per batch (``server.platform.delivery.Batcher``), each over arrays of subscribers.
- **Wake-ups through LISTEN/NOTIFY.** ``publish`` runs ``NOTIFY pdn_outbox`` in the publishing
  transaction, which PostgreSQL delivers to every listening process when (and only if) that
  transaction commits; each delivery loop LISTENs on a connection of its own. The loop also
  looks once every half ``lease`` for leases that ran out (a process that died notifies nobody).
- Times are the database's (``now()``), so processes on machines whose clocks differ agree.

Releasing a claim and publishing need no lock between them: a release decides "nothing left"
on its statement's snapshot, so an event committed meanwhile may see its subscriber released
by a statement that did not see it. The releasing process therefore claims again after every
release (its next snapshot sees both), and a publisher that commits after the release is
followed by its NOTIFY, which wakes every process to claim.

``stats()`` reports the whole database's subscriptions and pending events, and this process's
delivered, dropped and expired counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Collection
from datetime import timedelta
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from server.platform.delivery import Failure, Head, Settings, head_of
from server.platform.outbox import CHANNEL, TIMEOUT, Outbox
from server.platform.pg import Connection, PgDatabase

__all__ = ["LEASE", "LeasedClaims", "PgOutbox"]

log = logging.getLogger("pdn.outbox")

LEASE = 30.0

# A subscriber's oldest pending event, for the lateral joins below ({sub}: the subscriber's id
# column; {skip}: an event to pass over, the one just acknowledged, whose delete the statement's
# own snapshot does not see yet).
_HEAD = (
    "LEFT JOIN LATERAL (SELECT e.id, e.event_id, e.topic, e.body, e.content_type,"
    " (SELECT ss.signing_secret FROM pdn_outbox_subscriptions ss WHERE ss.id = {sub})"
    " AS signing_secret"
    " FROM pdn_outbox_events e WHERE e.subscription_id = {sub}{skip}"
    " ORDER BY e.id LIMIT 1) h ON true"
)

CLAIM = (
    "WITH free AS (SELECT s.id FROM pdn_outbox_subscriptions s"
    " WHERE (s.owner IS NULL OR s.lease_until < now())"
    " AND EXISTS (SELECT 1 FROM pdn_outbox_events e WHERE e.subscription_id = s.id)"
    " ORDER BY s.id LIMIT %(limit)s FOR UPDATE SKIP LOCKED),"
    " claimed AS (UPDATE pdn_outbox_subscriptions s"
    " SET owner = %(worker)s, lease_until = now() + %(lease)s FROM free WHERE s.id = free.id"
    " RETURNING s.id, s.uri, s.attempts, s.next_attempt, s.first_failure)"
    " SELECT c.id, c.uri, c.attempts, EXTRACT(EPOCH FROM c.next_attempt - now()),"
    " EXTRACT(EPOCH FROM now() - c.first_failure),"
    " h.id, h.event_id, h.topic, h.body, h.content_type, h.signing_secret FROM claimed c "
    + _HEAD.format(sub="c.id", skip="")
    + " ORDER BY c.id"
)

ACKNOWLEDGE = (
    "WITH done(sub, row) AS (SELECT * FROM unnest(%(subs)s::bigint[], %(rows)s::bigint[])),"
    " acked AS (DELETE FROM pdn_outbox_events e USING done WHERE e.id = done.row),"
    " following AS (SELECT done.sub, h.id, h.event_id, h.topic, h.body, h.content_type,"
    " h.signing_secret"
    " FROM done " + _HEAD.format(sub="done.sub", skip=" AND e.id <> done.row") + "),"
    " kept AS (UPDATE pdn_outbox_subscriptions s SET attempts = 0, next_attempt = NULL,"
    " first_failure = NULL, last_error = NULL,"
    " owner = CASE WHEN f.id IS NULL THEN NULL ELSE s.owner END,"
    " lease_until = CASE WHEN f.id IS NULL THEN NULL ELSE now() + %(lease)s END"
    " FROM following f WHERE s.id = f.sub AND s.owner = %(worker)s RETURNING s.id, s.uri)"
    " SELECT k.id, k.uri, f.id, f.event_id, f.topic, f.body, f.content_type, f.signing_secret"
    " FROM kept k JOIN following f ON f.sub = k.id"
)

FAIL = (
    "WITH f(sub, attempts, delay, error) AS (SELECT * FROM unnest(%(subs)s::bigint[],"
    " %(attempts)s::int[], %(delays)s::float8[], %(errors)s::text[])),"
    " expired AS (DELETE FROM pdn_outbox_subscriptions s USING f"
    " WHERE s.id = f.sub AND s.owner = %(worker)s AND s.first_failure <= now() - %(give_up)s"
    " RETURNING s.id, s.topic, EXTRACT(EPOCH FROM now() - s.first_failure) AS failed_for),"
    " waiting AS (UPDATE pdn_outbox_subscriptions s SET attempts = f.attempts,"
    " next_attempt = now() + make_interval(secs => f.delay),"
    " first_failure = COALESCE(s.first_failure, now()), last_error = f.error,"
    " lease_until = now() + %(lease)s FROM f WHERE s.id = f.sub AND s.owner = %(worker)s"
    " AND (s.first_failure IS NULL OR s.first_failure > now() - %(give_up)s) RETURNING s.id)"
    " SELECT id, topic, failed_for FROM expired"
    " UNION ALL SELECT id, NULL::text, NULL::numeric FROM waiting"
)

REREAD = (
    "WITH owned AS (SELECT s.id, s.uri, s.attempts,"
    " EXTRACT(EPOCH FROM s.next_attempt - now()) AS wait,"
    " EXTRACT(EPOCH FROM now() - s.first_failure) AS failing,"
    " h.id AS row, h.event_id, h.topic, h.body, h.content_type, h.signing_secret"
    " FROM pdn_outbox_subscriptions s " + _HEAD.format(sub="s.id", skip="") + ""
    " WHERE s.id = ANY(%(subs)s) AND s.owner = %(worker)s),"
    " released AS (UPDATE pdn_outbox_subscriptions s SET owner = NULL, lease_until = NULL"
    " FROM owned o WHERE s.id = o.id AND o.row IS NULL AND s.owner = %(worker)s)"
    " SELECT * FROM owned"
)


# Renewal skips rows a batch statement has locked (that statement renews or ends their claim):
# it never waits for a batch, so the two can never deadlock (each locks rows in its own order).
RENEW = (
    "WITH renewable AS (SELECT id FROM pdn_outbox_subscriptions"
    " WHERE owner = %(worker)s AND id = ANY(%(subs)s) FOR UPDATE SKIP LOCKED),"
    " renewed AS (UPDATE pdn_outbox_subscriptions s SET lease_until = now() + %(lease)s"
    " FROM renewable r WHERE s.id = r.id)"
    " SELECT id FROM pdn_outbox_subscriptions WHERE owner = %(worker)s"
)

RELEASE = (
    "WITH released AS (UPDATE pdn_outbox_subscriptions SET owner = NULL, lease_until = NULL"
    " WHERE owner = %(worker)s) SELECT pg_notify(%(channel)s, '')"
)


class LeasedClaims:
    """Claims of one of several processes on one PostgreSQL: ``FOR UPDATE SKIP LOCKED`` takes
    subscribers nobody holds (or whose holder's lease ran out), each held by this process's
    ``worker`` name until its lease runs out; statements over arrays, one per batch."""

    errors: tuple[type[Exception], ...] = (psycopg.Error,)
    transient: tuple[type[Exception], ...] = (
        psycopg.errors.DeadlockDetected,
        psycopg.errors.SerializationFailure,
    )
    oldest_age = "EXTRACT(EPOCH FROM now() - MIN(created))"

    def __init__(self, url: str, *, lease: float = LEASE, pool_size: int = 6) -> None:
        """``pool_size``: the delivery loop's database connections (claims, and one per kind
        of batch)."""
        self.url = url
        self.lease = lease
        self.poll = lease / 2  # leases that ran out: a process that died notifies nobody
        self.pool_size = pool_size
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._lease = timedelta(seconds=lease)
        self._give_up = timedelta(0)
        self._name = "outbox"
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None

    async def open(self, outbox: Settings) -> None:
        self._name = outbox.name
        self._give_up = timedelta(seconds=outbox.give_up_after)
        self._pool = AsyncConnectionPool(
            self.url,
            min_size=1,
            max_size=self.pool_size,
            kwargs={"autocommit": True, "application_name": f"pdn-{outbox.name}-delivery"},
            name=f"{outbox.name}-delivery",
            open=False,
        )
        await self._pool.open(wait=True, timeout=30)

    async def close(self) -> None:
        """Let go of this process's claims (the NOTIFY tells the others to take them)."""
        if self._pool is None:
            return
        with contextlib.suppress(psycopg.Error):  # else the leases run out
            await self._rows(RELEASE, channel=CHANNEL)
        await self._pool.close()

    async def _rows(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        assert self._pool is not None, "open() first"
        async with self._pool.connection() as connection:
            cursor = await connection.execute(
                sql, {"worker": self.worker, "lease": self._lease, **params}
            )
            return await cursor.fetchall() if cursor.description else []

    async def claim(self, limit: int, working: Collection[int] = ()) -> list[Head]:
        """``working``: this process's own lanes hold their subscribers by lease already."""
        return [head_of(row) for row in await self._rows(CLAIM, limit=limit)]

    async def acknowledge(self, done: list[tuple[int, int]]) -> list[Head | None]:
        rows = await self._rows(
            ACKNOWLEDGE, subs=[sub for sub, _ in done], rows=[row for _, row in done]
        )
        following = {
            int(sub): head_of(
                (sub, uri, 0, 0.0, None, row, event_id, topic, body, content_type, secret)
            )
            for sub, uri, row, event_id, topic, body, content_type, secret in rows
        }
        return [following.get(sub) for sub, _ in done]

    async def fail(self, failures: list[Failure]) -> list[tuple[str, float | None]]:
        rows = await self._rows(
            FAIL,
            subs=[f.subscription for f in failures],
            attempts=[f.attempts for f in failures],
            delays=[f.delay for f in failures],
            errors=[f.error for f in failures],
            give_up=self._give_up,
        )
        outcomes: dict[int, tuple[str, float | None]] = {
            int(sub): ("waiting", None) if topic is None else ("expired", float(failed_for))
            for sub, topic, failed_for in rows
        }
        return [outcomes.get(f.subscription, ("lost", None)) for f in failures]

    async def reread(self, subscriptions: list[int]) -> list[Head | None]:
        heads = {
            h.subscription: h for h in map(head_of, await self._rows(REREAD, subs=subscriptions))
        }
        return [heads.get(sub) for sub in subscriptions]

    async def renew(self, subscriptions: list[int]) -> set[int]:
        return {int(sid) for (sid,) in await self._rows(RENEW, subs=subscriptions)}

    async def listen(self, wake: asyncio.Event) -> None:
        """LISTEN on a connection of its own; every NOTIFY (or a lost connection) wakes."""
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, application_name=f"pdn-{self._name}-listen"
                ) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}".encode())
                    wake.set()  # anything published while not listening
                    async for _ in connection.notifies():
                        wake.set()
            except psycopg.Error as error:
                log.warning("%s: LISTEN connection lost: %s", self._name, error)
                wake.set()
                await asyncio.sleep(1.0)


class PgOutbox(Outbox):
    """``server.platform.outbox.Outbox`` in PostgreSQL, delivered by every process that ``start()``s
    one, each event by exactly one of them (:class:`LeasedClaims`)."""

    def __init__(
        self,
        pool: ConnectionPool[Connection],
        *,
        name: str,
        lease: float = LEASE,
        delivery_pool_size: int = 6,
        **options: Any,
    ) -> None:
        """``options``: ``server.platform.outbox.Outbox``'s. ``lease``: how long a claim lasts
        unless renewed; it must outlast a POST (``timeout``) by a margin, a live owner keeps
        renewing it. ``delivery_pool_size``: the delivery loop's database connections."""
        self.pool = pool
        lease = max(lease, float(options.get("timeout", TIMEOUT)) + 1.0)
        claims = LeasedClaims(str(pool.conninfo), lease=lease, pool_size=delivery_pool_size)
        super().__init__(PgDatabase(pool), name=name, claims=claims, **options)
