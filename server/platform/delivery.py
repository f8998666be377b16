"""How the webhook outbox delivers, on either database (``server.platform.outbox.Outbox.start``
runs this in its delivery thread): the one delivery core, with a claim strategy per database.

The loop, per process:

1. **Claim** up to ``CLAIM_BATCH`` subscribers that have pending events, each with its oldest
   event (:class:`Claims`: on SQLite the one process takes every subscriber it is not already
   working on, ``server.platform.sqliteoutbox``; on PostgreSQL, processes claiming together
   take disjoint subscribers and hold them by a lease, ``server.platform.pgoutbox``). It claims
   while it has room (``max_lanes`` subscribers being worked on, those waiting out a back-off
   not counted), whenever it is woken (a publish, a NOTIFY) and every ``Claims.poll`` seconds.
2. **Deliver**: one lane (task) per claimed subscriber POSTs its events one at a time, oldest
   first (per-subscriber order). POSTs in flight are bounded (:class:`Slots`): subscribers that
   failed last time have their own share, so dead, refusing or silent receivers never take the
   slots of live ones.
3. **Acknowledge** in batches (:class:`Batcher`): one call deletes every event answered 2xx
   since the last batch, clears those subscribers' back-off and returns each one's next event
   (none: the subscriber is let go). Failures go the same way: a back-off (:func:`backoff`:
   1 s, 2 s, 4 s ... capped), or expiry for a subscriber failing for ``give_up_after``.

A process that dies between a receiver's 2xx and the batch that deletes that event leaves the
event in the database; it is sent again with the same ``X-PDN-Event-Id`` (by another process
once the lease runs out, on PostgreSQL; at the next start, on SQLite), and the receiver
de-duplicates by that id (docs/interface.md, "Pushed updates"): at-least-once delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import urlsplit

from server.platform.net import shown_uri
from server.platform.pins import Pins
from server.platform.signing import signed_headers
from server.platform.webhookpost import Delivery, Poster

__all__ = [
    "CLAIM_BATCH",
    "Claims",
    "DeliveryLoop",
    "Failure",
    "Head",
    "Settings",
    "Slots",
    "Tally",
    "backoff",
    "bearer_for",
    "head_of",
]

log = logging.getLogger("pdn.outbox")

FIRST_RETRY = 1.0
MAX_BACKOFF = 300.0
CLAIM_BATCH = 500
USUAL_WEIGHT = 0.05  # of each answer time in the moving average
TRANSIENT_RETRIES = 3
BATCH_LIMIT = 1000  # acknowledgements (or failures, or re-reads) per statement


def backoff(attempts: int, *, first: float = FIRST_RETRY, cap: float = MAX_BACKOFF) -> float:
    """Seconds before retry number ``attempts`` (1 for the first retry)."""
    return float(min(cap, first * 2 ** max(0, attempts - 1)))


def bearer_for(uri: str, tokens: Pins | None, fallback: str | None) -> str | None:
    """The bearer token sent with an update to ``uri``: its own (``tokens``), else
    ``fallback``; none to a subscriber-uri with ``user:password@`` (Basic is sent instead)."""
    if "@" in urlsplit(uri).netloc:
        return None
    return (tokens(uri) if tokens is not None else None) or fallback


@dataclass
class Tally:
    """What this process did (``Outbox.stats``)."""

    delivered: int = 0
    dropped: int = 0
    expired: int = 0


@dataclass(frozen=True)
class Head:
    """A subscriber this process is working on, and its oldest pending event."""

    subscription: int
    uri: str
    attempts: int
    wait: float  # seconds of back-off left (0: due now)
    failing_for: float | None  # seconds since its first failure (None: not failing)
    row: int | None  # the event's row; None: nothing pending (the subscriber was let go)
    event_id: str = ""
    topic: str = ""
    body: bytes = b""
    content_type: str = ""
    signing_secret: str | None = None  # whsec_...: the updates are signed


def head_of(row: tuple[Any, ...]) -> Head:
    """A :class:`Head` from a row: subscriber, uri, attempts, wait, failing for, event row,
    event id, topic, body, content type, signing secret."""
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


@dataclass(frozen=True)
class Failure:
    """A POST that failed: the subscriber's attempts now, the back-off before the next."""

    subscription: int
    attempts: int
    delay: float
    error: str


class Claims(Protocol):
    """Where a delivery loop gets its work and records what came of it (one database's way).
    Each call is one transaction; a call that raised changed nothing."""

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        """What a failing database raises (a lane that meets one stops; its claim runs out)."""

    @property
    def transient(self) -> tuple[type[Exception], ...]:
        """Of those, what is worth running again at once (a deadlock, a serialisation
        failure)."""

    @property
    def poll(self) -> float:
        """Seconds between looks for work nobody woke the loop for."""

    @property
    def lease(self) -> float | None:
        """Seconds a claim lasts unless renewed (None: claims never run out, one process)."""

    @property
    def oldest_age(self) -> str:
        """SQL: seconds since the oldest pending event was queued, on the database's clock."""

    async def open(self, outbox: Settings) -> None: ...

    async def close(self) -> None:
        """Let go of what this process holds (others may take it at once)."""

    async def claim(self, limit: int, working: Collection[int]) -> list[Head]:
        """Up to ``limit`` subscribers with pending events that nobody works on (``working``:
        this process's lanes), each with its oldest event, now this process's."""

    async def acknowledge(self, done: list[tuple[int, int]]) -> list[Head | None]:
        """Delete the (subscriber, event row) answered 2xx and clear their back-off; per
        subscriber its next event (row None: nothing left, let go), or None when it is no
        longer this process's."""

    async def fail(self, failures: list[Failure]) -> list[tuple[str, float | None]]:
        """Record failed POSTs: ("waiting", None) for a back-off, ("expired", seconds
        failing) for a subscription dropped, ("lost", None) when no longer this process's."""

    async def reread(self, subscriptions: list[int]) -> list[Head | None]:
        """Each subscriber's oldest event again (after a back-off); those with none are let
        go (row None); None for one no longer this process's."""

    async def renew(self, subscriptions: list[int]) -> set[int]:
        """Renew the leases of these subscribers; those this process still holds."""

    async def listen(self, wake: asyncio.Event) -> None:
        """Set ``wake`` whenever another process publishes (returns at once where none can)."""


class Settings(Protocol):
    """What the delivery loop reads of its outbox (``server.platform.outbox.Outbox``)."""

    name: str
    timeout: float
    first_retry: float
    max_backoff: float
    give_up_after: float
    max_connections: int
    slow_after: float
    bearer_token: str | None
    tokens: Pins | None
    tally: Tally
    stopping: bool


Item = TypeVar("Item")
Result = TypeVar("Result")


class Batcher(Generic[Item, Result]):
    """Collects what lanes submit and runs one statement for all of it: while a statement
    runs, the next batch gathers, so batches grow with the load and a lone item waits for
    nothing but its own round trip."""

    def __init__(
        self,
        run: Callable[[list[Item]], Awaitable[list[Result]]],
        transient: tuple[type[Exception], ...] = (),
    ) -> None:
        self._run = run
        self._transient = transient
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
            except self._transient as error:
                if attempt >= TRANSIENT_RETRIES:
                    raise
                attempt += 1
                log.info("outbox: a batch of %d run again (%s)", len(items), error)

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
        self, outbox: Settings, claims: Claims, poster: Poster, wake: asyncio.Event
    ) -> None:
        self.outbox = outbox
        self.claims = claims
        self.poster = poster
        self.wake = wake
        self.lanes: dict[int, asyncio.Task[None]] = {}
        self.slots = Slots(outbox.max_connections, slow_after=outbox.slow_after)
        self.max_lanes = max(2 * outbox.max_connections, CLAIM_BATCH)
        self._busy = 0
        self._room = asyncio.Event()
        transient = claims.transient
        self._acks: Batcher[tuple[int, int], Head | None] = Batcher(claims.acknowledge, transient)
        self._failures: Batcher[Failure, tuple[str, float | None]] = Batcher(claims.fail, transient)
        self._rereads: Batcher[int, Head | None] = Batcher(claims.reread, transient)

    def tasks(self) -> list[asyncio.Task[None]]:
        batchers = (self._acks.task, self._failures.task, self._rereads.task)
        return [*self.lanes.values(), *(task for task in batchers if task is not None)]

    async def main(self) -> None:
        """Deliver until the outbox stops (its listener and lease renewal beside)."""
        helpers = [asyncio.create_task(self.claims.listen(self.wake))]
        if self.claims.lease is not None:
            helpers.append(asyncio.create_task(self.heartbeat(self.claims.lease)))
        try:
            await self.run()
        finally:
            tasks = [*helpers, *self.tasks()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # Claims

    async def run(self) -> None:
        while not self.outbox.stopping:
            self.wake.clear()
            try:
                await self._claim_while_room()
            except self.claims.errors as error:
                log.warning("%s: could not claim deliveries: %s", self.outbox.name, error)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.claims.poll)

    async def _claim_while_room(self) -> None:
        while not self.outbox.stopping:
            room = self.max_lanes - self._busy
            if room <= 0:
                self._room.clear()
                with contextlib.suppress(TimeoutError):  # a second at most: stop() waits
                    await asyncio.wait_for(self._room.wait(), 1.0)
                continue
            limit = min(CLAIM_BATCH, room)
            heads = await self.claims.claim(limit, self.lanes.keys())
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
        except self.claims.errors as error:
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
                # Let go: claim again, in case an event came meanwhile (this lane no longer
                # counts as working on the subscriber).
                _forget(self.lanes, head.subscription, asyncio.current_task())
                self.wake.set()
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
            Failure(head.subscription, attempts, delay, result.error or "failed")
        )
        if outcome == "expired":
            outbox.tally.expired += 1
            log.warning(
                "%s: dropped the subscription of %s to %s: failing for %.0f s (%s)",
                outbox.name, shown_uri(head.uri), head.topic, failed_for or 0.0, result.error,
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

    # Leases

    async def heartbeat(self, lease: float) -> None:
        """Renew the leases of the subscribers this process's lanes work on; a lane whose
        claim was lost stops. A claim whose lane died is not renewed: it runs out, and any
        process takes the subscriber again."""
        while True:
            await asyncio.sleep(lease / 3)
            before = dict(self.lanes)  # lanes started later hold claims this may not see
            try:
                held = await self.claims.renew(list(before))
            except self.claims.errors as error:
                log.warning("%s: could not renew delivery leases: %s", self.outbox.name, error)
                continue
            for sid, task in before.items():
                if sid not in held:
                    task.cancel()


def _forget(lanes: dict[int, asyncio.Task[None]], key: int, task: object) -> None:
    if lanes.get(key) is task:
        del lanes[key]
