"""Brute force made impracticable: wrong guesses per client address lock that address out.

ETSI EN 303 645 5.1-5. A :class:`Lockout` counts one kind of wrong guess (a pairing code, a
bearer token) per client address. ``limit`` wrong guesses within ``window`` seconds lock the
address for ``first_wait`` seconds; each further lock-out of the same address doubles the wait
(up to ``max_wait``). A locked address is answered 429 with ``Retry-After`` before its guess is
even looked at, so a lock-out tells nothing about whether a guess was right. Other addresses
are never affected. A right guess forgets the address's record.

Memory is bounded: at most ``max_addresses`` addresses are remembered; beyond, the one heard
from longest ago is forgotten (a flood of addresses can only make the guard forget, never grow
without bound). Thread-safe: waitress serves requests on several threads.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["CODE_GUESSES", "TOKEN_GUESSES", "Lockout", "RateLimit"]

#: Pairing codes: 5 wrong ones (within an hour) lock an address out.
CODE_GUESSES = (5, 3600.0)
#: Bearer tokens: 10 wrong ones within a minute.
TOKEN_GUESSES = (10, 60.0)


@dataclass
class _Record:
    failures: deque[float] = field(default_factory=deque)
    lockouts: int = 0  # how many times this address was locked out (the wait doubles)
    locked_until: float = 0.0


class Lockout:
    """Wrong guesses per client address, and the lock-outs they earn."""

    def __init__(
        self,
        *,
        limit: int,
        window: float,
        first_wait: float = 60.0,
        max_wait: float = 3600.0,
        max_addresses: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window = window
        self.first_wait = first_wait
        self.max_wait = max_wait
        self.max_addresses = max_addresses
        self._clock = clock
        self._lock = threading.Lock()
        self._records: OrderedDict[str, _Record] = OrderedDict()

    def retry_after(self, address: str) -> int | None:
        """Whole seconds ``address`` must still wait, or None when it may try now."""
        with self._lock:
            record = self._records.get(address)
            if record is None:
                return None
            left = record.locked_until - self._clock()
        return math.ceil(left) if left > 0 else None

    def failed(self, address: str) -> int | None:
        """Count a wrong guess; the seconds to wait when this one locks the address out."""
        now = self._clock()
        with self._lock:
            record = self._records.pop(address, None) or _Record()
            self._records[address] = record  # the most recently heard from goes last
            while len(self._records) > self.max_addresses:
                self._records.popitem(last=False)
            failures = record.failures
            failures.append(now)
            while failures and failures[0] <= now - self.window:
                failures.popleft()
            if len(failures) < self.limit:
                return None
            failures.clear()
            record.lockouts += 1
            wait = min(self.max_wait, self.first_wait * 2.0 ** (record.lockouts - 1))
            record.locked_until = now + wait
        return math.ceil(wait)

    def succeeded(self, address: str) -> None:
        """A right guess: forget the address's wrong ones and its lock-outs."""
        with self._lock:
            self._records.pop(address, None)


class RateLimit:
    """At most ``limit`` requests per ``window`` seconds from one client address (a sliding
    window); memory bounded like :class:`Lockout`. For endpoints open to anyone by design, such
    as a content application's ``POST /<app>/schedule`` (a visitor's phone)."""

    def __init__(
        self,
        *,
        limit: int,
        window: float,
        max_addresses: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window = window
        self.max_addresses = max_addresses
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()

    def take(self, address: str) -> int | None:
        """None when ``address`` may make one more request now (counted), else the whole
        seconds until it may."""
        now = self._clock()
        with self._lock:
            times = self._seen.pop(address, None) or deque()
            self._seen[address] = times
            while len(self._seen) > self.max_addresses:
                self._seen.popitem(last=False)
            while times and times[0] <= now - self.window:
                times.popleft()
            if len(times) >= self.limit:
                return max(1, math.ceil(times[0] + self.window - now))
            times.append(now)
        return None
