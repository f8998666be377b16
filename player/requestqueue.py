"""The request queue of one zone: JSON requests waiting for the screen, kept on disk.

A request is shown for its duration; one interrupted by a ``highest`` item keeps the time it
had left, and so does the one on screen when the display stops (by the wall clock: a request
that ran out while the display was down is dropped at start). Every change is written through
the engine's store (``player.store``, SQLite); a failed write (a full disk) never stops the
screen: the queue goes on in memory, and at worst a request replays after a restart. Not
thread-safe: the engine calls it under its lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

log = logging.getLogger("pdn.engine")

QUEUE_LIMIT = 100


class RequestStore(Protocol):
    """Where the queue is kept (``player.store.DisplayStore``)."""

    def queued_requests(self) -> list[Any]: ...
    def push_request(self, url: str, duration: float, received: float) -> int: ...
    def update_request(self, request_id: int, remaining: float, shown_at: float | None) -> None: ...
    def remove_request(self, request_id: int) -> None: ...


@dataclass
class Request:
    id: int
    url: str
    duration: float
    remaining: float


class RequestQueue:
    """The requests in the order they came, the first one next."""

    def __init__(self, store: RequestStore, now: datetime) -> None:
        self._store = store
        self._queue: list[Request] = []
        self._restore(now)

    def _restore(self, now: datetime) -> None:
        """Rebuild the queue from the store; the request that was on screen keeps the time
        it had left by the wall clock."""
        for stored in self._store.queued_requests():
            remaining = float(stored.remaining)
            if stored.shown_at is not None:
                remaining -= max(0.0, now.timestamp() - float(stored.shown_at))
                if remaining <= 0.05:
                    self._store.remove_request(stored.id)
                    log.info(
                        "request %d (%s) ran out while the display was down", stored.id, stored.url
                    )
                    continue
                self._store.update_request(stored.id, remaining, None)
            self._queue.append(Request(stored.id, stored.url, float(stored.duration), remaining))
        if self._queue:
            log.info("%d queued request(s) restored", len(self._queue))

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[Request]:
        return iter(list(self._queue))

    def push(self, url: str, seconds: float, received: datetime) -> str | None:
        """Queue a request; None when queued, else why not."""
        if len(self._queue) >= QUEUE_LIMIT:
            return f"the request queue is full ({QUEUE_LIMIT} items)"
        request_id = self._store.push_request(url, seconds, received.timestamp())
        self._queue.append(Request(request_id, url, seconds, seconds))
        log.info(
            "request %d queued: %s for %g s (%d in queue)",
            request_id,
            url,
            seconds,
            len(self._queue),
        )
        return None

    def shown(self, request_id: int, length: float, at: datetime) -> None:
        """The request is on screen from ``at`` for ``length`` seconds."""
        self._persist(self._store.update_request, request_id, length, at.timestamp())

    def pause(self, request_id: int, left: float) -> None:
        """A ``highest`` item took the screen: the request keeps the time it has left."""
        for request in self._queue:
            if request.id == request_id:
                request.remaining = max(0.0, left)
                self._persist(self._store.update_request, request.id, request.remaining, None)
                log.info("request %d paused with %.1f s left", request.id, request.remaining)

    def finish(self, request_id: int) -> None:
        """The request is done (shown for its time, or failed): it leaves the queue."""
        self._persist(self._store.remove_request, request_id)
        self._queue = [r for r in self._queue if r.id != request_id]
        log.info("request %d done (%d left in queue)", request_id, len(self._queue))

    def _persist(self, write: Callable[..., None], *args: Any) -> None:
        try:
            write(*args)
        except Exception as error:
            log.warning("could not store the queue's progress (%s); going on in memory", error)
