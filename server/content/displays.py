"""The displays a content server forwards to, and the one place on each it forwards to.

``POST /<app>/schedule`` is open to anyone (a visitor's phone asks an application onto a
screen), so the ``display-uri`` it names is only a choice among displays the operator chose:

- **configured**: every ``--display URL`` and every display in the displays file
  (``server.platform.displaycreds``: the pairing store of ``pdn ctl pair``, or
  ``PDN_DISPLAYS_FILE``);
- **registered with its scheduler** (``--scheduler URL``): the approved displays of the
  scheduler's ``GET /displays``, read again at most every few seconds when a request names a
  display the last read did not have, and every ``REFRESH`` seconds otherwise.

A ``display-uri`` is a display's address and nothing more: ``http(s)://host[:port]``, with at
most a ``/`` after it; a user name, a path, a query or a fragment (even an empty ``?`` or
``#``) is refused with 400. The request then goes to the *known* display's origin and its
``/schedule``, never to a path the visitor wrote. Matching is by origin: scheme, host (lower
case) and port (the default one written out), so ``http://Screen:80`` is ``http://screen``.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests

from server.platform.displaycreds import DisplayCredentials
from server.platform.http import ApiError, ValidationError, invalid_field
from server.platform.net import shown_uri
from server.platform.pins import origin_of
from server.platform.validation import HTTP_ORIGIN_PATTERN

__all__ = [
    "DisplayDirectory",
    "SchedulerRegistry",
    "Target",
    "display_origin",
    "scheduler_token",
]

log = logging.getLogger("pdn.content")

#: The scheduler's registry is read again this often (seconds), and on a miss at most every
#: ``MISS_GAP`` seconds, so visitors naming unknown displays cannot make it hammer the scheduler.
REFRESH = 30.0
MISS_GAP = 2.0
SCHEDULER_TIMEOUT = 3.0

_ORIGIN = re.compile(HTTP_ORIGIN_PATTERN)


@dataclass(frozen=True)
class Target:
    """A display a request may go to: its origin, and the URL requests are POSTed to."""

    origin: str

    @property
    def schedule_url(self) -> str:
        return f"{self.origin}/schedule"


def display_origin(display_uri: str) -> str:
    """The origin a ``display-uri`` names; 400 (``invalid-field``) when it is more than one."""

    def refuse(what: str) -> ValidationError:
        return invalid_field(
            "display-uri",
            f"'display-uri' must be a display's address, http(s)://host[:port], with {what}.",
        )

    if "?" in display_uri or "#" in display_uri:
        raise refuse("no query or fragment ('?' or '#')")
    parts = urlsplit(display_uri)
    if "@" in parts.netloc:
        raise refuse("no user name or password")
    if parts.path not in ("", "/"):
        raise refuse(f"no path (the request goes to the display's /schedule), not {parts.path!r}")
    if not _ORIGIN.match(display_uri) or not parts.hostname:
        raise refuse("a plain host and port")
    try:
        return origin_of(display_uri)
    except ValueError:  # a port out of range
        raise refuse("a port from 1 to 65535") from None


class SchedulerRegistry:
    """The origins of the displays a scheduler has registered and approved (``GET /displays``).

    ``token`` (``PDN_SCHEDULER_TOKEN``: the scheduler's enrolment token, for a scheduler that
    protects reads) goes to the scheduler's own URL only.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        refresh: float = REFRESH,
        miss_gap: float = MISS_GAP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self._refresh = refresh
        self._miss_gap = miss_gap
        self._clock = clock
        self._lock = threading.Lock()
        self._origins: frozenset[str] = frozenset()
        self._read_at: float | None = None
        self._failing = False

    def has(self, origin: str) -> bool:
        """True when the scheduler registered a display at ``origin`` (read again if stale)."""
        with self._lock:
            now = self._clock()
            age = None if self._read_at is None else now - self._read_at
            if (
                age is None
                or age >= self._refresh
                or (origin not in self._origins and age >= self._miss_gap)
            ):
                self._read(now)
            return origin in self._origins

    def _read(self, now: float) -> None:
        self._read_at = now
        headers = {"Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        where = f"{self.url}/displays"
        try:
            with requests.Session() as session:
                session.trust_env = False
                response = session.get(
                    where,
                    params={"url-only": "true"},
                    headers=headers,
                    timeout=SCHEDULER_TIMEOUT,
                    allow_redirects=False,
                )
            records = response.json() if response.status_code == 200 else None
        except (requests.RequestException, ValueError) as error:
            self._failed(f"cannot read {shown_uri(where)}: {error}")
            return
        if not isinstance(records, list):
            self._failed(f"{shown_uri(where)} answered {response.status_code}, not a list")
            return
        origins: set[str] = set()
        for record in records:
            url = record.get("url") if isinstance(record, dict) else None
            if isinstance(url, str) and urlsplit(url).scheme in ("http", "https"):
                try:
                    origins.add(origin_of(url))
                except ValueError:
                    continue
        self._origins = frozenset(origins)
        if self._failing:
            log.info("the scheduler's registry is readable again: %d displays", len(origins))
        self._failing = False

    def _failed(self, message: str) -> None:
        # The displays it had are kept: a scheduler restarting does not close every screen.
        if not self._failing:
            log.warning("%s; keeping the %d displays read before", message, len(self._origins))
        self._failing = True


class DisplayDirectory:
    """Where a visitor's ``display-uri`` may go: configured displays, then the scheduler's."""

    def __init__(
        self, credentials: DisplayCredentials, scheduler: SchedulerRegistry | None = None
    ) -> None:
        self.credentials = credentials
        self.scheduler = scheduler

    def describe(self) -> str:
        """For the start-up line: which displays requests may go to."""
        listed = len(self.credentials.origins())
        where = f"{listed} listed display{'s' if listed != 1 else ''}"
        where += f" (--display, {self.credentials.path})"
        if self.scheduler is not None:
            where += f" and the displays registered with {shown_uri(self.scheduler.url)}"
        return where

    def target(self, display_uri: str) -> Target:
        """The display a request naming ``display-uri`` goes to; 400 for a malformed one, 403
        (``unknown-display``) for one this content server does not know."""
        origin = display_origin(display_uri)
        if self.credentials.listed(origin) or (
            self.scheduler is not None and self.scheduler.has(origin)
        ):
            return Target(origin)
        where = (
            "configured for (--display, the displays file) or that its scheduler has registered"
            if self.scheduler is not None
            else "configured for (--display, the displays file)"
        )
        raise ApiError(
            403,
            "unknown-display",
            f"This content server forwards requests only to the displays it is {where};"
            f" {origin} is not one of them.",
        )


def scheduler_token() -> str | None:
    """``PDN_SCHEDULER_TOKEN``: sent to the content server's scheduler only, to read its
    registry when it protects reads."""
    return os.environ.get("PDN_SCHEDULER_TOKEN", "").strip() or None
