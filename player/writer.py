"""Writes the screen must not wait for: made in order on a thread of their own.

The engine reports an item shown, and a request's progress, from the GUI thread on the instant
the item is shown. A write there waits for its fsync (``synchronous=FULL``), and an SD card or
a disk that others share can take from tens of milliseconds to seconds to flush: the screen
stands still for as long (three displays on one shared disk have frozen together for 38 s). So
these writes are handed to an :class:`OrderedWriter`, which makes them one after the other, in
the order given, and the caller goes on drawing.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from player.engine import EngineStore

if TYPE_CHECKING:
    from player.store import DisplayStore

__all__ = ["DeferredQueueStore", "OrderedWriter", "StoredZoneQueues"]

log = logging.getLogger("pdn.writer")

_Job = tuple[Callable[..., object], tuple[Any, ...], str]


class OrderedWriter:
    """A thread that runs the writes handed to it, in order; :meth:`close` runs what is left."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._pending = 0
        self._done = threading.Condition(threading.Lock())
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, write: Callable[..., object], *args: Any, failed: str) -> None:
        """Run ``write(*args)`` after the writes before it; returns at once. When it raises,
        ``failed`` (what could not be done) is logged with the error."""
        with self._done:
            self._pending += 1
        self._jobs.put((write, args, failed))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write handed over is made (False: not within ``timeout`` s)."""
        with self._done:
            return self._done.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Make the writes still queued, then stop the thread."""
        self._jobs.put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("%s: writes still queued after %.0f s at exit", self._thread.name, timeout)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            write, args, failed = job
            try:
                write(*args)
            except Exception as error:
                log.warning("could not %s (%s)", failed, error)
                log.debug("the failed write", exc_info=True)
            finally:
                with self._done:
                    self._pending -= 1
                    self._done.notify_all()


class DeferredQueueStore:
    """The engine's request queue store, with the progress written by an :class:`OrderedWriter`.

    A request is added to the store directly (``POST /schedule``, on the API's thread: it answers
    with the request stored); what the engine writes on the GUI thread, a request's time left and
    its end, goes to the writer. A failed write leaves the queue going on in memory: at worst a
    request replays after a restart.
    """

    def __init__(self, store: EngineStore, writer: OrderedWriter) -> None:
        self._store = store
        self._writer = writer

    def queued_requests(self) -> list[Any]:
        return self._store.queued_requests()

    def push_request(self, url: str, duration: float, received: float) -> int:
        return self._store.push_request(url, duration, received)

    def update_request(self, request_id: int, remaining: float, shown_at: float | None) -> None:
        self._writer.submit(
            self._store.update_request,
            request_id,
            remaining,
            shown_at,
            failed=f"store request {request_id}'s progress; going on in memory",
        )

    def remove_request(self, request_id: int) -> None:
        self._writer.submit(
            self._store.remove_request,
            request_id,
            failed=f"remove finished request {request_id}; it may replay after a restart",
        )


class StoredZoneQueues:
    """The request queues of the zones other than main (``player.zones.ZoneQueues``), kept in
    the display's store by layout and zone; with a ``writer``, their progress is written by it
    as the main zone's is (:class:`DeferredQueueStore`)."""

    def __init__(self, store: DisplayStore, writer: OrderedWriter | None = None) -> None:
        self._store = store
        self._writer = writer

    def queue(self, layout: str, zone: str) -> EngineStore:
        queue = self._store.zone_requests(layout, zone)
        return queue if self._writer is None else DeferredQueueStore(queue, self._writer)

    def keep(self, zones: set[tuple[str, str]]) -> None:
        gone = self._store.keep_zone_requests(zones)
        if gone:
            log.info("%d request(s) to zones no longer scheduled forgotten", gone)
