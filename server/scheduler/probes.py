"""When each display is read next, shared by every scheduler process.

The scheduler reads its displays in the background: their ``GET /`` (name, sensors) and
playback subscription (kind ``info``, :mod:`server.scheduler.registry`), and their
``/x/health`` and screenshot (kind ``health``, :mod:`server.scheduler.fleetstatus`). Each
(display, kind) has a due time in a :class:`ProbeQueue`; a :class:`ProbeLoop` per kind *claims*
up to as many due displays as it has idle workers (a claim moves the due time
:func:`probe_lease` seconds ahead, so a process that dies holding claims only delays those
displays by that much), reads them and sets the next due time: the kind's interval after a
success, a back-off after failures (10, 40, 160, 300 s: a display that is switched off is
read ever less often). The due times of the reads that finished since the last claim are
recorded in one write, before the next claim.

What a switched-off fleet costs: while ``health`` finds a display unreachable its ``info`` read
waits (:data:`LEAD`, :data:`FOLLOWER`), so it is read once per back-off step; a display that
failed last time is first tried with a bare TCP connect (:func:`connect_problem`, tens of
microseconds for a refused connection), and its status is written only when the failure
differs from the last one (:attr:`Claim.last_error`).

- :class:`MemoryProbeQueue`: one process (SQLite): due times in memory, every display due at
  start.
- ``server.scheduler.pgfleet.PgProbeQueue``: due times are columns of the displays table,
  claimed with ``FOR UPDATE SKIP LOCKED`` in due order through an index, so several processes
  divide the work and each display is read once per round by one of them, whatever the number
  of processes; a registration makes its display due in the same statement that stores it.

Nothing here is O(number of displays) per round: a claim reads ``limit`` rows of an index.
"""

from __future__ import annotations

import heapq
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import requests

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


def probe_max_backoff(default: float) -> float:
    """The longest pause between reads of a display that does not answer: ``default`` (300 s
    for ``/x/health``, the refresh interval for ``GET /``), or ``PDN_PROBE_MAX_BACKOFF`` for
    both (benchmarks shorten it to reach the steady state of an offline fleet sooner)."""
    given = os.environ.get("PDN_PROBE_MAX_BACKOFF", "").strip()
    if not given:
        return default
    value = float(given)
    if value <= 0:
        raise ValueError("PDN_PROBE_MAX_BACKOFF must be a positive number of seconds")
    return value


@dataclass(frozen=True)
class Claim:
    url: str
    failures: int  # reads of this kind that failed in a row before this one
    last_error: str | None = None  # what the last of them failed with (None: it answered)
    first: bool = False  # the first read of this kind since the display registered

    @property
    def doubtful(self) -> bool:
        """Not known to answer: worth a bare connect before an HTTP read (a fleet registered
        while switched off costs a connect per display, not an HTTP client's failure)."""
        return self.first or self.failures > 0


@dataclass(frozen=True)
class Outcome:
    """What one read found. ``unreachable``: no connection could be made at all (refused,
    timed out, no route): the display is off, not merely answering badly."""

    error: str | None = None  # None: the display answered
    unreachable: bool = False


ANSWERED = Outcome()


@dataclass(frozen=True)
class Finished:
    """A read that is over, as recorded in the queue."""

    url: str
    failures: int  # in a row now (0: it answered)
    next_in: float  # seconds until it is due again
    error: str | None
    unreachable: bool


#: The ``info`` read of a display waits ("parked": due never) from its registration until
#: its ``health`` read finds it reachable, and again while that read finds it unreachable;
#: the display's first answer makes it due at once, counted as back after failures (so the
#: fleet catches the display up). An offline fleet costs one read per display per back-off
#: step, not two, and no HTTP read at all of its ``GET /``.
LEAD, FOLLOWER = "health", "info"


class ProbeQueue(Protocol):
    def claim(self, kind: str, limit: int, lease: float) -> list[Claim]:
        """Up to ``limit`` displays whose ``kind`` read is due, most overdue first; each is
        not due again for ``lease`` seconds unless :meth:`done` says when."""

    def done(self, kind: str, finished: list[Finished]) -> None:
        """These reads are over (one write for all of them); for :data:`LEAD` reads, park or
        wake the display's :data:`FOLLOWER` read."""

    def due_now(self, url: str) -> None:
        """Read this display soon: it has just registered. Its :data:`LEAD` read is due at
        once, the others once that read finds it reachable."""


def next_read_in(interval: float, failures: int, max_backoff: float) -> float:
    """``interval`` after a success; after failures a back-off from ``interval`` (or 10 s, if
    shorter), four times longer each time, up to ``max_backoff``: 10, 40, 160, 300 s.
    Quadrupling, not doubling: a fleet registered while switched off (a site being installed)
    costs 4 reads per display in its first ten minutes, not 6."""
    if failures == 0:
        return interval
    first = min(interval, 10.0)
    return float(min(max_backoff, first * 4 ** min(failures - 1, 20)))


def connect_problem(url: str, timeout: float) -> str | None:
    """Why no TCP connection can be made to the display's host and port (None: it can): a
    refused connection costs tens of microseconds here, against half a millisecond through
    an HTTP client raising its exception chain."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except TimeoutError:
        return "cannot connect: timed out"
    except (OSError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        return f"cannot connect: {reason}"


def failed_read(url: str, error: Exception, timeout: float) -> Outcome:
    """The outcome of a read that raised ``error``: unreachable when no connection could be
    made (said the way :func:`connect_problem` says it, so the next failure reads the same)."""
    if isinstance(error, requests.ConnectTimeout):
        return Outcome("cannot connect: timed out", unreachable=True)
    if isinstance(error, requests.ConnectionError):
        problem = connect_problem(url, timeout)
        if problem is not None:
            return Outcome(problem, unreachable=True)
    return Outcome(str(error)[:300])


class MemoryProbeQueue:
    """:class:`ProbeQueue` of one process: every approved display due at start."""

    def __init__(self, storage: SchedulerStorage) -> None:
        self._lock = threading.Lock()
        # (kind, key) -> (due, failures, last error)
        self._due: dict[tuple[str, str], tuple[float, int, str | None]] = {}
        self._urls: dict[str, str] = {}
        self._heaps: dict[str, list[tuple[float, str]]] = {kind: [] for kind in KINDS}
        self._unread: set[tuple[str, str]] = set()  # (kind, key) not read since registering
        for display in storage.displays():  # once, at start
            if not display.pending:  # read once approved (the approval makes it due)
                self.due_now(display.url)

    def due_now(self, url: str) -> None:
        key = display_key(url)
        now = time.time()
        with self._lock:
            self._urls[key] = url
            self._set(FOLLOWER, key, math.inf, 0, None)  # until the lead read finds it
            for kind in KINDS:
                if kind != FOLLOWER:
                    self._set(kind, key, now, 0, None)
                    self._unread.add((kind, key))

    def _set(self, kind: str, key: str, due: float, failures: int, error: str | None) -> None:
        self._due[(kind, key)] = (due, failures, error)
        if due != math.inf:
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
                self._set(kind, key, now + lease, current[1], current[2])
                first = (kind, key) in self._unread
                self._unread.discard((kind, key))
                claims.append(Claim(self._urls[key], current[1], current[2], first))
        return claims

    def done(self, kind: str, finished: list[Finished]) -> None:
        now = time.time()
        with self._lock:
            for read in finished:
                key = display_key(read.url)
                if key not in self._urls:
                    continue
                follower = self._due.get((FOLLOWER, key))
                due = now + read.next_in
                if kind == FOLLOWER and follower is not None and follower[0] == math.inf:
                    due = math.inf  # parked meanwhile by the lead read
                self._set(kind, key, due, read.failures, read.error)
                if kind != LEAD or follower is None:
                    continue
                if read.unreachable:
                    self._set(FOLLOWER, key, math.inf, max(follower[1], 1), follower[2])
                elif follower[0] == math.inf:
                    self._set(FOLLOWER, key, now, follower[1], follower[2])


#: read(claim) -> what it found.
Reader = Callable[[Claim], Outcome]


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
        # Never retried more often than read when it answers, unless told (benchmarks).
        self._max_backoff = probe_max_backoff(max(max_backoff, interval))
        self._workers = workers
        self._lease = probe_lease()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"probe-{kind}")
        self._busy = threading.Semaphore(workers)
        self._finished_lock = threading.Lock()
        self._finished: list[Finished] = []
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
            self._record_finished()
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

    def _record_finished(self) -> None:
        """Store when the reads over since the last call are due next: one write for all."""
        with self._finished_lock:
            finished, self._finished = self._finished, []
        if not finished or self._stop.is_set():
            return  # shutting down (the storage may be closed): the claims run out instead
        try:
            self._queue.done(self._kind, finished)
        except Exception:
            log.exception(
                "cannot store when to read %d display(s) next (%s)", len(finished), self._kind
            )

    def _one(self, claim: Claim) -> None:
        outcome = Outcome("the read failed")
        try:
            outcome = self._read(claim)
        except Exception:
            if not self._stop.is_set():
                log.exception("reading %s (%s) failed", claim.url, self._kind)
        failures = 0 if outcome.error is None else claim.failures + 1
        finished = Finished(
            claim.url,
            failures,
            next_read_in(self._interval, failures, self._max_backoff),
            outcome.error,
            outcome.unreachable,
        )
        with self._finished_lock:
            self._finished.append(finished)
        self._busy.release()
        self._wake.set()  # the loop records it before its next claim, at once when idle
