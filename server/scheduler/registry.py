"""Learning about registered displays from the displays themselves.

After ``POST /displays`` of an approved display, or its approval (and every ``refresh_interval``
afterwards) the scheduler reads the
display's ``GET /`` for its name (extension field) and the URL of its sensors, then that URL for
the sensor list, and subscribes to its playback updates. A display that does not answer is
tried again with a growing pause, never holding up the API: the reads run on a small pool of
worker threads, each display's turn kept in a :mod:`server.scheduler.probes` queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

import requests

from server.platform.pins import PinningAdapter, Pins
from server.platform.signing import bearer_from_secret
from server.scheduler.probes import (
    ANSWERED,
    Claim,
    Outcome,
    ProbeLoop,
    ProbeQueue,
    connect_problem,
    failed_read,
)
from server.scheduler.storage import SchedulerStorage

log = logging.getLogger("pdn.scheduler.registry")

TIMEOUT = 5.0


def _get_json(session: requests.Session, url: str) -> Any:
    response = session.get(url, timeout=TIMEOUT, headers={"Accept": "application/json"})
    response.raise_for_status()
    return response.json()


def read_display_info(
    session: requests.Session, url: str
) -> tuple[str | None, list[dict[str, str]]]:
    """The display's name (or None) and its sensors, from its ``GET /`` and sensing URL."""
    info = _get_json(session, url)
    if not isinstance(info, dict):
        raise ValueError("GET / did not answer a JSON object")
    name = info.get("name") if isinstance(info.get("name"), str) else None
    sensors_field = info.get("sensors")
    listing: Any = None
    if isinstance(sensors_field, list):
        listing = sensors_field
    else:
        relative = sensors_field.get("url") if isinstance(sensors_field, dict) else sensors_field
        if isinstance(relative, str) and relative:
            base = url if url.endswith("/") else url + "/"
            listing = _get_json(session, urljoin(base, relative))
    sensors: list[dict[str, str]] = []
    for entry in listing if isinstance(listing, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("sensor-id"), str):
            sensor = {"sensor-id": entry["sensor-id"]}
            if isinstance(entry.get("sensor-type"), str):
                sensor["sensor-type"] = entry["sensor-type"]
            sensors.append(sensor)
    return name, sensors


class DisplayProber:
    """Reads each display's GET / in the background: after registration, then every
    ``refresh_interval`` seconds, when its turn comes in the
    :class:`~server.scheduler.probes.ProbeQueue` (shared by the processes on PostgreSQL); a
    display that does not answer is tried again after 10, 40, 160 s, up to
    ``refresh_interval``, and not at all while its health read finds it switched off (it is
    read as soon as that read finds it back)."""

    def __init__(
        self,
        storage: SchedulerStorage,
        *,
        refresh_interval: float = 300.0,
        workers: int = 4,
        on_back: Callable[[str], None] = lambda url: None,
        subscriber_for: Callable[[str], str | None] = lambda url: None,
        signing_secret_for: Callable[[str], str | None] = lambda url: None,
        display_token: str | None = None,
        queue: ProbeQueue,
        pins: Pins | None = None,
        tokens: Pins | None = None,
    ) -> None:
        """``on_back(url)``: the display answers again after failing to.
        ``subscriber_for(url)``: where the display's playback updates should go; each read
        (re)subscribes it there (idempotent), with ``display_token`` as bearer if given, and
        ``signing_secret_for(url)`` as the updates' signing secret (Standard Webhooks);
        ``tokens(url)``: the display's own token (got by pairing). A pending display (not
        approved yet) is not in the queue, and never subscribed to."""
        self._storage = storage
        self._tokens = tokens
        self._on_back = on_back
        self._subscriber_for = subscriber_for
        self._signing_secret_for = signing_secret_for
        self._display_token = display_token
        self._subscribe_failed: set[str] = set()
        # Shared with the health reads (FleetStatus), which decide when GET / is read.
        self._queue = queue
        self._loop = ProbeLoop(
            self._queue,
            "info",
            self._check,
            interval=refresh_interval,
            max_backoff=refresh_interval,
            workers=workers,
        )
        self._session = requests.Session()
        self._session.trust_env = False  # no netrc or proxy look-ups per read: displays are local
        if pins is not None:  # HTTPS displays: their certificates, pinned at registration
            self._session.mount("https://", PinningAdapter(pins))

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()
        self._session.close()

    def poke(self, url: str) -> None:
        """Read this display soon (it has just registered)."""
        self._queue.due_now(url)
        self._loop.wake()

    def _check(self, claim: Claim) -> Outcome:
        url = claim.url
        # Off last time, or never read: a refused connection says so for a fraction of an
        # HTTP read's cost.
        problem = connect_problem(url, TIMEOUT) if claim.doubtful else None
        if problem is not None:
            return Outcome(problem, unreachable=True)
        try:
            name, sensors = read_display_info(self._session, url)
        except (requests.RequestException, ValueError) as error:
            # Said once when it stops answering; its retries are quiet (thousands may be off).
            report = log.info if claim.failures == 0 else log.debug
            report("display %s did not answer GET / (%s)", url, error)
            return failed_read(url, error, TIMEOUT)
        self._storage.record_display_info(url, name, sensors)
        log.debug("display %s: name %r, %d sensors", url, name, len(sensors))
        display = self._storage.display(url)
        if display is not None and not display.pending:
            self._subscribe_playback(url)
        if claim.failures:
            log.info("display %s answers again", url)
            try:
                self._on_back(url)
            except Exception:
                log.exception("catching display %s up failed", url)
        return ANSWERED

    def bearer(self, url: str) -> str | None:
        """The token the scheduler sends the display: the one got by pairing with it; else, for
        a display that gave a signing secret at registration, the token that goes with it
        (server.platform.signing.bearer_from_secret); else the configured PDN_DISPLAY_TOKEN."""
        token = self._tokens(url) if self._tokens is not None else None
        if token is None:
            push_secret = self._storage.push_secret(url)
            token = bearer_from_secret(push_secret) if push_secret else self._display_token
        return token

    def _subscribe_playback(self, url: str) -> None:
        """Have the display POST its playback updates to the scheduler (proof of play)."""
        subscriber = self._subscriber_for(url)
        if subscriber is None:
            return
        token = self.bearer(url)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        target = url.rstrip("/") + "/playback/subscribe/"
        body = {"subscriber-uri": subscriber}
        secret = self._signing_secret_for(url)
        if secret is not None:
            body["signing-secret"] = secret
        try:
            response = self._session.post(target, json=body, headers=headers, timeout=TIMEOUT)
            ok = response.status_code in (200, 201)
            problem = f"{response.status_code} {response.text[:200]}"
        except requests.RequestException as error:
            ok, problem = False, str(error)
        if ok:
            if url in self._subscribe_failed:
                self._subscribe_failed.discard(url)
                log.info("subscribed to the playback updates of %s", url)
        elif url not in self._subscribe_failed:
            self._subscribe_failed.add(url)
            log.warning("cannot subscribe to the playback updates of %s: %s", url, problem)
