"""A durable webhook outbox: write the event first, POST it, delete it only after a 2xx.

Used by every segment that pushes updates (INTERFACE.md, "Pushed updates"): the display's
playback updates, the scheduler's schedule updates, a sensor's readings.

Usage::

    outbox = Outbox(data_dir / "scheduler.db", name="scheduler")   # creates its tables
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
display by its URL (got by pairing or configured: ``server.displaycreds``, the scheduler's
``PinBook`` of its paired displays), and may pass ``bearer_token`` for every other subscriber
(``PDN_DISPLAY_TOKEN``).

Topics are free strings (``"playback"``, ``"schedule:<id>"``, ``"sensor"``). A subscription is
(topic, uri); subscribing twice is one record.

Delivery (INTERFACE.md): per subscriber, events go out one at a time in the order they were
published; each POST carries ``Content-Type``, ``X-PDN-Event-Id`` (unique per event and
subscriber, the same on every retry) and ``X-PDN-Topic`` (and, for a subscriber that gave a
signing secret, the Standard Webhooks headers, ``webhook-id`` being the event id), with a 5 s
limit for connect and answer together. Anything but a 2xx is retried with exponential backoff
(1 s, 2 s, 4 s ... capped at 5 min); when a subscriber has failed for ``give_up_after`` (24 h;
a subscriber that stays dead *expires*) the subscription and its events are dropped, with a
warning in the log.

Bounds (defaults from ``server.limits``): at most ``max_subscriptions`` subscriptions per topic
(one more raises :class:`SubscriptionLimitError`, answered 429); at most ``max_backlog``
undelivered events per subscriber: beyond, the oldest are dropped (the receiver sees the gap,
in the playback record's ``sequence`` for instance, and ``stats()`` counts them). A topic
published with ``latest_only=True`` (a sensor's readings, where only the newest value matters)
keeps a failing subscriber's backlog to the newest event alone.

Delivery runs on an asyncio loop in its own thread with one lane (task) per subscriber, so a
slow or dead subscriber holds only its own lane: it never
delays another subscriber, the API or the screen. At most ``max_connections`` POSTs are open at
once (file descriptors are bounded). The POSTs go through one ``server.webhookpost.Poster`` per
delivery loop, as the PostgreSQL outbox's do: connections to a subscriber are kept alive and
reused, proxies come from the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``),
certificates are checked against the system's store, and the connections are closed when
delivery stops.

Durability: the tables live in the given SQLite file (WAL). Events are inserted with the
caller's durability (the display commits with ``synchronous=FULL``). The delivery thread's own
connection uses ``synchronous=NORMAL``: a power cut may forget that an event was already
delivered, so it is sent again with the same event id (at-least-once; receivers de-duplicate),
but an event is never lost, and fan-out to hundreds of subscribers costs no fsync per delete.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from server.db import Migrations, SchemaTooNewError, connect, migrate, transaction
from server.limits import SubscriptionLimitError, limits
from server.net import shown_uri
from server.pins import Pins
from server.signing import signed_headers
from server.webhookpost import Poster

log = logging.getLogger("pdn.outbox")

# The outbox's tables share the file of the segment they serve (display.db, scheduler.db...),
# whose schema owns PRAGMA user_version: the outbox keeps its version in outbox_schema.
# MIGRATIONS[n] takes the outbox tables from version n to n + 1.
MIGRATIONS: Migrations = (
    (
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
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt REAL NOT NULL,
        first_failure REAL,
        last_error TEXT
    )""",
        "CREATE INDEX IF NOT EXISTS outbox_events_lane ON outbox_events (subscription_id, id)",
    ),
    # Signed webhooks (issue 22): the subscriber's whsec_ secret, NULL for unsigned updates.
    ("ALTER TABLE outbox_subscriptions ADD COLUMN signing_secret TEXT",),
)
SCHEMA_VERSION = len(MIGRATIONS)

TIMEOUT = 5.0
FIRST_RETRY = 1.0
MAX_BACKOFF = 300.0
GIVE_UP_AFTER = 24 * 3600.0  # the default of server.limits' subscriber_expiry
POLL_INTERVAL = 2.0


def bearer_for(uri: str, tokens: Pins | None, fallback: str | None) -> str | None:
    """The bearer token sent with an update to ``uri``: its own (``tokens``), else
    ``fallback``; none to a subscriber-uri with ``user:password@`` (Basic is sent instead)."""
    if "@" in urlsplit(uri).netloc:
        return None
    return (tokens(uri) if tokens is not None else None) or fallback


def backoff(attempts: int, *, first: float = FIRST_RETRY, cap: float = MAX_BACKOFF) -> float:
    """Seconds before retry number ``attempts`` (1 for the first retry)."""
    return float(min(cap, first * 2 ** max(0, attempts - 1)))


def install_schema(connection: sqlite3.Connection) -> None:
    """Create or upgrade the outbox tables in a database (idempotent)."""
    try:
        migrate(connection, MIGRATIONS, version_table="outbox_schema")
    except SchemaTooNewError as error:
        raise RuntimeError(
            f"the outbox tables have version {error.found}, newer than this pdn ({SCHEMA_VERSION})"
        ) from None


class Outbox:
    """Subscriptions and their pending events in a SQLite file, delivered by a thread."""

    def __init__(
        self,
        db_path: Path,
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
        pins: Pins | None = None,
        tokens: Pins | None = None,
    ) -> None:
        """``give_up_after``, ``max_subscriptions`` and ``max_backlog`` default to
        ``server.limits`` (the environment's ``PDN_SUBSCRIBER_EXPIRY``, ...); ``pins``: the
        certificates of HTTPS subscribers, pinned (``server.pins``); ``tokens(uri)``: the
        bearer token of that subscriber (a display's), before ``bearer_token``."""
        self.pins = pins
        self.tokens = tokens
        bounds = limits()
        self.db_path = db_path
        # Sent as "Authorization: Bearer" with every update, for subscribers (displays) that
        # require a token for changes; a subscriber-uri with user:password@ uses Basic instead.
        self.bearer_token = bearer_token
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
        self._dropped = 0
        self._expired = 0
        db_path.parent.mkdir(parents=True, exist_ok=True)
        self._connection = connect(db_path)
        install_schema(self._connection)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._delivered = 0

    # Subscriptions

    def subscribe(self, topic: str, uri: str, signing_secret: str | None = None) -> bool:
        """Add (topic, uri); True when it is new, False when it already existed.

        ``signing_secret`` (``whsec_...``, checked by the caller): every update to it is signed
        (``server.signing``). Subscribing again sets the secret given (or none) on the
        existing subscription. SubscriptionLimitError when ``topic`` has
        ``max_subscriptions`` already."""
        with self._lock, transaction(self._connection) as connection:
            exists = connection.execute(
                "SELECT 1 FROM outbox_subscriptions WHERE topic = ? AND uri = ?", (topic, uri)
            ).fetchone()
            if exists is not None:
                connection.execute(
                    "UPDATE outbox_subscriptions SET signing_secret = ?"
                    " WHERE topic = ? AND uri = ?",
                    (signing_secret, topic, uri),
                )
                return False
            (count,) = connection.execute(
                "SELECT COUNT(*) FROM outbox_subscriptions WHERE topic = ?", (topic,)
            ).fetchone()
            if count >= self.max_subscriptions:
                raise SubscriptionLimitError(self.max_subscriptions)
            cursor = connection.execute(
                "INSERT INTO outbox_subscriptions (topic, uri, created, signing_secret)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (topic, uri) DO NOTHING",
                (topic, uri, time.time(), signing_secret),
            )
            created = cursor.rowcount > 0
        if created:
            log.info("%s: %s subscribed to %s", self.name, shown_uri(uri), topic)
        return created

    def unsubscribe(self, topic: str, uri: str) -> bool:
        """Remove (topic, uri) and its pending events; False when it was not subscribed."""
        with self._lock, transaction(self._connection) as connection:
            existed = _drop_subscription(connection, topic, uri)
        if existed:
            log.info("%s: %s unsubscribed from %s", self.name, shown_uri(uri), topic)
        return existed

    def subscribers(self, topic: str) -> list[str]:
        with self._lock:
            rows = self._connection.execute(
                "SELECT uri FROM outbox_subscriptions WHERE topic = ? ORDER BY id", (topic,)
            ).fetchall()
        return [str(uri) for (uri,) in rows]

    # Events

    def publish(
        self,
        topic: str,
        body: bytes,
        content_type: str,
        *,
        connection: sqlite3.Connection | None = None,
        latest_only: bool = False,
    ) -> int:
        """Queue one event per current subscriber of ``topic``; returns how many.

        With ``connection`` the rows join the caller's open transaction (call ``notify()``
        after the commit); without, they are committed here and delivery starts at once.
        ``latest_only``: a failing subscriber's older events of ``topic`` are dropped, so it
        gets the newest alone when it answers again. Either way each subscriber's backlog is
        kept to ``max_backlog`` events, the oldest dropped.
        """
        if connection is not None:
            return self._queue(connection, topic, body, content_type, latest_only)
        with self._lock, transaction(self._connection) as own:
            count = self._queue(own, topic, body, content_type, latest_only)
        self.notify()
        return count

    def _queue(
        self,
        connection: sqlite3.Connection,
        topic: str,
        body: bytes,
        content_type: str,
        latest_only: bool,
    ) -> int:
        ids = [
            sid
            for (sid,) in connection.execute(
                "SELECT id FROM outbox_subscriptions WHERE topic = ? ORDER BY id", (topic,)
            ).fetchall()
        ]
        now = time.time()
        dropped = 0
        for sid in ids:
            # A failing subscriber's head event carries since when it fails (first_failure),
            # its attempts and its next attempt: kept on whichever event becomes the head, so
            # dropping events never resets its back-off or its expiry.
            failing = connection.execute(
                "SELECT MIN(first_failure), MAX(attempts), MIN(next_attempt) FROM outbox_events"
                " WHERE subscription_id = ? AND first_failure IS NOT NULL",
                (sid,),
            ).fetchone()
            if latest_only and failing[0] is not None:
                dropped += connection.execute(
                    "DELETE FROM outbox_events WHERE subscription_id = ? AND topic = ?",
                    (sid, topic),
                ).rowcount
            else:
                # Room for the new event: at most max_backlog - 1 older ones stay.
                dropped += connection.execute(
                    "DELETE FROM outbox_events WHERE subscription_id = ? AND id <= ("
                    " SELECT id FROM outbox_events WHERE subscription_id = ?"
                    " ORDER BY id DESC LIMIT 1 OFFSET ?)",
                    (sid, sid, self.max_backlog - 1),
                ).rowcount
            connection.execute(
                "INSERT INTO outbox_events (subscription_id, event_id, topic, body, content_type,"
                " created, next_attempt) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (sid, str(uuid.uuid4()), topic, body, content_type, now, now),
            )
            if failing[0] is not None:
                connection.execute(
                    "UPDATE outbox_events SET first_failure = MIN(COALESCE(first_failure, ?), ?),"
                    " attempts = MAX(attempts, ?), next_attempt = MAX(next_attempt, ?)"
                    " WHERE id = (SELECT MIN(id) FROM outbox_events WHERE subscription_id = ?)",
                    (failing[0], failing[0], failing[1], failing[2], sid),
                )
        if dropped:
            self._dropped += dropped
            log.debug("%s: %d undelivered event(s) of %s dropped", self.name, dropped, topic)
        return len(ids)

    def notify(self) -> None:
        """Tell the delivery thread that new events are committed (thread-safe, cheap)."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            # RuntimeError: the loop closed meanwhile; the next start picks the events up.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    def stats(self) -> dict[str, Any]:
        """Figures for a health page: subscriptions, pending events, oldest pending event."""
        with self._lock:
            subscriptions = self._connection.execute(
                "SELECT COUNT(*) FROM outbox_subscriptions"
            ).fetchone()[0]
            pending, oldest = self._connection.execute(
                "SELECT COUNT(*), MIN(created) FROM outbox_events"
            ).fetchone()
        return {
            "subscriptions": int(subscriptions),
            "pending-events": int(pending),
            "oldest-pending-age": None if oldest is None else max(0.0, time.time() - oldest),
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
            target=self._run, args=(ready,), name=f"outbox-{self.name}", daemon=True
        )
        self._thread.start()
        ready.wait(5)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop delivering; POSTs in flight are abandoned and sent again after a restart."""
        thread = self._thread
        if thread is None:
            return
        self._stopping = True
        self.notify()
        thread.join(timeout)
        self._thread = None
        with self._lock:
            self._connection.close()

    def _run(self, ready: threading.Event) -> None:
        try:
            asyncio.run(self._main(ready))
        except Exception:
            log.exception("%s: the delivery thread failed", self.name)

    async def _main(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        connection = connect(self.db_path, synchronous="NORMAL")
        poster = Poster(fallback_connections=self.max_connections, pins=self.pins)
        semaphore = asyncio.Semaphore(self.max_connections)
        lanes: dict[int, asyncio.Task[None]] = {}
        ready.set()
        log.info("%s: webhook delivery started", self.name)
        try:
            while not self._stopping:
                self._wake.clear()
                for (subscription_id,) in connection.execute(
                    "SELECT DISTINCT subscription_id FROM outbox_events"
                ).fetchall():
                    if subscription_id not in lanes:
                        task = asyncio.create_task(
                            self._lane(connection, poster, semaphore, subscription_id)
                        )
                        lanes[subscription_id] = task
                        task.add_done_callback(partial(_forget_lane, lanes, subscription_id))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), POLL_INTERVAL)
        finally:
            for task in list(lanes.values()):
                task.cancel()
            await asyncio.gather(*lanes.values(), return_exceptions=True)
            await poster.aclose()
            connection.close()
            self._loop = None
            log.info("%s: webhook delivery stopped", self.name)

    async def _lane(
        self,
        connection: sqlite3.Connection,
        poster: Poster,
        semaphore: asyncio.Semaphore,
        subscription_id: int,
    ) -> None:
        """Deliver one subscriber's events in order until none is left."""
        while not self._stopping:
            row = connection.execute(
                "SELECT e.id, e.event_id, e.topic, e.body, e.content_type, e.attempts,"
                " e.next_attempt, e.first_failure, s.uri, s.signing_secret"
                " FROM outbox_events e JOIN outbox_subscriptions s ON s.id = e.subscription_id"
                " WHERE e.subscription_id = ? ORDER BY e.id LIMIT 1",
                (subscription_id,),
            ).fetchone()
            if row is None:
                # Events whose subscription is gone (unsubscribed meanwhile) are dropped.
                connection.execute(
                    "DELETE FROM outbox_events WHERE subscription_id = ? AND subscription_id"
                    " NOT IN (SELECT id FROM outbox_subscriptions)",
                    (subscription_id,),
                )
                return
            (
                rowid,
                event_id,
                topic,
                body,
                content_type,
                attempts,
                next_attempt,
                first_failure,
                uri,
                signing_secret,
            ) = row
            wait = next_attempt - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
                continue  # read again: the subscriber may have unsubscribed meanwhile
            async with semaphore:
                headers = {
                    "Content-Type": content_type,
                    "X-PDN-Event-Id": event_id,
                    "X-PDN-Topic": topic,
                }
                token = bearer_for(uri, self.tokens, self.bearer_token)
                if token:
                    headers["Authorization"] = f"Bearer {token}"
                if signing_secret:  # signed as sent: each retry has its own timestamp
                    headers.update(signed_headers(signing_secret, event_id, bytes(body)))
                result = await poster.post(uri, bytes(body), headers, timeout=self.timeout)
            now = time.time()
            if result.ok:
                connection.execute("DELETE FROM outbox_events WHERE id = ?", (rowid,))
                self._delivered += 1
                if attempts:
                    log.info("%s: %s answers again (event %s)", self.name, shown_uri(uri), event_id)
                continue
            attempts += 1
            first_failure = first_failure or now
            if now - first_failure >= self.give_up_after:
                with transaction(connection):
                    _drop_subscription(connection, topic, uri)
                self._expired += 1
                log.warning(
                    "%s: dropped the subscription of %s to %s: failing for %.0f s (%s)",
                    self.name,
                    shown_uri(uri),
                    topic,
                    now - first_failure,
                    result.error,
                )
                return
            delay = backoff(attempts, first=self.first_retry, cap=self.max_backoff)
            connection.execute(
                "UPDATE outbox_events SET attempts = ?, next_attempt = ?, first_failure = ?,"
                " last_error = ? WHERE id = ?",
                (attempts, now + delay, first_failure, result.error, rowid),
            )
            level = logging.INFO if attempts == 1 else logging.DEBUG
            log.log(
                level, "%s: POST to %s failed (%s); retry %d in %.0f s",
                self.name, shown_uri(uri), result.error, attempts, delay,
            )  # fmt: skip


def _forget_lane(lanes: dict[int, asyncio.Task[None]], key: int, _task: object) -> None:
    lanes.pop(key, None)


def _drop_subscription(connection: sqlite3.Connection, topic: str, uri: str) -> bool:
    row = connection.execute(
        "SELECT id FROM outbox_subscriptions WHERE topic = ? AND uri = ?", (topic, uri)
    ).fetchone()
    if row is None:
        return False
    connection.execute("DELETE FROM outbox_events WHERE subscription_id = ?", (row[0],))
    connection.execute("DELETE FROM outbox_subscriptions WHERE id = ?", (row[0],))
    return True
