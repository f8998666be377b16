"""Brute force made impracticable: wrong guesses per client lock that client out.

ETSI EN 303 645 5.1-5. A :class:`Lockout` counts one kind of wrong guess (a pairing code, a
bearer token) per client. ``limit`` wrong guesses within ``window`` seconds lock the client for
``first_wait`` seconds; each further lock-out of the same client doubles the wait (up to
``max_wait``). A locked client is answered 429 with ``Retry-After`` before its guess is even
looked at, so a lock-out tells nothing about whether a guess was right. Other clients are never
affected. A right guess forgets the client's record.

A client is an IPv4 address, or an IPv6 /64 (:func:`client_key`): one host is given a whole
/64, so counting IPv6 addresses one by one would give an attacker unlimited guesses.

Memory is bounded: at most ``max_addresses`` clients are remembered. A locked client is never
forgotten before its time runs out, whatever else fills the table: to make room, the client
heard from longest ago that is *not* locked is forgotten (it had fewer than ``limit`` wrong
guesses, so forgetting it gives nothing an attacker with that many addresses lacks anyway).
When every remembered client is locked, the wrong guesses of clients not in the table share one
record: ``limit`` of them lock every client not in the table until that lock runs out. A flood
of addresses thus ends in refusals (failing closed), never in a freed lock or unbounded memory.
Thread-safe: waitress serves requests on several threads.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["CODE_GUESSES", "TOKEN_GUESSES", "Lockout", "RateLimit", "client_key"]

#: Pairing codes: 5 wrong ones (within an hour) lock an address out.
CODE_GUESSES = (5, 3600.0)
#: Bearer tokens: 10 wrong ones within a minute.
TOKEN_GUESSES = (10, 60.0)


def client_key(address: str) -> str:
    """Who is counted for ``address``: an IPv4 address as it is (an IPv4-mapped IPv6 one too),
    an IPv6 address as its /64 (``2001:db8:1:2::/64``); anything else as given."""
    try:
        parsed = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(parsed)


@dataclass
class _Record:
    failures: deque[float] = field(default_factory=deque)
    lockouts: int = 0  # how many times this client was locked out (the wait doubles)
    locked_until: float = 0.0


class Lockout:
    """Wrong guesses per client, and the lock-outs they earn."""

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
        #: The shared record of clients not in the full table (see the module's docstring).
        self._overflow = _Record()
        #: While the clock is before this, every record in the full table is locked.
        self._all_locked_until = 0.0

    def retry_after(self, address: str) -> int | None:
        """Whole seconds ``address`` must still wait, or None when it may try now."""
        key = client_key(address)
        with self._lock:
            record = self._records.get(key, self._overflow)
            left = record.locked_until - self._clock()
        return math.ceil(left) if left > 0 else None

    def failed(self, address: str) -> int | None:
        """Count a wrong guess; the seconds to wait when this one locks the client out."""
        key = client_key(address)
        now = self._clock()
        with self._lock:
            record = self._records.pop(key, None)
            if record is None and not self._make_room(now):
                record = self._overflow
            else:
                record = record or _Record()
                self._records[key] = record  # the most recently heard from goes last
            return self._count(record, now)

    def _make_room(self, now: float) -> bool:
        """Room for one more client (lock held): False when every remembered one is locked."""
        if len(self._records) < self.max_addresses:
            return True
        if now < self._all_locked_until:
            return False
        soonest = math.inf
        for key, record in self._records.items():  # oldest first
            if record.locked_until <= now:
                del self._records[key]
                return True
            soonest = min(soonest, record.locked_until)
        self._all_locked_until = soonest
        return False

    def _count(self, record: _Record, now: float) -> int | None:
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
        """A right guess: forget the client's wrong ones and its lock-outs."""
        with self._lock:
            if self._records.pop(client_key(address), None) is not None:
                self._all_locked_until = 0.0


class RateLimit:
    """At most ``limit`` requests per ``window`` seconds from one client (an IPv4 address or
    an IPv6 /64, :func:`client_key`; a sliding window); memory bounded by forgetting the
    client heard from longest ago. For endpoints open to anyone by design, such
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
        key = client_key(address)
        with self._lock:
            times = self._seen.pop(key, None) or deque()
            self._seen[key] = times
            while len(self._seen) > self.max_addresses:
                self._seen.popitem(last=False)
            while times and times[0] <= now - self.window:
                times.popleft()
            if len(times) >= self.limit:
                return max(1, math.ceil(times[0] + self.window - now))
            times.append(now)
        return None
