"""The webhook outbox on PostgreSQL, shared by several processes: the same interface and the
same delivery rules as ``server.outbox.Outbox`` (read its docstring first), for a segment that
runs as several processes on one database (the scheduler, ``--database postgresql://...``).

Usage::

    pool = server.pg.open_pool(url, name="scheduler")
    outbox = PgOutbox(pool, name="scheduler")             # creates or upgrades its tables
    outbox.start()
    outbox.subscribe("schedule:lobby", uri)
    with server.pg.transaction(pool) as connection:      # the caller's own transaction
        connection.execute("UPDATE ...")
        outbox.publish("schedule:lobby", body, "text/xml", connection=connection)
    outbox.notify()                                       # optional: PostgreSQL wakes them all

What differs from the SQLite outbox, and why:

- **Exactly once in total, across processes.** A subscriber's events are delivered by one
  process at a time: a process *claims* the subscriber (its row in ``pdn_outbox_subscriptions``:
  ``owner`` and ``lease_until``) with ``SELECT ... FOR UPDATE SKIP LOCKED``, so processes
  claiming together take disjoint subscribers and never wait for each other, then delivers that
  subscriber's events in order, deleting each after its 2xx. While it works it renews its
  leases (every third of ``lease``). A process killed with ``kill -9`` renews nothing: when its
  leases run out (``lease``, 30 s by default) the others take its subscribers over and deliver
  what it had not: the event it had in flight is sent again with the same ``X-PDN-Event-Id``
  (it was never acknowledged, or its 2xx came back but the delete never committed; receivers
  de-duplicate by that id, as INTERFACE.md asks). No event is ever sent by two live processes:
  at-least-once, with a duplicate only when a process dies between a 2xx and the batch that
  records it (``server.pgdelivery`` says how claims, POSTs and acknowledgements are batched).
- **Fast for thousands of subscribers.** ``publish`` is one ``INSERT ... SELECT`` over the
  topic's subscriptions; delivery claims subscribers with their first event in batches and
  acknowledges in batches (``server.pgdelivery``), and POSTs with ``server.webhookpost`` rather
  than httpx (a tenth of the CPU per POST). Failing subscribers have their own share of the
  POSTs in flight, so dead or silent receivers never hold up live ones.
- **Wake-ups through LISTEN/NOTIFY.** ``publish`` runs ``NOTIFY pdn_outbox`` in the publishing
  transaction, which PostgreSQL delivers to every listening process when (and only if) that
  transaction commits; each delivery loop LISTENs on a connection of its own. The loop also
  looks once every half ``lease`` for leases that ran out (a process that died notifies nobody).
  Retries wait in the lane that holds the claim (its back-off is kept on the subscription row).
- **Back-off state lives on the subscription**, not on its head event: dropping events (the
  backlog bound, ``latest_only``) never resets a failing subscriber's back-off or its expiry.
- Times are the database's (``now()``), so processes on machines whose clocks differ agree.

``stats()`` reports the whole database's subscriptions and pending events, and this process's
delivered, dropped and expired counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import uuid
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from server.db import Migrations, SchemaTooNewError
from server.limits import SubscriptionLimitError, limits
from server.net import shown_uri
from server.outbox import FIRST_RETRY, MAX_BACKOFF, TIMEOUT
from server.pg import Connection, migrate
from server.pgdelivery import DeliveryLoop, Tally
from server.pins import Pins
from server.webhookpost import Poster

__all__ = ["CHANNEL", "MIGRATIONS", "PgOutbox"]

log = logging.getLogger("pdn.outbox")

CHANNEL = "pdn_outbox"
LEASE = 30.0
SLOW_AFTER = 1.0  # seconds unanswered before a POST leaves the live receivers' share

MIGRATIONS: Migrations = (
    (
        """CREATE TABLE pdn_outbox_subscriptions (
        id BIGSERIAL PRIMARY KEY,
        topic TEXT NOT NULL,
        uri TEXT NOT NULL,
        created TIMESTAMPTZ NOT NULL DEFAULT now(),
        owner TEXT,                     -- the process delivering its events (a claim)
        lease_until TIMESTAMPTZ,        -- the claim is void after this
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt TIMESTAMPTZ,       -- back-off: no POST before this
        first_failure TIMESTAMPTZ,      -- failing since (expiry)
        last_error TEXT,
        UNIQUE (topic, uri)
    )""",
        """CREATE TABLE pdn_outbox_events (
        id BIGSERIAL PRIMARY KEY,       -- publication order
        subscription_id BIGINT NOT NULL
            REFERENCES pdn_outbox_subscriptions (id) ON DELETE CASCADE,
        event_id TEXT NOT NULL,         -- X-PDN-Event-Id
        topic TEXT NOT NULL,
        body BYTEA NOT NULL,
        content_type TEXT NOT NULL,
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    )""",
        "CREATE INDEX pdn_outbox_events_lane ON pdn_outbox_events (subscription_id, id)",
    ),
    # Signed webhooks (issue 22): the subscriber's whsec_ secret, NULL for unsigned updates.
    ("ALTER TABLE pdn_outbox_subscriptions ADD COLUMN signing_secret TEXT",),
)
SCHEMA_VERSION = len(MIGRATIONS)


def install_schema(pool: ConnectionPool[Connection]) -> None:
    try:
        migrate(pool, MIGRATIONS, component="outbox")
    except SchemaTooNewError as error:
        raise RuntimeError(
            f"the outbox tables have version {error.found}, newer than this pdn ({SCHEMA_VERSION})"
        ) from None


class PgOutbox:
    """Subscriptions and pending events in PostgreSQL, delivered by every process that
    ``start()``s one, each event by exactly one of them."""

    def __init__(
        self,
        pool: ConnectionPool[Connection],
        *,
        name: str,
        timeout: float = TIMEOUT,
        first_retry: float = FIRST_RETRY,
        max_backoff: float = MAX_BACKOFF,
        give_up_after: float | None = None,
        max_connections: int = 256,
        bearer_token: str | None = None,
        max_subscriptions: int | None = None,
        max_backlog: int | None = None,
        lease: float = LEASE,
        delivery_pool_size: int = 6,
        slow_after: float = SLOW_AFTER,
        pins: Pins | None = None,
        tokens: Pins | None = None,
    ) -> None:
        """``tokens(uri)``: a subscriber's own bearer token (a display's), before
        ``bearer_token``. ``max_connections``: POSTs in flight at once (a quarter of them for
        subscribers that are failing, see ``server.pgdelivery.Slots``); ``slow_after``:
        seconds a POST may go unanswered before it leaves the live subscribers' share.
        ``delivery_pool_size``: the delivery loop's database connections (claims, and one per
        kind of batch)."""
        bounds = limits()
        self.pool = pool
        self.url = str(pool.conninfo)
        self.name = name
        self.timeout = timeout
        self.first_retry = first_retry
        self.max_backoff = max_backoff
        self.give_up_after = bounds.subscriber_expiry if give_up_after is None else give_up_after
        self.max_subscriptions = (
            bounds.max_subscriptions if max_subscriptions is None else max_subscriptions
        )
        self.max_backlog = bounds.max_backlog if max_backlog is None else max_backlog
        self.max_connections = max_connections
        self.bearer_token = bearer_token
        self.pins = pins  # the certificates of HTTPS subscribers, pinned (server.pins)
        self.tokens = tokens
        # A lease must outlast a POST (timeout) by a margin: a live owner keeps renewing it.
        self.lease = max(lease, timeout + 1.0)
        self.delivery_pool_size = delivery_pool_size
        self.slow_after = min(slow_after, timeout)
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.tally = Tally()
        install_schema(pool)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self.stopping = False

    # Subscriptions

    def subscribe(self, topic: str, uri: str, signing_secret: str | None = None) -> bool:
        """Add (topic, uri); True when new. SubscriptionLimitError at ``max_subscriptions``.

        ``signing_secret`` (``whsec_...``): its updates are signed; subscribing again sets the
        secret given (or none)."""
        with self.pool.connection() as connection:
            # Displays renew their subscriptions every minute: one read answers those, without
            # the transaction and the topic-wide lock a new subscriber needs.
            if self._subscribed(connection, topic, uri, signing_secret):
                return False
        with self.pool.connection() as connection, connection.transaction():
            # One subscriber at a time per topic, across processes: the count stays exact.
            connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (topic,))
            if self._subscribed(connection, topic, uri, signing_secret):
                return False
            row = connection.execute(
                "SELECT COUNT(*) FROM pdn_outbox_subscriptions WHERE topic = %s", (topic,)
            ).fetchone()
            if row is not None and row[0] >= self.max_subscriptions:
                raise SubscriptionLimitError(self.max_subscriptions)
            cursor = connection.execute(
                "INSERT INTO pdn_outbox_subscriptions (topic, uri, signing_secret)"
                " VALUES (%s, %s, %s) ON CONFLICT (topic, uri) DO NOTHING",
                (topic, uri, signing_secret),
            )
            created = cursor.rowcount > 0
        if created:
            log.info("%s: %s subscribed to %s", self.name, shown_uri(uri), topic)
        return created

    @staticmethod
    def _subscribed(
        connection: Connection, topic: str, uri: str, signing_secret: str | None
    ) -> bool:
        """True when (topic, uri) exists, its signing secret then set to ``signing_secret``
        (written only when it changes: a renewal is a read)."""
        found = connection.execute(
            "SELECT signing_secret FROM pdn_outbox_subscriptions WHERE topic = %s AND uri = %s",
            (topic, uri),
        ).fetchone()
        if found is None:
            return False
        if found[0] != signing_secret:
            connection.execute(
                "UPDATE pdn_outbox_subscriptions SET signing_secret = %s"
                " WHERE topic = %s AND uri = %s",
                (signing_secret, topic, uri),
            )
        return True

    def unsubscribe(self, topic: str, uri: str) -> bool:
        """Remove (topic, uri) and its pending events; False when it was not subscribed."""
        with self.pool.connection() as connection:
            existed = _drop_subscription(connection, topic, uri)
        if existed:
            log.info("%s: %s unsubscribed from %s", self.name, shown_uri(uri), topic)
        return existed

    def subscribers(self, topic: str) -> list[str]:
        with self.pool.connection() as connection:
            rows = connection.execute(
                "SELECT uri FROM pdn_outbox_subscriptions WHERE topic = %s ORDER BY id", (topic,)
            ).fetchall()
        return [str(uri) for (uri,) in rows]

    # Events

    def publish(
        self,
        topic: str,
        body: bytes,
        content_type: str,
        *,
        connection: Connection | None = None,
        latest_only: bool = False,
    ) -> int:
        """Queue one event per current subscriber of ``topic``; returns how many.

        With ``connection`` (a psycopg connection inside the caller's transaction) the rows and
        the wake-up join that transaction; without, they are committed here."""
        if connection is not None:
            return self._queue(connection, topic, body, content_type, latest_only)
        with self.pool.connection() as own, own.transaction():
            count = self._queue(own, topic, body, content_type, latest_only)
        self.notify()
        return count

    def _queue(
        self, connection: Connection, topic: str, body: bytes, content_type: str, latest_only: bool
    ) -> int:
        # No lock on the subscriptions: a delivery loop that lets go of a claim without seeing
        # these rows claims again afterwards, and the NOTIFY wakes the others (server.pgdelivery).
        dropped = 0
        if latest_only:
            dropped += connection.execute(
                "DELETE FROM pdn_outbox_events e USING pdn_outbox_subscriptions s"
                " WHERE e.subscription_id = s.id AND s.topic = %s AND e.topic = %s"
                " AND s.first_failure IS NOT NULL",
                (topic, topic),
            ).rowcount
        # Room for the new event: at most max_backlog - 1 older ones stay per subscriber.
        dropped += connection.execute(
            "DELETE FROM pdn_outbox_events WHERE id IN (SELECT id FROM ("
            " SELECT e.id, row_number() OVER (PARTITION BY e.subscription_id ORDER BY e.id DESC)"
            " AS newer FROM pdn_outbox_events e JOIN pdn_outbox_subscriptions s"
            " ON s.id = e.subscription_id WHERE s.topic = %s) ranked WHERE newer >= %s)",
            (topic, self.max_backlog),
        ).rowcount
        queued = connection.execute(
            "INSERT INTO pdn_outbox_events (subscription_id, event_id, topic, body, content_type)"
            " SELECT id, gen_random_uuid()::text, topic, %s, %s FROM pdn_outbox_subscriptions"
            " WHERE topic = %s ORDER BY id",
            (body, content_type, topic),
        ).rowcount
        if queued:
            connection.execute("SELECT pg_notify(%s, '')", (CHANNEL,))
        if dropped:
            self.tally.dropped += dropped
            log.debug("%s: %d undelivered event(s) of %s dropped", self.name, dropped, topic)
        return max(0, queued)

    def notify(self) -> None:
        """Wake this process's delivery loop at once (the others hear PostgreSQL's NOTIFY)."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    def stats(self) -> dict[str, Any]:
        with self.pool.connection() as connection:
            row = connection.execute(
                "SELECT (SELECT COUNT(*) FROM pdn_outbox_subscriptions), COUNT(*),"
                " EXTRACT(EPOCH FROM now() - MIN(created)) FROM pdn_outbox_events"
            ).fetchone()
        assert row is not None
        subscriptions, pending, oldest = row
        return {
            "subscriptions": int(subscriptions),
            "pending-events": int(pending),
            "oldest-pending-age": None if oldest is None else max(0.0, float(oldest)),
            "delivered": self.tally.delivered,
            "dropped-events": self.tally.dropped,
            "expired-subscriptions": self.tally.expired,
        }

    # Delivery thread

    def start(self) -> None:
        if self._thread is not None:
            return
        self.stopping = False
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name=f"pgoutbox-{self.name}", daemon=True
        )
        self._thread.start()
        ready.wait(10)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop delivering and let go of this process's claims (others take them at once)."""
        thread = self._thread
        if thread is None:
            return
        self.stopping = True
        self.notify()
        thread.join(timeout)
        self._thread = None
        with contextlib.suppress(psycopg.Error), self.pool.connection() as connection:
            connection.execute(
                "UPDATE pdn_outbox_subscriptions SET owner = NULL, lease_until = NULL"
                " WHERE owner = %s",
                (self.worker,),
            )
            connection.execute("SELECT pg_notify(%s, '')", (CHANNEL,))

    def _run(self, ready: threading.Event) -> None:
        try:
            asyncio.run(self._main(ready))
        except Exception:
            log.exception("%s: the delivery thread failed", self.name)
        finally:
            ready.set()

    async def _main(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        wake = self._wake
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
            self.url,
            min_size=1,
            max_size=self.delivery_pool_size,
            kwargs={"autocommit": True, "application_name": f"pdn-{self.name}-delivery"},
            name=f"{self.name}-delivery",
            open=False,
        )
        await pool.open(wait=True, timeout=30)
        # Kept connections: as many as POSTs in flight, so a burst to one receiver host (a
        # proxy in front of many displays, the benchmark's receiver) reuses them.
        poster = Poster(
            idle_per_origin=self.max_connections,
            max_idle=self.max_connections,
            fallback_connections=self.max_connections,
            pins=self.pins,
        )
        delivery = DeliveryLoop(self, pool, poster, wake)
        listener = asyncio.create_task(delivery.listen(CHANNEL))
        heartbeat = asyncio.create_task(delivery.heartbeat())
        ready.set()
        log.info("%s: webhook delivery started (%s)", self.name, self.worker)
        try:
            await delivery.run()
        finally:
            tasks = [listener, heartbeat, *delivery.tasks()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await poster.aclose()
            await pool.close()
            self._loop = None
            log.info("%s: webhook delivery stopped", self.name)


def _drop_subscription(connection: Connection, topic: str, uri: str) -> bool:
    """Delete (topic, uri); its events go with it (ON DELETE CASCADE)."""
    cursor = connection.execute(
        "DELETE FROM pdn_outbox_subscriptions WHERE topic = %s AND uri = %s", (topic, uri)
    )
    return cursor.rowcount > 0
