"""How the PostgreSQL outbox delivers (``server.pgoutbox.PgOutbox.start`` runs this in its
delivery thread): claims, POSTs and acknowledgements in batches, so that one process delivers
thousands of events a second with a handful of statements, not eight round trips per event.

The loop, per process:

1. **Claim** up to ``CLAIM_BATCH`` subscribers that have pending events and no live owner, each
   with its oldest event, in one statement (``FOR UPDATE SKIP LOCKED``: processes claiming
   together take disjoint subscribers; ``owner`` and ``lease_until`` set in the same ``UPDATE
   ... RETURNING``). It claims while it has room (``max_lanes`` subscribers being worked on,
   those waiting out a back-off not counted), on every NOTIFY, and every half lease (a dead
   process's leases run out and nobody notifies).
2. **Deliver**: one lane (task) per claimed subscriber POSTs its events one at a time, oldest
   first (per-subscriber order). POSTs in flight are bounded (:class:`Slots`): subscribers that
   failed last time have their own share, so dead, refusing or silent receivers never take the
   slots of live ones.
3. **Acknowledge** in batches: one statement deletes every event answered 2xx since the last
   batch, clears those subscribers' back-off, returns each one's next event and lets go of the
   claims with nothing left. Failures go the same way (back-off or expiry, one statement).

What "exactly once" means here: no event is ever POSTed by two live processes (a subscriber's
events are sent only by the process holding its claim, and a lane whose claim was lost stops).
A process that dies (``kill -9``) between a receiver's 2xx and the batch that deletes that
event leaves the event in the database; when its lease runs out another process sends it again
with the same ``X-PDN-Event-Id``, and the receiver de-duplicates by that id (INTERFACE.md). So
delivery is at-least-once, with duplicates only from a process dying inside that window: the
POST's answer plus at most one batch statement (milliseconds).

Releasing a claim and publishing need no lock between them: a release decides "nothing left"
on its statement's snapshot, so an event committed meanwhile may see its subscriber released
by a statement that did not see it. The releasing process therefore claims again after every
release (its next snapshot sees both), and a publisher that commits after the release is
followed by its NOTIFY, which wakes every process to claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool

from server.net import shown_uri
from server.outbox import backoff, bearer_for
from server.signing import signed_headers
from server.webhookpost import Delivery, Poster

if TYPE_CHECKING:
    from server.pgoutbox import PgOutbox

__all__ = ["CLAIM_BATCH", "DeliveryLoop", "Head", "Slots", "Tally"]

log = logging.getLogger("pdn.outbox")

CLAIM_BATCH = 500
USUAL_WEIGHT = 0.05  # of each answer time in the moving average
TRANSIENT_RETRIES = 3
BATCH_LIMIT = 1000  # acknowledgements (or failures, or re-reads) per statement

AsyncPool = AsyncConnectionPool[psycopg.AsyncConnection[Any]]

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


@dataclass
class Tally:
    """What this process did (``PgOutbox.stats``)."""

    delivered: int = 0
    dropped: int = 0
    expired: int = 0


@dataclass(frozen=True)
class Head:
    """A subscriber this process holds the claim of, and its oldest pending event."""

    subscription: int
    uri: str
    attempts: int
    wait: float  # seconds of back-off left (0: due now)
    failing_for: float | None  # seconds since its first failure (None: not failing)
    row: int | None  # the event's row; None: nothing pending (the claim was let go)
    event_id: str = ""
    topic: str = ""
    body: bytes = b""
    content_type: str = ""
    signing_secret: str | None = None  # whsec_...: the updates are signed


def _head(row: tuple[Any, ...]) -> Head:
    sub, uri, attempts, wait, failing, event_row, event_id, topic, body, content_type, secret = row
    return Head(
        subscription=int(sub),
        uri=str(uri),
        attempts=int(attempts),
        wait=max(0.0, float(wait or 0.0)),
        failing_for=None if failing is None else float(failing),
        row=None if event_row is None else int(event_row),
        event_id=str(event_id or ""),
        topic=str(topic or ""),
        body=bytes(body or b""),
        content_type=str(content_type or ""),
        signing_secret=str(secret) if secret else None,
    )


Item = TypeVar("Item")
Result = TypeVar("Result")


class Batcher(Generic[Item, Result]):
    """Collects what lanes submit and runs one statement for all of it: while a statement
    runs, the next batch gathers, so batches grow with the load and a lone item waits for
    nothing but its own round trip."""

    def __init__(self, run: Callable[[list[Item]], Awaitable[list[Result]]]) -> None:
        self._run = run
        self._queue: list[tuple[Item, asyncio.Future[Result]]] = []
        self.task: asyncio.Task[None] | None = None

    async def submit(self, item: Item) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._drain())
        return await future

    async def _run_retrying(self, items: list[Item]) -> list[Result]:
        """The statement is one transaction: one that failed changed nothing, run it again."""
        attempt = 1
        while True:
            try:
                return await self._run(items)
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure) as error:
                if attempt >= TRANSIENT_RETRIES:
                    raise
                attempt += 1
                log.info("outbox: a batch of %d run again (%s)", len(items), error.sqlstate)

    async def _drain(self) -> None:
        await asyncio.sleep(0)  # whatever else is ready in this turn of the loop joins
        while self._queue:
            batch = self._queue[:BATCH_LIMIT]
            del self._queue[:BATCH_LIMIT]
            try:
                results = await self._run_retrying([item for item, _ in batch])
            except Exception as error:  # every lane of the batch sees the failure
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():  # a lane cancelled meanwhile cancelled its future
                    future.set_result(result)


class Slots:
    """Bounds the POSTs in flight so that receivers that are dead, refuse, or never answer
    never take the slots of live ones:

    - subscribers that answered last time share ``total - total // 4`` slots (fresh);
    - subscribers whose last POST failed share the other quarter;
    - a POST from the fresh share still unanswered after ``slow_after`` seconds, or four times
      the usual answer time if that is longer (a receiver that accepts and never answers, not
      yet known to fail), gives its fresh slot back and goes on in the failing share if it has
      room, else in an overflow of at most ``total`` more; only with both full does it keep
      its fresh slot. Nothing is cut short: a receiver that is merely slow still gets its
      whole time limit, and no duplicate. When every receiver is slow (the usual answer time
      grows), POSTs stay where they are rather than pile more connections onto them.

    At most ``2 * total`` POSTs are in flight (file descriptors stay bounded)."""

    def __init__(self, total: int, *, slow_after: float) -> None:
        self.failing_share = max(1, total // 4)
        self.fresh_share = max(1, total - self.failing_share)
        self.overflow_share = max(1, total)
        self.slow_after = slow_after
        self.usual = 0.0  # moving average of the fresh share's answer times, seconds
        self._fresh = asyncio.Semaphore(self.fresh_share)
        self._failing = asyncio.Semaphore(self.failing_share)
        self.overflow = 0  # slow POSTs in flight outside both shares

    async def post(self, send: Callable[[], Awaitable[Delivery]], *, failing: bool) -> Delivery:
        if failing:
            async with self._failing:
                return await send()
        await self._fresh.acquire()
        loop = asyncio.get_running_loop()
        began = loop.time()
        exchange = asyncio.ensure_future(send())
        try:
            done, _ = await asyncio.wait({exchange}, timeout=max(self.slow_after, 4 * self.usual))
        except BaseException:
            exchange.cancel()
            self._fresh.release()
            raise
        if done:
            self._fresh.release()
            self.usual += (loop.time() - began - self.usual) * USUAL_WEIGHT
            return exchange.result()
        if not self._failing.locked():
            await self._failing.acquire()  # free: not locked, and nothing ran in between
            self._fresh.release()
            try:
                return await exchange
            finally:
                self._failing.release()
        if self.overflow < self.overflow_share:
            self.overflow += 1
            self._fresh.release()
            try:
                return await exchange
            finally:
                self.overflow -= 1
        try:
            return await exchange
        finally:
            self._fresh.release()


class DeliveryLoop:
    """One process's delivery: the claim loop, its lanes, the batches and the lease renewal."""

    def __init__(
        self, outbox: PgOutbox, pool: AsyncPool, poster: Poster, wake: asyncio.Event
    ) -> None:
        self.outbox = outbox
        self.pool = pool
        self.poster = poster
        self.wake = wake
        self.lease = timedelta(seconds=outbox.lease)
        self.lanes: dict[int, asyncio.Task[None]] = {}
        self.slots = Slots(outbox.max_connections, slow_after=outbox.slow_after)
        self.max_lanes = max(2 * outbox.max_connections, CLAIM_BATCH)
        self._busy = 0
        self._room = asyncio.Event()
        self._acks: Batcher[tuple[int, int], Head | None] = Batcher(self._acknowledge)
        self._failures: Batcher[tuple[int, int, float, str], tuple[str, Any]] = Batcher(self._fail)
        self._rereads: Batcher[int, Head | None] = Batcher(self._reread)

    def tasks(self) -> list[asyncio.Task[None]]:
        batchers = (self._acks.task, self._failures.task, self._rereads.task)
        return [*self.lanes.values(), *(task for task in batchers if task is not None)]

    # Claims

    async def run(self) -> None:
        while not self.outbox.stopping:
            self.wake.clear()
            try:
                await self._claim_while_room()
            except psycopg.Error as error:
                log.warning("%s: could not claim deliveries: %s", self.outbox.name, error)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.outbox.lease / 2)

    async def _claim_while_room(self) -> None:
        while not self.outbox.stopping:
            room = self.max_lanes - self._busy
            if room <= 0:
                self._room.clear()
                with contextlib.suppress(TimeoutError):  # a second at most: stop() waits
                    await asyncio.wait_for(self._room.wait(), 1.0)
                continue
            limit = min(CLAIM_BATCH, room)
            async with self.pool.connection() as connection:
                cursor = await connection.execute(
                    CLAIM, {"limit": limit, "worker": self.outbox.worker, "lease": self.lease}
                )
                heads = [_head(row) for row in await cursor.fetchall()]
            for head in heads:
                old = self.lanes.get(head.subscription)
                if old is not None and not old.done():
                    # Our own lane still runs (it is ending, or its lease had run out): the
                    # claim is ours again, and a new lane takes over once that one is done.
                    task = asyncio.create_task(self._lane(head, after=old))
                else:
                    task = asyncio.create_task(self._lane(head))
                self.lanes[head.subscription] = task
                task.add_done_callback(partial(_forget, self.lanes, head.subscription))
            if len(heads) < limit:
                return

    def _working(self, change: int) -> None:
        self._busy += change
        if change < 0:
            self._room.set()

    # Lanes

    async def _lane(self, head: Head, *, after: asyncio.Task[None] | None = None) -> None:
        self._working(+1)
        try:
            if after is not None:  # first that lane ends, then what it left is read again
                await asyncio.wait({after})
                following = await self._rereads.submit(head.subscription)
                if following is None:
                    return
                head = following
            await self._deliver(head)
        except psycopg.Error as error:
            # Its claim is no longer renewed: when the lease runs out any process takes it.
            log.warning(
                "%s: delivery lane %d stopped: %s", self.outbox.name, head.subscription, error
            )
        except Exception:
            log.exception("%s: delivery lane %d failed", self.outbox.name, head.subscription)
        finally:
            self._working(-1)

    async def _deliver(self, first: Head) -> None:
        head: Head | None = first
        while head is not None and not self.outbox.stopping:
            row = head.row
            if row is None:
                self.wake.set()  # claim let go: claim again, in case an event came meanwhile
                return
            if head.wait > 0:
                await self._pause(head.wait)
                head = await self._rereads.submit(head.subscription)
                continue
            result = await self.slots.post(partial(self._post, head), failing=head.attempts > 0)
            if result.ok:
                following = await self._acks.submit((head.subscription, row))
                self.outbox.tally.delivered += 1
                if head.attempts:
                    log.info(
                        "%s: %s answers again (event %s)",
                        self.outbox.name,
                        shown_uri(head.uri),
                        head.event_id,
                    )
                head = following
            else:
                head = await self._failed(head, result)

    async def _post(self, head: Head) -> Delivery:
        headers = {
            "Content-Type": head.content_type,
            "X-PDN-Event-Id": head.event_id,
            "X-PDN-Topic": head.topic,
        }
        token = bearer_for(head.uri, self.outbox.tokens, self.outbox.bearer_token)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if head.signing_secret:  # signed as sent: each retry has its own timestamp
            headers.update(signed_headers(head.signing_secret, head.event_id, head.body))
        return await self.poster.post(head.uri, head.body, headers, timeout=self.outbox.timeout)

    async def _failed(self, head: Head, result: Delivery) -> Head | None:
        outbox = self.outbox
        attempts = head.attempts + 1
        delay = backoff(attempts, first=outbox.first_retry, cap=outbox.max_backoff)
        outcome, failed_for = await self._failures.submit(
            (head.subscription, attempts, delay, result.error or "failed")
        )
        if outcome == "expired":
            outbox.tally.expired += 1
            log.warning(
                "%s: dropped the subscription of %s to %s: failing for %.0f s (%s)",
                outbox.name, shown_uri(head.uri), head.topic, failed_for, result.error,
            )  # fmt: skip
            return None
        if outcome == "lost":
            return None
        level = logging.INFO if attempts == 1 else logging.DEBUG
        log.log(
            level, "%s: POST to %s failed (%s); retry %d in %.3g s",
            outbox.name, shown_uri(head.uri), result.error, attempts, delay,
        )  # fmt: skip
        await self._pause(delay)
        return await self._rereads.submit(head.subscription)

    async def _pause(self, seconds: float) -> None:
        """Wait out a back-off without counting as work (the claim is kept and renewed)."""
        self._working(-1)
        try:
            await asyncio.sleep(seconds)
        finally:
            self._working(+1)

    # Batches

    async def _acknowledge(self, done: list[tuple[int, int]]) -> list[Head | None]:
        """Delete the acknowledged events; per subscriber its next event (row None: the claim
        was let go, nothing left), or None when it is no longer this process's."""
        async with self.pool.connection() as connection:
            cursor = await connection.execute(
                ACKNOWLEDGE,
                {
                    "subs": [sub for sub, _ in done],
                    "rows": [row for _, row in done],
                    "worker": self.outbox.worker,
                    "lease": self.lease,
                },
            )
            rows = await cursor.fetchall()
        following = {
            int(sub): _head(
                (sub, uri, 0, 0.0, None, row, event_id, topic, body, content_type, secret)
            )
            for sub, uri, row, event_id, topic, body, content_type, secret in rows
        }
        return [following.get(sub) for sub, _ in done]

    async def _fail(self, failures: list[tuple[int, int, float, str]]) -> list[tuple[str, Any]]:
        """Record failed POSTs: per subscriber ("waiting", None) for a back-off, ("expired",
        seconds failing) for one dropped, ("lost", None) when no longer this process's."""
        async with self.pool.connection() as connection:
            cursor = await connection.execute(
                FAIL,
                {
                    "subs": [f[0] for f in failures],
                    "attempts": [f[1] for f in failures],
                    "delays": [f[2] for f in failures],
                    "errors": [f[3] for f in failures],
                    "worker": self.outbox.worker,
                    "lease": self.lease,
                    "give_up": timedelta(seconds=self.outbox.give_up_after),
                },
            )
            rows = await cursor.fetchall()
        outcomes: dict[int, tuple[str, Any]] = {
            int(sub): ("waiting", None) if topic is None else ("expired", float(failed_for))
            for sub, topic, failed_for in rows
        }
        return [outcomes.get(f[0], ("lost", None)) for f in failures]

    async def _reread(self, subs: list[int]) -> list[Head | None]:
        """Owned subscribers' oldest events (after a back-off); those with none are let go."""
        async with self.pool.connection() as connection:
            cursor = await connection.execute(REREAD, {"subs": subs, "worker": self.outbox.worker})
            heads = {head.subscription: head for head in map(_head, await cursor.fetchall())}
        return [heads.get(sub) for sub in subs]

    # Leases and wake-ups

    async def heartbeat(self) -> None:
        """Renew the leases of the subscribers this process's lanes work on; a lane whose
        claim was lost stops. A claim whose lane died is not renewed: it runs out, and any
        process takes the subscriber again."""
        while True:
            await asyncio.sleep(self.outbox.lease / 3)
            before = dict(self.lanes)  # lanes started later hold claims this may not see
            try:
                async with self.pool.connection() as connection:
                    cursor = await connection.execute(
                        RENEW,
                        {"worker": self.outbox.worker, "lease": self.lease, "subs": list(before)},
                    )
                    held = {sid for (sid,) in await cursor.fetchall()}
            except psycopg.Error as error:
                log.warning("%s: could not renew delivery leases: %s", self.outbox.name, error)
                continue
            for sid, task in before.items():
                if sid not in held:
                    task.cancel()

    async def listen(self, channel: str) -> None:
        """LISTEN on a connection of its own; every NOTIFY (or a lost connection) wakes."""
        outbox = self.outbox
        while not outbox.stopping:
            try:
                async with await psycopg.AsyncConnection.connect(
                    outbox.url, autocommit=True, application_name=f"pdn-{outbox.name}-listen"
                ) as connection:
                    await connection.execute(f"LISTEN {channel}")
                    self.wake.set()  # anything published while not listening
                    async for _ in connection.notifies():
                        self.wake.set()
            except psycopg.Error as error:
                log.warning("%s: LISTEN connection lost: %s", outbox.name, error)
                self.wake.set()
                await asyncio.sleep(1.0)


def _forget(lanes: dict[int, asyncio.Task[None]], key: int, task: asyncio.Task[None]) -> None:
    if lanes.get(key) is task:
        del lanes[key]
