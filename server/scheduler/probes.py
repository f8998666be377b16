"""When each display is read next, shared by every scheduler process (issue 14).

The scheduler reads its displays in the background: their ``GET /`` (name, sensors) and
playback subscription (kind ``info``, :mod:`server.scheduler.registry`), and their
``/x/health`` and screenshot (kind ``health``, :mod:`server.scheduler.fleetstatus`). Each
(display, kind) has a due time in a :class:`ProbeQueue`; a :class:`ProbeLoop` per kind *claims*
up to as many due displays as it has idle workers (a claim moves the due time
:func:`probe_lease` seconds ahead, so a process that dies holding claims only delays those
displays by that much), reads them
and sets the next due time: the kind's interval after a success, a doubling back-off after
failures (a display that is switched off is read ever less often, up to ``max_backoff``).

- :class:`MemoryProbeQueue`: one process (SQLite): due times in memory, every display due at
  start, as before.
- ``server.scheduler.pgfleet.PgProbeQueue``: due times are columns of the displays table,
  claimed with ``FOR UPDATE SKIP LOCKED`` in due order through an index, so several processes
  divide the work and each display is read once per round by one of them, whatever the number
  of processes; a registration makes its display due in the same statement that stores it.

Nothing here is O(number of displays) per round: a claim reads ``limit`` rows of an index.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from server.scheduler.storage import SchedulerStorage, display_key

log = logging.getLogger("pdn.scheduler.probes")

KINDS = ("info", "health")


def probe_lease() -> float:
    """Seconds a claimed display is left to the process that claimed it, then any may read it
    (a read takes 15 s at worst): ``PDN_PROBE_LEASE``, default 60."""
    value = float(os.environ.get("PDN_PROBE_LEASE") or 60.0)
    if value <= 0:
        raise ValueError("PDN_PROBE_LEASE must be a positive number of seconds")
    return value


@dataclass(frozen=True)
class Claim:
    url: str
    failures: int  # reads of this kind that failed in a row before this one


class ProbeQueue(Protocol):
    def claim(self, kind: str, limit: int, lease: float) -> list[Claim]:
        """Up to ``limit`` displays whose ``kind`` read is due, most overdue first; each is
        not due again for ``lease`` seconds unless :meth:`done` says when."""

    def done(self, kind: str, url: str, failures: int, next_in: float) -> None:
        """The read of ``url`` is over: ``failures`` in a row now (0: it answered), next due in
        ``next_in`` seconds."""

    def due_now(self, url: str) -> None:
        """Read this display soon (every kind): it has just registered."""


def next_read_in(interval: float, failures: int, max_backoff: float) -> float:
    """``interval`` after a success; after failures a back-off from ``interval`` (or 10 s, if
    shorter), four times longer each time, up to ``max_backoff`` (or ``interval``, if longer):
    10, 40, 160, 300 s. Quadrupling, not doubling: a fleet registered while switched off (a
    site being installed) costs 4 reads per display in its first ten minutes, not 6."""
    if failures == 0:
        return interval
    first = min(interval, 10.0)
    return float(min(max(max_backoff, interval), first * 4 ** min(failures - 1, 20)))


class MemoryProbeQueue:
    """:class:`ProbeQueue` of one process: every registered display due at start."""

    def __init__(self, storage: SchedulerStorage) -> None:
        self._lock = threading.Lock()
        self._due: dict[tuple[str, str], tuple[float, int]] = {}  # (kind, key) -> (due, failures)
        self._urls: dict[str, str] = {}
        self._heaps: dict[str, list[tuple[float, str]]] = {kind: [] for kind in KINDS}
        for display in storage.displays():  # once, at start
            self.due_now(display.url)

    def due_now(self, url: str) -> None:
        key = display_key(url)
        now = time.time()
        with self._lock:
            self._urls[key] = url
            for kind in KINDS:
                self._set(kind, key, now, 0)

    def _set(self, kind: str, key: str, due: float, failures: int) -> None:
        self._due[(kind, key)] = (due, failures)
        heapq.heappush(self._heaps[kind], (due, key))

    def claim(self, kind: str, limit: int, lease: float) -> list[Claim]:
        now = time.time()
        claims: list[Claim] = []
        with self._lock:
            heap = self._heaps[kind]
            while heap and len(claims) < limit and heap[0][0] <= now:
                due, key = heapq.heappop(heap)
                current = self._due.get((kind, key))
                if current is None or current[0] != due:
                    continue  # superseded by a later entry
                self._set(kind, key, now + lease, current[1])
                claims.append(Claim(self._urls[key], current[1]))
        return claims

    def done(self, kind: str, url: str, failures: int, next_in: float) -> None:
        key = display_key(url)
        with self._lock:
            if key in self._urls:
                self._set(kind, key, time.time() + next_in, failures)


#: read(claim) -> True when the display answered.
Reader = Callable[[Claim], bool]


class ProbeLoop:
    """Claims due displays of one kind and reads them on ``workers`` threads."""

    def __init__(
        self,
        queue: ProbeQueue,
        kind: str,
        read: Reader,
        *,
        interval: float,
        max_backoff: float,
        workers: int = 4,
    ) -> None:
        self._queue = queue
        self._kind = kind
        self._read = read
        self._interval = interval
        self._max_backoff = max_backoff
        self._workers = workers
        self._lease = probe_lease()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"probe-{kind}")
        self._busy = threading.Semaphore(workers)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # With nothing due, look again this often (other processes' registrations, due times).
        self._idle_wait = min(1.0, interval)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"probes-{self._kind}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._busy.acquire()  # one idle worker at least before claiming
            free = 1
            while free < self._workers and self._busy.acquire(blocking=False):
                free += 1
            try:
                claims = self._queue.claim(self._kind, free, self._lease)
            except Exception:
                log.exception("cannot claim displays to read (%s)", self._kind)
                claims = []
            for claim in claims:
                try:
                    self._pool.submit(self._one, claim)
                except RuntimeError:  # shut down
                    return
            for _unused in range(free - len(claims)):
                self._busy.release()
            if not claims:
                self._wake.wait(self._idle_wait)
                self._wake.clear()

    def _one(self, claim: Claim) -> None:
        failures = claim.failures + 1
        try:
            if self._read(claim):
                failures = 0
        except Exception:
            if not self._stop.is_set():
                log.exception("reading %s (%s) failed", claim.url, self._kind)
        finally:
            self._busy.release()
        if self._stop.is_set():
            return  # shutting down (the storage may be closed): the claim runs out instead
        next_in = next_read_in(self._interval, failures, self._max_backoff)
        try:
            self._queue.done(self._kind, claim.url, failures, next_in)
        except Exception:
            log.exception("cannot store when to read %s next (%s)", claim.url, self._kind)
