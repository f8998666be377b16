"""Filling the gaps in proof of play from the displays' own play logs.

A display keeps every playback record in its play log (``player.store``) and serves it at
``GET /x/plays?since=SEQ&limit=N``. The scheduler stores the updates the display POSTs to it
(``server.scheduler.plays``); when one does not follow the last stored in the display's
sequence (the scheduler was down, the subscription expired and was made again, or the display
played before the scheduler subscribed), or the display registers, or answers again after
failing to, its play log is *wanted* (``SchedulerStorage.record_play``, ``want_plays``).

:class:`PlayBackfill` reads the wanted logs in the background, on the scheduler's probe
machinery (:class:`server.scheduler.probes.ProbeLoop`, kind ``plays``), never on the thread
that received an update: it claims due displays (``SchedulerStorage.claim_backfill``: a lease,
and ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so of several processes one reads a display's
log), reads from the first sequence not stored, pages of :data:`PAGE` plays, and stores them
once (plays are keyed by display and sequence). A display that cannot be read is tried again
after 10, 40, 160, 300 s, and at once when it answers again (``Fleet``'s catch-up, a new
update, a registration); meanwhile ``GET /x/plays`` lists the gap with the reason.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

import requests

from server.platform.http import ApiError
from server.platform.pins import PinningAdapter, Pins
from server.scheduler.plays import record_from_update
from server.scheduler.probes import ANSWERED, Claim, Finished, Outcome, ProbeLoop, failed_read
from server.scheduler.storage import BackfillClaim, SchedulerStorage, display_key

log = logging.getLogger("pdn.scheduler.backfill")

KIND = "plays"
TIMEOUT = 10.0
#: Plays asked for per request, and pages read per claim (then the display is due again, so
#: one display's long log does not hold a worker, or outlast the claim's lease).
PAGE = 1000
PAGES_PER_CLAIM = 20


class BackfillQueue:
    """:class:`server.scheduler.probes.ProbeQueue` of the ``plays`` reads, in the storage's
    ``play_backfill`` table (one process's memory keeps only what each claim was)."""

    def __init__(self, storage: SchedulerStorage) -> None:
        self._storage = storage
        self._lock = threading.Lock()
        self._claims: dict[str, BackfillClaim] = {}

    def claim(self, kind: str, limit: int, lease: float) -> list[Claim]:
        claims = self._storage.claim_backfill(limit, lease)
        fresh: list[BackfillClaim] = []
        with self._lock:
            for claim in claims:
                key = display_key(claim.url)
                # Read by this process still (a read that outlasted its lease): one at a time.
                if key not in self._claims:
                    self._claims[key] = claim
                    fresh.append(claim)
        return [Claim(claim.url, claim.failures, claim.error) for claim in fresh]

    def claimed(self, url: str) -> BackfillClaim | None:
        with self._lock:
            return self._claims.get(display_key(url))

    def done(self, kind: str, finished: list[Finished]) -> None:
        for read in finished:
            with self._lock:
                claim = self._claims.pop(display_key(read.url), None)
            if claim is not None:
                self._storage.backfill_done(claim, read.error, read.next_in)

    def due_now(self, url: str) -> None:
        self._storage.want_plays(url)


class PlayBackfill:
    """Reads the displays' play logs where the scheduler misses plays (see the module)."""

    def __init__(
        self,
        storage: SchedulerStorage,
        *,
        bearer: Callable[[str], str | None] = lambda url: None,
        pins: Pins | None = None,
        workers: int = 2,
    ) -> None:
        """``bearer(url)``: the token the scheduler reads the display with (the one it
        subscribes with), for a display whose reads need one."""
        self._storage = storage
        self._bearer = bearer
        self.queue = BackfillQueue(storage)
        self._loop = ProbeLoop(
            self.queue, KIND, self._read, interval=10.0, max_backoff=300.0, workers=workers
        )
        self._session = requests.Session()
        self._session.trust_env = False
        if pins is not None:
            self._session.mount("https://", PinningAdapter(pins))
        self._failing: set[str] = set()

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()
        self._session.close()

    def wanted(self, url: str) -> None:
        """Read this display's play log now (it registered, or answers again)."""
        self._storage.want_plays(url)
        self._loop.wake()

    def wake(self) -> None:
        """A display's update jumped in sequence (its log was made wanted): look now."""
        self._loop.wake()

    def _read(self, claim: Claim) -> Outcome:
        url = claim.url
        held = self.queue.claimed(url)
        since = held.seen if held is not None else 0
        token = self._bearer(url)
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        target = url.rstrip("/") + "/x/plays"
        stored = 0
        for _page in range(PAGES_PER_CLAIM):
            try:
                response = self._session.get(
                    target, params={"since": since, "limit": PAGE}, headers=headers,
                    timeout=TIMEOUT,
                )  # fmt: skip
            except requests.RequestException as error:
                return self._failed(url, failed_read(url, error, TIMEOUT))
            if response.status_code != 200:
                problem = f"GET /x/plays answered {response.status_code}"
                if response.status_code == 404:
                    problem += " (a display without a play log: an older pdn)"
                elif response.status_code in (401, 403):
                    problem += " (the scheduler's token is not accepted)"
                return self._failed(url, Outcome(problem))
            try:
                plays, last = _page_of(url, response)
            except (ValueError, ApiError) as error:
                message = error.message if isinstance(error, ApiError) else str(error)
                return self._failed(url, Outcome(f"GET /x/plays: {message}"[:300]))
            stored += self._storage.record_plays(plays)
            if plays:
                since = plays[-1].sequence
                self._storage.plays_seen(url, since)
            if len(plays) < PAGE:
                # Every play the display still has up to its last is stored now.
                if last is not None and last > since:
                    self._storage.plays_seen(url, last)
                break
        else:
            self._storage.want_plays(url)  # more to read: due again, after the others
        if url in self._failing:
            self._failing.discard(url)
            log.info("the play log of %s is read again", url)
        if stored:
            log.info("%d play(s) of %s filled in from its play log", stored, url)
        return ANSWERED

    def _failed(self, url: str, outcome: Outcome) -> Outcome:
        if url not in self._failing:
            self._failing.add(url)
            log.info("cannot read the play log of %s: %s", url, outcome.error)
        return outcome


def _page_of(url: str, response: requests.Response) -> tuple[list[Any], int | None]:
    """The plays of one answer of a display's ``GET /x/plays``, as the scheduler stores them,
    and the display's last sequence."""
    body = response.json()
    if not isinstance(body, dict) or not isinstance(body.get("plays"), list):
        raise ValueError("the answer is not {'plays': [...]}")
    last = body.get("last-sequence")
    if last is not None and (not isinstance(last, int) or isinstance(last, bool)):
        raise ValueError("'last-sequence' is not a whole number")
    plays = []
    for entry in body["plays"]:
        if not isinstance(entry, dict):
            raise ValueError("a play is not an object")
        play = record_from_update(url, entry)
        ended = entry.get("ended")
        plays.append(dataclasses.replace(play, ended=ended if isinstance(ended, str) else None))
    plays.sort(key=lambda play: play.sequence)
    return plays, last
