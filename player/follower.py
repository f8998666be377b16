"""The display's side of the Scheduling segment: follow a schedule, register. No Qt.

:class:`ScheduleFollower` (``pdn display --schedule URL --register SCHEDULER_URL``):
- at start, plays the last CDS it kept on disk, so a display rebooted with no network shows
  its schedule at once;
- fetches the schedule (``GET /schedule/<id>/``) and hands it to the same code path as a
  ``POST /schedule`` with ``text/xml``; keeps it on disk (atomic rename);
- subscribes the display's own ``/schedule`` for updates, and registers the display (url,
  location, name, groups; signed with its signing secret, Standard Webhooks, which proves a
  changed registration is its own) with the scheduler, which then pushes every schedule
  assigned to the display (or to its groups) to that same ``/schedule``: a display
  configured with only its scheduler (``scheduler = URL``) plays what it is assigned; the
  display keeps what it was pushed in its own store, for a start without network;
- then checks again every ``poll_interval`` (and re-subscribes, which is idempotent), so a
  scheduler that was down, or lost its state, is caught up with as soon as it is back. The
  checks are conditional: ``If-None-Match`` with the ETag of the document it has (the one the
  scheduler sent, or the SHA-256 of the kept copy, which is how the scheduler makes its ETags),
  and a ``304 Not Modified`` means unchanged: nothing is downloaded, applied or written.
  Failures retry after 2 s, doubling up to the poll interval.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from cds.errors import CdsError
from server.platform.atomicfile import write_atomically
from server.platform.net import is_loopback, local_address, url_host
from server.platform.signing import signed_headers

log = logging.getLogger("pdn.follower")

TIMEOUT = 10.0
POLL_INTERVAL = 60.0
FIRST_RETRY = 2.0
#: Registration is repeated after the scheduler was unreachable, and this often anyway (in
#: case it lost its registry); not every poll, as each one makes it re-read the display.
REREGISTER_INTERVAL = 3600.0


def console_address(register_url: str | None) -> str | None:
    """Where a person opens the console of the scheduler this display registers with on this
    very machine (the one-box install), as a phone on the network reaches it: this machine's
    address, the scheduler's port. None when it registers elsewhere, or nowhere."""
    if not register_url:
        return None
    parts = urlsplit(register_url)
    if not parts.hostname or not is_loopback(parts.hostname):
        return None
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{url_host(local_address())}{port}/console/"


def schedule_subscription_url(schedule_url: str, action: str) -> str:
    """``http://s/schedule/lobby/`` -> ``http://s/schedule/lobby/subscribe/``."""
    return schedule_url.rstrip("/") + f"/{action}/"


class ScheduleFollower:
    """Follows one schedule of a scheduler and/or registers the display there."""

    def __init__(
        self,
        *,
        apply_cds: Callable[[bytes], object],
        display_url: Callable[[], str],
        state_dir: Path,
        schedule_url: str | None = None,
        register_url: str | None = None,
        location: dict[str, str] | None = None,
        name: str | None = None,
        groups: list[str] | None = None,
        poll_interval: float = POLL_INTERVAL,
        first_retry: float = FIRST_RETRY,
        token: str | None = None,
        signing_secret: str | None = None,
        tls_fingerprint: str | None = None,
    ) -> None:
        self._apply = apply_cds
        self._display_url = display_url
        self.saved_path = state_dir / "followed-schedule.xml"
        self.schedule_url = schedule_url
        self.register_url = register_url.rstrip("/") if register_url else None
        self._location = location
        self._name = name
        self._groups = groups
        self._poll = poll_interval
        self._first_retry = first_retry
        self._session = requests.Session()
        # One exchange a minute: no kept-alive connection to pin a scheduler that restarts.
        self._session.headers["Connection"] = "close"
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"
        # Given when subscribing: the scheduler signs its updates with it, and the display
        # takes a rightly signed update without a token (server.display).
        self._signing_secret = signing_secret
        # The display's certificate, when it serves HTTPS: the scheduler pins it.
        self._tls_fingerprint = tls_fingerprint
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: bytes | None = None
        self._etag: str | None = None  # of _last, as the scheduler gave it (or computed)
        self._registered_at: float | None = None
        self._subscribed = False
        self._warned: set[str] = set()

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        self.replay_saved()
        self._thread = threading.Thread(target=self._run, name="schedule-follower", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=TIMEOUT + 2)
        self._session.close()

    def replay_saved(self) -> None:
        """Play the schedule kept from last time (no network needed)."""
        if self.schedule_url is None:
            return
        try:
            data = self.saved_path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as error:
            log.error("cannot read the kept schedule %s: %s", self.saved_path, error)
            return
        try:
            self._apply(data)
        except CdsError as error:
            log.error("the kept schedule %s is not valid any more: %s", self.saved_path, error)
            return
        self._last = data
        self._etag = f'"{hashlib.sha256(data).hexdigest()}"'
        log.info("playing the kept copy of %s until the scheduler answers", self.schedule_url)

    def _run(self) -> None:
        retry = self._first_retry
        while not self._stop.is_set():
            ok = self.sync_once()
            if ok:
                retry = self._first_retry
                wait = self._poll
            else:
                wait = retry
                retry = min(retry * 2, self._poll)
            self._stop.wait(wait)

    # -- one round ---------------------------------------------------------------------------

    def sync_once(self) -> bool:
        """Fetch, subscribe, register as needed; True when the scheduler answered all."""
        ok = True
        if self.schedule_url is not None:
            ok = self._fetch() and ok
            ok = ok and self._subscribe()
        if self.register_url is not None:
            ok = self._register() and ok
        return ok

    def _problem(self, key: str, message: str, *args: Any) -> None:
        """Log a failure once until it clears (no log flood while the scheduler is down)."""
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)

    def _cleared(self, key: str, message: str, *args: Any) -> None:
        if key in self._warned:
            self._warned.discard(key)
            log.info(message, *args)

    def _fetch(self) -> bool:
        assert self.schedule_url is not None
        headers = {"Accept": "text/xml"}
        if self._last is not None and self._etag:
            headers["If-None-Match"] = self._etag
        try:
            response = self._session.get(self.schedule_url, timeout=TIMEOUT, headers=headers)
        except requests.RequestException as error:
            self._subscribed = False
            self._registered_at = None
            self._problem("fetch", "cannot fetch the schedule %s: %s", self.schedule_url, error)
            return False
        if response.status_code == 304 and "If-None-Match" in headers:
            self._cleared("fetch", "the schedule %s is reachable again", self.schedule_url)
            return True  # unchanged: what the display plays is current
        if response.status_code != 200:
            self._problem(
                "fetch",
                "the scheduler answered %d for %s; playing what the display has",
                response.status_code,
                self.schedule_url,
            )
            return False
        self._cleared("fetch", "the schedule %s is reachable again", self.schedule_url)
        data = response.content
        etag = response.headers.get("ETag")
        if data == self._last:
            self._etag = etag or self._etag
            return True
        try:
            self._apply(data)
        except CdsError as error:
            log.error("the schedule %s is not a valid CDS: %s", self.schedule_url, error)
            return True  # the scheduler answered; its document is at fault
        self._last = data
        self._etag = etag
        try:
            write_atomically(self.saved_path, data)
        except OSError as error:
            log.error("cannot keep the schedule in %s: %s", self.saved_path, error)
        log.info("schedule from %s applied (%d bytes)", self.schedule_url, len(data))
        return True

    def _subscribe(self) -> bool:
        assert self.schedule_url is not None
        subscriber = self._display_url().rstrip("/") + "/schedule"
        url = schedule_subscription_url(self.schedule_url, "subscribe")
        body = {"subscriber-uri": subscriber}
        if self._signing_secret:
            body["signing-secret"] = self._signing_secret
        try:
            response = self._session.post(url, json=body, timeout=TIMEOUT)
        except requests.RequestException as error:
            self._subscribed = False
            self._registered_at = None
            self._problem("subscribe", "cannot subscribe at %s: %s", url, error)
            return False
        if response.status_code != 201:
            self._problem("subscribe", "subscribing at %s: %d %s", url, response.status_code,
                          response.text[:200])  # fmt: skip
            return False
        self._cleared("subscribe", "subscribed again at %s", url)
        if not self._subscribed:
            log.info("subscribed %s to %s", subscriber, self.schedule_url)
            self._subscribed = True
        return True

    def _register(self) -> bool:
        assert self.register_url is not None
        if (
            self._registered_at is not None
            and time.monotonic() - self._registered_at < REREGISTER_INTERVAL
        ):
            return True
        if not self._location:
            self._problem(
                "register",
                "cannot register with %s: the display has no location configured",
                self.register_url,
            )
            return True  # retrying will not help; the owner must configure a location
        body: dict[str, Any] = {"url": self._display_url(), "location": self._location}
        if self._name:
            body["name"] = self._name
        if self._groups is not None:
            body["groups"] = self._groups
        if self._signing_secret:  # the scheduler signs what it pushes to the display with it
            body["signing-secret"] = self._signing_secret
        if self._tls_fingerprint:
            body["tls-fingerprint"] = self._tls_fingerprint
        url = f"{self.register_url}/displays"
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self._signing_secret:  # proof that a change of the registration is this display's
            event = f"reg_{secrets.token_hex(12)}"
            headers.update(signed_headers(self._signing_secret, event, data))
        try:
            response = self._session.post(url, data=data, headers=headers, timeout=TIMEOUT)
        except requests.RequestException as error:
            self._registered_at = None
            self._problem("register", "cannot register at %s: %s", url, error)
            return False
        if response.status_code != 201:
            self._problem("register", "registering at %s: %d %s", url, response.status_code,
                          response.text[:200])  # fmt: skip
            return False
        self._registered_at = time.monotonic()
        self._warned.discard("register")
        pending = _answer(response).get("state") == "pending"
        log.info(
            "registered %s with %s%s",
            body["url"],
            self.register_url,
            " (waiting for an operator's approval: set scheduler_token to be taken at once)"
            if pending
            else "",
        )
        return True


def _answer(response: requests.Response) -> dict[str, Any]:
    try:
        value = response.json()
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
