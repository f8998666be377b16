"""A durable webhook outbox: write the event first, POST it, delete it only after a 2xx.

Used by every segment that pushes updates (docs/interface.md, "Pushed updates"): the display's
playback updates, the scheduler's schedule updates, a sensor's readings.

Usage::

    outbox = Outbox(data_dir / "outbox.sqlite3", name="scheduler")   # creates its tables
    outbox.start()                                    # delivery thread
    created = outbox.subscribe("schedule:lobby", uri)  # True the first time, False after
    existed = outbox.unsubscribe("schedule:lobby", uri)  # False -> answer 404 not-subscribed
    outbox.publish("schedule:lobby", cds_bytes, "text/xml")  # one event per subscriber, committed
    ...
    outbox.stop()

To queue events in the same transaction as your own state change, pass your connection (a
``sqlite3`` connection to the *same file*, inside ``BEGIN ... COMMIT``) and call ``notify()``
after your commit so delivery starts at once (a poll every 2 s catches a forgotten notify)::

    with transaction(connection):
        connection.execute("UPDATE my_state ...")
        outbox.publish("playback", body, "application/json", connection=connection)
    outbox.notify()

A segment that pushes to token-protected displays passes ``tokens``, the token of each
display by its URL (got by pairing or configured: ``server.platform.displaycreds``, the scheduler's
``PinBook`` of its paired displays), and may pass ``bearer_token`` for every other subscriber
(``PDN_DISPLAY_TOKEN``).

Topics are free strings (``"playback"``, ``"schedule:<id>"``, ``"sensor"``). A subscription is
(topic, uri); subscribing twice is one record.

Delivery (docs/interface.md, "Pushed updates"): per subscriber, events go out one at a time in the
order they were published; each POST carries ``Content-Type``, ``X-PDN-Event-Id`` (unique per
event and subscriber, the same on every retry) and ``X-PDN-Topic`` (and, for a subscriber that
gave a signing secret, the Standard Webhooks headers, ``webhook-id`` being the event id), with a
5 s limit for connect and answer together. Anything but a 2xx is retried with exponential backoff
(1 s, 2 s, 4 s ... capped at 5 min); when a subscriber has failed for ``give_up_after`` (24 h; a
subscriber that stays dead *expires*) the subscription and its events are dropped, with a warning
in the log.

Bounds (defaults from ``server.platform.limits``): at most ``max_subscriptions`` subscriptions per
topic (one more raises :class:`SubscriptionLimitError`, answered 429); at most ``max_backlog``
undelivered events per subscriber: beyond, the oldest are dropped (the receiver sees the gap, in
the playback record's ``sequence`` for instance, and ``stats()`` counts them). A topic published
with ``latest_only=True`` (a sensor's readings, where only the newest value matters) keeps a
failing subscriber's backlog to the newest event alone.

Delivery runs on an asyncio loop in its own thread with one lane (task) per subscriber, so a
slow or dead subscriber holds only its own lane: it never delays another subscriber, the API or
the screen. POSTs in flight are bounded (``max_connections``, with a share kept for failing
subscribers: ``server.platform.delivery.Slots``). The POSTs go through one
``server.platform.webhookpost.Poster``
per delivery loop: connections to a subscriber are kept alive and reused, proxies come from the
environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``), certificates are checked against
the system's store, and the connections are closed when delivery stops.

One outbox, two databases: this class, its tables and every statement on them but the claims
are the same on SQLite and PostgreSQL (``server.platform.sql``); ``server.platform.delivery`` is
the one delivery core (order, retries, expiry), and the claims are the database's own:
``server.platform.sqliteoutbox`` (a SQLite file, one process), ``server.platform.pgoutbox``
(several processes on one PostgreSQL: leased claims, LISTEN/NOTIFY; ``PgOutbox`` builds one). A
subscriber's back-off (attempts, next attempt, failing since) is kept on its subscription, so
dropping events (the backlog bound, ``latest_only``) never resets it or its expiry.

Durability (SQLite): the tables live in the given file (WAL). Events are inserted with the
caller's durability (the display commits with ``synchronous=FULL``). The delivery thread's own
connection uses ``synchronous=NORMAL``: a power cut may forget that an event was already
delivered, so it is sent again with the same event id (at-least-once; receivers de-duplicate),
but an event is never lost, and fan-out to hundreds of subscribers costs no fsync per delete.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from pathlib import Path
from typing import Any

from server.platform.db import SchemaTooNewError
from server.platform.delivery import (
    FIRST_RETRY,
    MAX_BACKOFF,
    Claims,
    DeliveryLoop,
    Tally,
    backoff,
    bearer_for,
)
from server.platform.limits import SubscriptionLimitError, limits
from server.platform.net import shown_uri
from server.platform.pins import Pins
from server.platform.sql import Database, Schema, SqliteDatabase, Transaction, only, steps_for
from server.platform.sqliteoutbox import SQLITE_NOW, SingleProcessClaims
from server.platform.webhookpost import Poster

__all__ = [
    "CHANNEL",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Outbox",
    "backoff",
    "bearer_for",
    "install_schema",
]

log = logging.getLogger("pdn.outbox")

#: NOTIFY channel of new events (PostgreSQL): every delivery loop listening wakes.
CHANNEL = "pdn_outbox"
TIMEOUT = 5.0
SLOW_AFTER = 1.0  # seconds unanswered before a POST leaves the live receivers' share


# MIGRATIONS[n] takes the outbox tables from version n to n + 1 (server.platform.sql: only() marks
# one database's history). The tables share the file or database of the segment they serve, whose
# schema owns PRAGMA user_version: the version is in outbox_schema (SQLite) or in pdn_schema
# (PostgreSQL).
MIGRATIONS: Schema = (
    only(
        "sqlite",
        """CREATE TABLE IF NOT EXISTS outbox_subscriptions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            topic TEXT NOT NULL,
            uri TEXT NOT NULL,
            created REAL NOT NULL,
            UNIQUE (topic, uri)
        )""",
        """CREATE TABLE IF NOT EXISTS outbox_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,   -- publication order
            subscription_id INTEGER NOT NULL,
            event_id TEXT NOT NULL,                 -- X-PDN-Event-Id
            topic TEXT NOT NULL,
            body BLOB NOT NULL,
            content_type TEXT NOT NULL,
            created REAL NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,    -- the back-off, on the oldest event
            next_attempt REAL NOT NULL,
            first_failure REAL,
            last_error TEXT
        )""",
        "CREATE INDEX IF NOT EXISTS outbox_events_lane ON outbox_events (subscription_id, id)",
    ),
    # Signed webhooks: the subscriber's whsec_ secret, NULL for unsigned updates.
    only("sqlite", "ALTER TABLE outbox_subscriptions ADD COLUMN signing_secret TEXT"),
    only(
        "postgresql",
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
    only("postgresql", "ALTER TABLE pdn_outbox_subscriptions ADD COLUMN signing_secret TEXT"),
    # One outbox on both: SQLite's tables take PostgreSQL's names and shape (the
    # back-off on the subscription, taken from its oldest event); the database makes the
    # event ids and the times. The old tables stay (steps are additive), so pdn 0.1.0
    # rolled back to still opens the file: it finds the subscriptions as they were, and no
    # events (this step moves them into the new tables, so none is sent twice).
    only(
        "sqlite",
        f"""CREATE TABLE pdn_outbox_subscriptions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            topic TEXT NOT NULL,
            uri TEXT NOT NULL,
            created REAL NOT NULL DEFAULT {SQLITE_NOW},
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt REAL,
            first_failure REAL,
            last_error TEXT,
            signing_secret TEXT,
            UNIQUE (topic, uri)
        )""",
        "INSERT INTO pdn_outbox_subscriptions (id, topic, uri, created, attempts,"
        " next_attempt, first_failure, last_error, signing_secret)"
        " SELECT s.id, s.topic, s.uri, s.created, COALESCE(h.attempts, 0),"
        " CASE WHEN h.attempts > 0 THEN h.next_attempt END, h.first_failure, h.last_error,"
        " s.signing_secret FROM outbox_subscriptions s LEFT JOIN outbox_events h"
        " ON h.id = (SELECT MIN(id) FROM outbox_events WHERE subscription_id = s.id)",
        f"""CREATE TABLE pdn_outbox_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            subscription_id INTEGER NOT NULL,
            event_id TEXT NOT NULL DEFAULT (lower(hex(randomblob(16)))),
            topic TEXT NOT NULL,
            body BLOB NOT NULL,
            content_type TEXT NOT NULL,
            created REAL NOT NULL DEFAULT {SQLITE_NOW}
        )""",
        "INSERT INTO pdn_outbox_events"
        " SELECT id, subscription_id, event_id, topic, body, content_type, created"
        " FROM outbox_events WHERE subscription_id IN (SELECT id FROM outbox_subscriptions)",
        "DELETE FROM outbox_events",
        "CREATE INDEX pdn_outbox_events_lane ON pdn_outbox_events (subscription_id, id)",
    ),
    only(
        "postgresql",
        "ALTER TABLE pdn_outbox_events ALTER COLUMN event_id SET DEFAULT gen_random_uuid()::text",
    ),
)
#: The newest version of the tables in a SQLite file (its outbox_schema; PostgreSQL's, in
#: pdn_schema, counts its own steps).
SCHEMA_VERSION = len(steps_for(MIGRATIONS, "sqlite"))


def install_schema(database: Database) -> None:
    """Create or upgrade the outbox tables in a database (idempotent)."""
    try:
        database.migrate(MIGRATIONS, "outbox")
    except SchemaTooNewError as error:
        newest = len(steps_for(MIGRATIONS, database.dialect))
        raise RuntimeError(
            f"the outbox tables have version {error.found}, newer than this pdn ({newest})"
        ) from None


def _drop_subscription(transaction: Transaction, topic: str, uri: str) -> bool:
    """Delete (topic, uri) and its events."""
    transaction.execute(
        "DELETE FROM pdn_outbox_events WHERE subscription_id IN"
        " (SELECT id FROM pdn_outbox_subscriptions WHERE topic = ? AND uri = ?)",
        (topic, uri),
    )
    return (
        transaction.execute(
            "DELETE FROM pdn_outbox_subscriptions WHERE topic = ? AND uri = ?", (topic, uri)
        )
        > 0
    )


class Outbox:
    """Subscriptions and their pending events in a database, delivered by a thread: a SQLite
    file (a path), or PostgreSQL through ``server.platform.pgoutbox.PgOutbox``."""

    def __init__(
        self,
        database: Path | Database,
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
        slow_after: float = SLOW_AFTER,
        pins: Pins | None = None,
        tokens: Pins | None = None,
        claims: Claims | None = None,
    ) -> None:
        """``give_up_after``, ``max_subscriptions`` and ``max_backlog`` default to
        ``server.platform.limits`` (the environment's ``PDN_SUBSCRIBER_EXPIRY``, ...); ``pins``: the
        certificates of HTTPS subscribers, pinned (``server.platform.pins``); ``tokens(uri)``: the
        bearer token of that subscriber (a display's), before ``bearer_token``, which is sent
        to every other subscriber (a subscriber-uri with user:password@ gets Basic instead).
        ``max_connections``: POSTs in flight at once (a quarter of them for subscribers that
        are failing); ``slow_after``: seconds a POST may go unanswered before it leaves the
        live subscribers' share. ``claims``: how the delivery loop takes its work
        (default: :class:`SingleProcessClaims`, for a SQLite file)."""
        if isinstance(database, Path):
            database = SqliteDatabase(database)
        self.db = database
        if claims is None:
            if not isinstance(database, SqliteDatabase):
                raise TypeError("on PostgreSQL the outbox is server.platform.pgoutbox.PgOutbox")
            claims = SingleProcessClaims(database.path)
        self.claims: Claims = claims
        bounds = limits()
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
        self.slow_after = min(slow_after, timeout)
        self.bearer_token = bearer_token
        self.pins = pins
        self.tokens = tokens
        self.tally = Tally()
        install_schema(database)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self.stopping = False

    @property
    def db_path(self) -> Path:
        """The SQLite file (a caller's own connection to it joins ``publish``)."""
        if not isinstance(self.db, SqliteDatabase):
            raise AttributeError("an outbox on PostgreSQL has no file")
        return self.db.path

    # Subscriptions

    def subscribe(self, topic: str, uri: str, signing_secret: str | None = None) -> bool:
        """Add (topic, uri); True when it is new, False when it already existed.

        ``signing_secret`` (``whsec_...``, checked by the caller): every update to it is signed
        (``server.platform.signing``). Subscribing again sets the secret given (or none) on the
        existing subscription. SubscriptionLimitError when ``topic`` has
        ``max_subscriptions`` already."""
        # Displays renew their subscriptions every minute: one read answers those, without
        # the transaction and the topic-wide lock a new subscriber needs.
        with self.db.connection() as connection:
            if self._subscribed(connection, topic, uri, signing_secret):
                return False
        with self.db.transaction() as transaction:
            # One new subscriber at a time per topic, across processes: the count stays exact.
            self.db.lock(transaction, topic)
            if self._subscribed(transaction, topic, uri, signing_secret):
                return False
            row = transaction.row(
                "SELECT COUNT(*) FROM pdn_outbox_subscriptions WHERE topic = ?", (topic,)
            )
            if row is not None and row[0] >= self.max_subscriptions:
                raise SubscriptionLimitError(self.max_subscriptions)
            created = (
                transaction.execute(
                    "INSERT INTO pdn_outbox_subscriptions (topic, uri, signing_secret)"
                    " VALUES (?, ?, ?) ON CONFLICT (topic, uri) DO NOTHING",
                    (topic, uri, signing_secret),
                )
                > 0
            )
        if created:
            log.info("%s: %s subscribed to %s", self.name, shown_uri(uri), topic)
        return created

    @staticmethod
    def _subscribed(
        transaction: Transaction, topic: str, uri: str, signing_secret: str | None
    ) -> bool:
        """True when (topic, uri) exists, its signing secret then set to ``signing_secret``
        (written only when it changes: a renewal is a read)."""
        found = transaction.row(
            "SELECT signing_secret FROM pdn_outbox_subscriptions WHERE topic = ? AND uri = ?",
            (topic, uri),
        )
        if found is None:
            return False
        if found[0] != signing_secret:
            transaction.execute(
                "UPDATE pdn_outbox_subscriptions SET signing_secret = ?"
                " WHERE topic = ? AND uri = ?",
                (signing_secret, topic, uri),
            )
        return True

    def unsubscribe(self, topic: str, uri: str) -> bool:
        """Remove (topic, uri) and its pending events; False when it was not subscribed."""
        with self.db.transaction() as transaction:
            existed = _drop_subscription(transaction, topic, uri)
        if existed:
            log.info("%s: %s unsubscribed from %s", self.name, shown_uri(uri), topic)
        return existed

    def subscribers(self, topic: str) -> list[str]:
        rows = self.db.rows(
            "SELECT uri FROM pdn_outbox_subscriptions WHERE topic = ? ORDER BY id", (topic,)
        )
        return [str(uri) for (uri,) in rows]

    # Events

    def publish(
        self,
        topic: str,
        body: bytes,
        content_type: str,
        *,
        connection: Any = None,
        latest_only: bool = False,
    ) -> int:
        """Queue one event per current subscriber of ``topic``; returns how many.

        With ``connection`` (the caller's own connection to this database, inside its open
        transaction: ``sqlite3`` or psycopg) the rows join that transaction (call ``notify()``
        after the commit); without, they are committed here and delivery starts at once.
        ``latest_only``: a failing subscriber's older events of ``topic`` are dropped, so it
        gets the newest alone when it answers again. Either way each subscriber's backlog is
        kept to ``max_backlog`` events, the oldest dropped.
        """
        if connection is not None:
            return self._queue(self.db.joined(connection), topic, body, content_type, latest_only)
        with self.db.transaction() as transaction:
            count = self._queue(transaction, topic, body, content_type, latest_only)
        self.notify()
        return count

    def _queue(
        self,
        transaction: Transaction,
        topic: str,
        body: bytes,
        content_type: str,
        latest_only: bool,
    ) -> int:
        # No lock on the subscriptions: a delivery loop that lets go of a subscriber without
        # seeing these rows claims again afterwards, and the NOTIFY wakes the others.
        dropped = 0
        if latest_only:
            dropped += transaction.execute(
                "DELETE FROM pdn_outbox_events WHERE topic = ? AND subscription_id IN"
                " (SELECT id FROM pdn_outbox_subscriptions"
                " WHERE topic = ? AND first_failure IS NOT NULL)",
                (topic, topic),
            )
        # Room for the new event: at most max_backlog - 1 older ones stay per subscriber.
        dropped += transaction.execute(
            "DELETE FROM pdn_outbox_events WHERE id IN (SELECT id FROM ("
            " SELECT e.id, row_number() OVER (PARTITION BY e.subscription_id ORDER BY e.id DESC)"
            " AS newer FROM pdn_outbox_events e JOIN pdn_outbox_subscriptions s"
            " ON s.id = e.subscription_id WHERE s.topic = ?) ranked WHERE newer >= ?)",
            (topic, self.max_backlog),
        )
        queued = transaction.execute(
            "INSERT INTO pdn_outbox_events (subscription_id, topic, body, content_type)"
            " SELECT id, topic, ?, ? FROM pdn_outbox_subscriptions WHERE topic = ? ORDER BY id",
            (body, content_type, topic),
        )
        if queued:
            self.db.notify(transaction, CHANNEL, "")
        if dropped:
            self.tally.dropped += dropped
            log.debug("%s: %d undelivered event(s) of %s dropped", self.name, dropped, topic)
        return max(0, queued)

    def notify(self) -> None:
        """Tell this process's delivery loop that new events are committed (thread-safe,
        cheap); other processes hear PostgreSQL's NOTIFY."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            # RuntimeError: the loop closed meanwhile; the next start picks the events up.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    def stats(self) -> dict[str, Any]:
        """Figures for a health page: subscriptions and pending events (the whole database's),
        the oldest pending event's age; what this process delivered, dropped and expired."""
        row = self.db.row(
            "SELECT (SELECT COUNT(*) FROM pdn_outbox_subscriptions), COUNT(*),"
            f" {self.claims.oldest_age} FROM pdn_outbox_events"
        )
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
            target=self._run, args=(ready,), name=f"outbox-{self.name}", daemon=True
        )
        self._thread.start()
        ready.wait(10)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop delivering; POSTs in flight are abandoned and sent again later (after a
        restart; on PostgreSQL, at once by another process: the claims are let go)."""
        thread = self._thread
        if thread is None:
            return
        self.stopping = True
        self.notify()
        thread.join(timeout)
        self._thread = None
        if isinstance(self.db, SqliteDatabase):  # the file is this outbox's to close
            self.db.close()

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
        await self.claims.open(self)
        # Kept connections: as many as POSTs in flight, so a burst to one receiver host (a
        # proxy in front of many displays, the benchmark's receiver) reuses them.
        poster = Poster(
            idle_per_origin=self.max_connections,
            max_idle=self.max_connections,
            fallback_connections=self.max_connections,
            pins=self.pins,
        )
        ready.set()
        log.info("%s: webhook delivery started", self.name)
        try:
            await DeliveryLoop(self, self.claims, poster, self._wake).main()
        finally:
            await poster.aclose()
            await self.claims.close()
            self._loop = None
            log.info("%s: webhook delivery stopped", self.name)
