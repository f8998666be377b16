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
  de-duplicate by that id, as INTERFACE.md asks). No event is ever sent by two live processes.
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
from datetime import timedelta
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from server.db import Migrations, SchemaTooNewError
from server.limits import SubscriptionLimitError, limits
from server.outbox import FIRST_RETRY, MAX_BACKOFF, TIMEOUT, backoff, http_client, post
from server.pg import Connection, migrate

__all__ = ["CHANNEL", "MIGRATIONS", "PgOutbox"]

log = logging.getLogger("pdn.outbox")

CHANNEL = "pdn_outbox"
LEASE = 30.0
CLAIM_BATCH = 200

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
        delivery_pool_size: int = 4,
    ) -> None:
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
        # A lease must outlast a POST (timeout) by a margin: a live owner keeps renewing it.
        self.lease = max(lease, timeout + 1.0)
        self.delivery_pool_size = delivery_pool_size
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._dropped = 0
        self._expired = 0
        self._delivered = 0
        install_schema(pool)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False

    # Subscriptions

    def subscribe(self, topic: str, uri: str) -> bool:
        """Add (topic, uri); True when new. SubscriptionLimitError at ``max_subscriptions``."""
        with self.pool.connection() as connection, connection.transaction():
            # One subscriber at a time per topic, across processes: the count stays exact.
            connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (topic,))
            exists = connection.execute(
                "SELECT 1 FROM pdn_outbox_subscriptions WHERE topic = %s AND uri = %s",
                (topic, uri),
            ).fetchone()
            if exists is not None:
                return False
            row = connection.execute(
                "SELECT COUNT(*) FROM pdn_outbox_subscriptions WHERE topic = %s", (topic,)
            ).fetchone()
            if row is not None and row[0] >= self.max_subscriptions:
                raise SubscriptionLimitError(self.max_subscriptions)
            cursor = connection.execute(
                "INSERT INTO pdn_outbox_subscriptions (topic, uri) VALUES (%s, %s)"
                " ON CONFLICT (topic, uri) DO NOTHING",
                (topic, uri),
            )
            created = cursor.rowcount > 0
        if created:
            log.info("%s: %s subscribed to %s", self.name, uri, topic)
        return created

    def unsubscribe(self, topic: str, uri: str) -> bool:
        """Remove (topic, uri) and its pending events; False when it was not subscribed."""
        with self.pool.connection() as connection:
            existed = _drop_subscription(connection, topic, uri)
        if existed:
            log.info("%s: %s unsubscribed from %s", self.name, uri, topic)
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
        # FOR SHARE: a lane that finds its subscriber's queue empty and lets go of its claim
        # (FOR UPDATE) waits for this transaction, then sees its events (see _release).
        ids = [
            sid
            for (sid,) in connection.execute(
                "SELECT id FROM pdn_outbox_subscriptions WHERE topic = %s ORDER BY id FOR SHARE",
                (topic,),
            ).fetchall()
        ]
        if not ids:
            return 0
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
        connection.execute(
            "INSERT INTO pdn_outbox_events (subscription_id, event_id, topic, body, content_type)"
            " SELECT id, gen_random_uuid()::text, topic, %s, %s FROM pdn_outbox_subscriptions"
            " WHERE id = ANY(%s) ORDER BY id",
            (body, content_type, ids),
        )
        connection.execute("SELECT pg_notify(%s, '')", (CHANNEL,))
        if dropped:
            self._dropped += dropped
            log.debug("%s: %d undelivered event(s) of %s dropped", self.name, dropped, topic)
        return len(ids)

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
            "delivered": self._delivered,
            "dropped-events": self._dropped,
            "expired-subscriptions": self._expired,
        }

    # Delivery thread

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping = False
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
        self._stopping = True
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
        client = http_client(self.max_connections)
        semaphore = asyncio.Semaphore(self.max_connections)
        lanes: dict[int, asyncio.Task[None]] = {}
        listener = asyncio.create_task(self._listen(wake))
        heartbeat = asyncio.create_task(self._heartbeat(pool, lanes))
        ready.set()
        log.info("%s: webhook delivery started (%s)", self.name, self.worker)
        try:
            while not self._stopping:
                wake.clear()
                try:
                    await self._claim(pool, client, semaphore, lanes)
                except psycopg.Error as error:
                    log.warning("%s: could not claim deliveries: %s", self.name, error)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), self.lease / 2)
        finally:
            tasks = [listener, heartbeat, *lanes.values()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await client.aclose()
            await pool.close()
            self._loop = None
            log.info("%s: webhook delivery stopped", self.name)

    async def _listen(self, wake: asyncio.Event) -> None:
        """LISTEN on a connection of its own; every NOTIFY (or a lost connection) wakes."""
        while not self._stopping:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, application_name=f"pdn-{self.name}-listen"
                ) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    wake.set()  # anything published while not listening
                    async for _ in connection.notifies():
                        wake.set()
            except psycopg.Error as error:
                log.warning("%s: LISTEN connection lost: %s", self.name, error)
                wake.set()
                await asyncio.sleep(1.0)

    async def _heartbeat(
        self,
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]],
        lanes: dict[int, asyncio.Task[None]],
    ) -> None:
        """Renew this process's leases; a lane whose claim was lost stops."""
        while True:
            await asyncio.sleep(self.lease / 3)
            before = dict(lanes)  # lanes started later hold claims this UPDATE may not see
            try:
                async with pool.connection() as connection:
                    cursor = await connection.execute(
                        "UPDATE pdn_outbox_subscriptions SET lease_until = now() + %s"
                        " WHERE owner = %s RETURNING id",
                        (_seconds(self.lease), self.worker),
                    )
                    held = {sid for (sid,) in await cursor.fetchall()}
            except psycopg.Error as error:
                log.warning("%s: could not renew delivery leases: %s", self.name, error)
                continue
            for sid, task in before.items():
                if sid not in held:
                    task.cancel()

    async def _claim(
        self,
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]],
        client: httpx.AsyncClient,
        semaphore: asyncio.Semaphore,
        lanes: dict[int, asyncio.Task[None]],
    ) -> None:
        """Claim subscribers with pending events that nobody (alive) delivers, in batches."""
        while not self._stopping:
            async with pool.connection() as connection:
                cursor = await connection.execute(
                    "WITH free AS (SELECT s.id FROM pdn_outbox_subscriptions s"
                    " WHERE (s.owner IS NULL OR s.lease_until < now())"
                    " AND EXISTS (SELECT 1 FROM pdn_outbox_events e"
                    " WHERE e.subscription_id = s.id)"
                    " ORDER BY s.id LIMIT %s FOR UPDATE SKIP LOCKED)"
                    " UPDATE pdn_outbox_subscriptions s SET owner = %s,"
                    " lease_until = now() + %s FROM free WHERE s.id = free.id"
                    " RETURNING s.id",
                    (CLAIM_BATCH, self.worker, _seconds(self.lease)),
                )
                claimed = [sid for (sid,) in await cursor.fetchall()]
            for sid in claimed:
                old = lanes.get(sid)
                if old is not None and not old.done():
                    continue
                task = asyncio.create_task(self._lane(pool, client, semaphore, sid))
                lanes[sid] = task
                task.add_done_callback(partial(_forget, lanes, sid))
            if len(claimed) < CLAIM_BATCH:
                return
            await asyncio.sleep(0)  # let the lanes start; other processes claim meanwhile

    async def _lane(
        self,
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]],
        client: httpx.AsyncClient,
        semaphore: asyncio.Semaphore,
        subscription_id: int,
    ) -> None:
        """Deliver one claimed subscriber's events in order until none is left."""
        try:
            await self._deliver_all(pool, client, semaphore, subscription_id)
        except psycopg.Error as error:
            # The claim stays until its lease runs out; then any process takes it again.
            log.warning("%s: delivery lane %d stopped: %s", self.name, subscription_id, error)

    async def _deliver_all(
        self,
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]],
        client: httpx.AsyncClient,
        semaphore: asyncio.Semaphore,
        subscription_id: int,
    ) -> None:
        while not self._stopping:
            async with pool.connection() as connection:
                cursor = await connection.execute(
                    "SELECT e.id, e.event_id, e.topic, e.body, e.content_type, s.uri, s.attempts,"
                    " EXTRACT(EPOCH FROM s.next_attempt - now()),"
                    " EXTRACT(EPOCH FROM now() - s.first_failure)"
                    " FROM pdn_outbox_subscriptions s JOIN pdn_outbox_events e"
                    " ON e.subscription_id = s.id"
                    " WHERE s.id = %s AND s.owner = %s ORDER BY e.id LIMIT 1",
                    (subscription_id, self.worker),
                )
                row = await cursor.fetchone()
                if row is None and await self._release(connection, subscription_id):
                    return
            if row is None:
                continue
            rowid, event_id, topic, body, content_type, uri, attempts, wait, failing = row
            if wait is not None and wait > 0:
                await asyncio.sleep(float(wait))
                continue  # read again: unsubscribed, or claimed away, meanwhile
            async with semaphore:
                headers = {
                    "Content-Type": content_type,
                    "X-PDN-Event-Id": event_id,
                    "X-PDN-Topic": topic,
                }
                if self.bearer_token and "@" not in urlsplit(uri).netloc:
                    headers["Authorization"] = f"Bearer {self.bearer_token}"
                result = await post(client, uri, bytes(body), headers, timeout=self.timeout)
            async with pool.connection() as connection:
                if result.ok:
                    await connection.execute(
                        "DELETE FROM pdn_outbox_events WHERE id = %s", (rowid,)
                    )
                    if attempts:
                        await connection.execute(
                            "UPDATE pdn_outbox_subscriptions SET attempts = 0,"
                            " next_attempt = NULL, first_failure = NULL, last_error = NULL"
                            " WHERE id = %s",
                            (subscription_id,),
                        )
                        log.info("%s: %s answers again (event %s)", self.name, uri, event_id)
                    self._delivered += 1
                    continue
                attempts += 1
                failed_for = float(failing or 0.0)
                if failing is not None and failed_for >= self.give_up_after:
                    await connection.execute(
                        "DELETE FROM pdn_outbox_subscriptions WHERE id = %s", (subscription_id,)
                    )
                    self._expired += 1
                    log.warning(
                        "%s: dropped the subscription of %s to %s: failing for %.0f s (%s)",
                        self.name, uri, topic, failed_for, result.error,
                    )  # fmt: skip
                    return
                delay = backoff(attempts, first=self.first_retry, cap=self.max_backoff)
                await connection.execute(
                    "UPDATE pdn_outbox_subscriptions SET attempts = %s,"
                    " next_attempt = now() + %s, first_failure = COALESCE(first_failure, now()),"
                    " last_error = %s WHERE id = %s",
                    (attempts, _seconds(delay), result.error, subscription_id),
                )
            level = logging.INFO if attempts == 1 else logging.DEBUG
            log.log(
                level, "%s: POST to %s failed (%s); retry %d in %.0f s",
                self.name, uri, result.error, attempts, delay,
            )  # fmt: skip

    async def _release(
        self, connection: psycopg.AsyncConnection[Any], subscription_id: int
    ) -> bool:
        """Let go of an empty subscriber's claim; False when events came meanwhile.

        The row lock waits for a publisher still holding it (FOR SHARE); the next statement
        sees what that publisher committed, so an event is never left with nobody to deliver
        it (a publisher after the release finds the claim free, and its NOTIFY wakes all)."""
        async with connection.transaction():
            cursor = await connection.execute(
                "SELECT 1 FROM pdn_outbox_subscriptions WHERE id = %s AND owner = %s FOR UPDATE",
                (subscription_id, self.worker),
            )
            if await cursor.fetchone() is None:
                return True  # unsubscribed, or no longer ours
            cursor = await connection.execute(
                "SELECT 1 FROM pdn_outbox_events WHERE subscription_id = %s LIMIT 1",
                (subscription_id,),
            )
            if await cursor.fetchone() is not None:
                return False
            await connection.execute(
                "UPDATE pdn_outbox_subscriptions SET owner = NULL, lease_until = NULL"
                " WHERE id = %s",
                (subscription_id,),
            )
        return True


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


def _forget(lanes: dict[int, asyncio.Task[None]], key: int, task: asyncio.Task[None]) -> None:
    if lanes.get(key) is task:
        del lanes[key]


def _drop_subscription(connection: Connection, topic: str, uri: str) -> bool:
    """Delete (topic, uri); its events go with it (ON DELETE CASCADE)."""
    cursor = connection.execute(
        "DELETE FROM pdn_outbox_subscriptions WHERE topic = %s AND uri = %s", (topic, uri)
    )
    return cursor.rowcount > 0
