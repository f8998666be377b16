"""Fleet status: what every registered display is doing now, learnt from the displays.

Kept in a :class:`StatusBook`: this process's memory with SQLite (re-learnt from the displays
within seconds of a start), the database with PostgreSQL (``server.scheduler.pgfleet``: each
display is read by one of the processes, and every process answers alike). Per display:

- online/offline and when it was last seen (a successful read, or a playback update received);
- what it shows now and since when: from the playback updates the scheduler ingests (proof of
  play, :meth:`FleetStatus.played`) and from the ``playback`` section of its ``/x/health``;
- a health summary from ``/x/health``: ``ok`` or ``degraded``, and the first problem found;
- its version (``/x/health``'s extension field ``version``) and, after a release of it was
  rolled back by itself, which one (``release.rolled-back-from``);
- its clock: what its time daemon says (``/x/health``'s ``clock``: source, synchronised,
  offset), and over the fleet the spread of the offsets (``server.platform.clockspread``):
  screens that change together (a synchronised set) agree only as well as their clocks do;
- a thumbnail: its ``/x/screenshot`` scaled down to ``THUMBNAIL_WIDTH`` pixels wide (Pillow),
  taken when there is none, when what it shows changed (at most every ``THUMBNAIL_MIN_GAP``
  seconds), every ``thumbnail_interval`` seconds, and on demand (:meth:`refresh_thumbnail`).

Every change bumps a revision counter; :meth:`changes` waits for the next one (the console's
server-sent events stream).
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import requests
from flask import Flask, Response, request
from PIL import Image
from werkzeug.http import http_date

from server.platform.http import ApiError, json_response
from server.platform.pins import PinningAdapter, Pins
from server.platform.signing import bearer_from_secret
from server.platform.validation import HTTP, Uri
from server.scheduler.plays import now_playing, playing_of
from server.scheduler.probes import (
    ANSWERED,
    Claim,
    MemoryProbeQueue,
    Outcome,
    ProbeLoop,
    ProbeQueue,
    connect_problem,
    failed_read,
)
from server.scheduler.storage import PlayRecord, SchedulerStorage, display_key

log = logging.getLogger("pdn.scheduler.fleetstatus")

TIMEOUT = 5.0
THUMBNAIL_WIDTH = 320
THUMBNAIL_MIN_GAP = 3.0
MAX_THUMBNAIL_BYTES = 16 * 1024 * 1024


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, UTC).isoformat()


def downscale_png(png: bytes, width: int = THUMBNAIL_WIDTH) -> bytes:
    """The PNG scaled to ``width`` pixels wide (aspect kept), or unchanged when it is no wider
    or not readable. Pillow, not Qt: a scheduler on a server loads no GUI toolkit."""
    try:
        with Image.open(io.BytesIO(png), formats=("PNG",)) as image:
            if image.width <= width:
                return png
            height = max(1, round(image.height * width / image.width))
            rgb = image if image.mode in ("RGB", "RGBA", "L", "LA") else image.convert("RGBA")
            small = rgb.resize((width, height), Image.Resampling.LANCZOS)
    except (OSError, ValueError, Image.DecompressionBombError):
        return png
    out = io.BytesIO()
    small.save(out, "PNG")
    return out.getvalue()


def health_problem(health: dict[str, Any]) -> str | None:
    """The first thing wrong in a display's ``/x/health`` body, in words (None: nothing)."""
    renderer = health.get("renderer")
    if isinstance(renderer, dict):
        if isinstance(renderer.get("problem"), str):
            return f"screen: {renderer['problem']}"
        if renderer.get("alive") is False:
            return "the renderer is not alive"
    storage = health.get("storage")
    if isinstance(storage, dict) and storage.get("record-stored") is False:
        return "the playback record cannot be stored"
    disk = health.get("disk")
    free = disk.get("free") if isinstance(disk, dict) else None
    if isinstance(free, int) and free < 64 * 1024 * 1024:
        return f"disk nearly full ({free // (1024 * 1024)} MiB free)"
    if health.get("status") not in (None, "ok"):
        return "degraded"
    return None


@dataclass
class DisplayStatus:
    url: str
    online: bool | None = None  # None: not tried yet
    last_seen: float | None = None
    last_error: str | None = None
    offline_since: float | None = None
    playing: dict[str, Any] | None = None
    health: str | None = None  # "ok" | "degraded"
    problem: str | None = None
    health_checked: float | None = None
    version: str | None = None
    rolled_back_from: str | None = None
    clock: dict[str, Any] | None = None  # health's clock: source, synchronised, offset-ms
    thumbnail: bytes | None = field(default=None, repr=False)  # kept by MemoryStatusBook only
    has_thumbnail: bool = False
    thumbnail_taken: float | None = None
    thumbnail_error: str | None = None
    thumbnail_of: str | None = None  # the item on screen when the thumbnail was taken
    revision: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "display": self.url,
            "online": self.online,
            "last-seen": _iso(self.last_seen),
            "offline-since": _iso(self.offline_since),
            "last-error": self.last_error,
            "playing": self.playing,
            "health": {
                "status": self.health,
                "problem": self.problem,
                "checked": _iso(self.health_checked),
            },
            "version": self.version,
            "rolled-back-from": self.rolled_back_from,
            "clock": self.clock,
            "thumbnail": {
                "available": self.has_thumbnail,
                "taken": _iso(self.thumbnail_taken),
                "error": self.thumbnail_error,
            },
            "revision": self.revision,
        }


def clock_of(health: dict[str, Any]) -> dict[str, Any] | None:
    """The part of a display's ``/x/health`` ``clock`` the fleet keeps (None: not reported)."""
    clock = health.get("clock")
    if not isinstance(clock, dict):
        return None
    offset = clock.get("offset-ms")
    synchronised = clock.get("synchronised")
    return {
        "source": clock.get("source") if isinstance(clock.get("source"), str) else "unknown",
        "synchronised": synchronised if isinstance(synchronised, bool) else None,
        "offset-ms": float(offset)
        if isinstance(offset, int | float) and not isinstance(offset, bool)
        else None,
    }


#: Fields whose change alone is no news (a console is not told of every successful read).
_ROUTINE = ("last_seen", "health_checked", "clock")


def merge_status(status: DisplayStatus, fields: dict[str, Any]) -> bool:
    """Set ``fields`` on ``status``; True when something other than a routine field changed."""
    if fields.get("thumbnail") is not None:
        fields = {**fields, "has_thumbnail": True}
    if fields.get("online") is False and status.offline_since is not None:
        fields = {k: v for k, v in fields.items() if k != "offline_since"}  # offline since then
    changed = False
    for name, value in fields.items():
        if getattr(status, name) != value:
            setattr(status, name, value)
            changed = changed or name not in _ROUTINE
    return changed


def _rolled_back_from(health: dict[str, Any]) -> str | None:
    """The release a display went back from (its ``/x/health`` ``release``); None."""
    release = health.get("release")
    failed = release.get("rolled-back-from") if isinstance(release, dict) else None
    return failed if isinstance(failed, str) else None


class StatusBook(Protocol):
    """Where the statuses are kept: this process's memory (:class:`MemoryStatusBook`), or the
    database shared by several processes (``server.scheduler.pgfleet.PgStatusBook``)."""

    def get(self, url: str) -> DisplayStatus | None:
        """A copy of the display's status (thumbnail bytes not included), or None."""

    def update(self, url: str, fields: dict[str, Any]) -> None:
        """Merge ``fields``; a change beyond routine fields gets a new revision."""

    def all(self) -> dict[str, DisplayStatus]:
        """Every status, by display key."""

    def thumbnail(self, url: str) -> tuple[bytes, float] | None: ...

    def revision(self) -> int: ...

    def changes(self, after: int, timeout: float) -> tuple[int, list[str]]:
        """Wait up to ``timeout`` s for changes after revision ``after``: the new revision and
        the URLs of the displays that changed (empty on time-out)."""

    def stop(self) -> None: ...


class MemoryStatusBook:
    """:class:`StatusBook` of one process: re-learnt from the displays within seconds of a
    start."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._revision = 0
        self._status: dict[str, DisplayStatus] = {}
        self._stopped = False

    def get(self, url: str) -> DisplayStatus | None:
        with self._changed:
            status = self._status.get(display_key(url))
            return None if status is None else replace(status, thumbnail=None)

    def update(self, url: str, fields: dict[str, Any]) -> None:
        key = display_key(url)
        with self._changed:
            status = self._status.get(key)
            if status is None:
                status = self._status[key] = DisplayStatus(url)
            if merge_status(status, fields):
                self._revision += 1
                status.revision = self._revision
                self._changed.notify_all()

    def all(self) -> dict[str, DisplayStatus]:
        with self._changed:
            return {key: replace(s, thumbnail=None) for key, s in self._status.items()}

    def thumbnail(self, url: str) -> tuple[bytes, float] | None:
        with self._changed:
            status = self._status.get(display_key(url))
            if status is None or status.thumbnail is None or status.thumbnail_taken is None:
                return None
            return status.thumbnail, status.thumbnail_taken

    def revision(self) -> int:
        with self._changed:
            return self._revision

    def changes(self, after: int, timeout: float) -> tuple[int, list[str]]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._revision <= after and not self._stopped:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            changed = [s.url for s in self._status.values() if s.revision > after]
            return self._revision, changed

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()


class FleetStatus:
    """Reads the registered displays' ``/x/health`` (and screenshot) in the background, each
    when its turn comes in the :class:`~server.scheduler.probes.ProbeQueue` (shared by the
    processes on PostgreSQL), ``interval`` seconds apart, less often while it does not answer
    (up to ``max_backoff``); ``workers`` reads at a time."""

    def __init__(
        self,
        storage: SchedulerStorage,
        *,
        interval: float = 10.0,
        thumbnail_interval: float = 60.0,
        display_token: str | None = None,
        workers: int = 4,
        downscale: Callable[[bytes], bytes] = downscale_png,
        queue: ProbeQueue | None = None,
        book: StatusBook | None = None,
        max_backoff: float = 300.0,
        pins: Pins | None = None,
        tokens: Pins | None = None,
    ) -> None:
        """``tokens(url)``: the display's own token (got by pairing), before
        ``display_token``."""
        self._storage = storage
        self._interval = interval
        self._thumbnail_interval = thumbnail_interval
        self._token = display_token
        self._tokens = tokens
        self._downscale = downscale
        self._queue = queue if queue is not None else MemoryProbeQueue(storage)
        self._book: StatusBook = book if book is not None else MemoryStatusBook()
        self._loop = ProbeLoop(
            self._queue,
            "health",
            self._check,
            interval=interval,
            max_backoff=min(max_backoff, 30 * interval),
            workers=workers,
        )
        # Thumbnails asked for by a playback update (what the screen shows changed).
        self._thumbnails = ThreadPoolExecutor(max_workers=2, thread_name_prefix="fleet-thumbnail")
        self._session = requests.Session()
        self._session.trust_env = False  # no netrc or proxy look-ups per read: displays are local
        if pins is not None:  # HTTPS displays: their certificates, pinned at registration
            self._session.mount("https://", PinningAdapter(pins))
        self._in_flight: set[str] = set()
        self._lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._book.stop()
        self._loop.stop()
        self._thumbnails.shutdown(wait=False, cancel_futures=True)
        self._session.close()

    def poke(self, url: str | None = None) -> None:
        """Read ``url`` soon (it has just registered: due at once in the queue)."""
        if url is not None:
            self._queue.due_now(url)
        self._loop.wake()

    # -- reading ----------------------------------------------------------------------------------

    def status(self, url: str) -> DisplayStatus | None:
        return self._book.get(url)

    def status_json(self, url: str) -> dict[str, Any]:
        status = self._book.get(url) or DisplayStatus(url)
        return status.to_json()

    def snapshot(self) -> list[dict[str, Any]]:
        """Every registered display's status, in registration order (JSON-ready)."""
        known = self._book.all()
        records = []
        for display in self._storage.displays():
            status = known.get(display_key(display.url)) or DisplayStatus(display.url)
            body = status.to_json()
            body["display"] = display.url
            body["name"] = display.name
            if display.pending:  # registered without the enrolment token: awaits approval
                body["pending"] = True
                # What the operator compares with the display's idle page before approving.
                body["tls-fingerprint"] = self._storage.tls_pin(display.url)
            records.append(body)
        return records

    def thumbnail(self, url: str) -> tuple[bytes, float] | None:
        return self._book.thumbnail(url)

    @property
    def revision(self) -> int:
        return self._book.revision()

    def changes(self, after: int, timeout: float) -> tuple[int, list[str]]:
        """Wait up to ``timeout`` s for changes after revision ``after``: the new revision and
        the URLs of the displays that changed (empty on time-out)."""
        return self._book.changes(after, timeout)

    # -- learning ---------------------------------------------------------------------------------

    def _update(self, url: str, **fields: Any) -> None:
        self._book.update(url, fields)

    def played(self, play: PlayRecord) -> None:
        """A playback update came in from the display (proof of play): it is online, and this
        is on its screen."""
        self._update(
            play.display,
            online=True,
            last_seen=time.time(),
            last_error=None,
            offline_since=None,
            playing=playing_of(play),
        )
        # Its thumbnail follows what it shows, taken by the process the update came to.
        status = self._book.get(play.display)
        if status is not None and self._thumbnail_due(status):
            self._thumbnail_soon(play.display)

    def _thumbnail_soon(self, url: str) -> None:
        with self._lock:
            if url in self._in_flight:
                return
            self._in_flight.add(url)

        def take() -> None:
            try:
                self.refresh_thumbnail(url)
            except Exception:
                log.exception("taking a thumbnail of %s failed", url)
            finally:
                with self._lock:
                    self._in_flight.discard(url)

        try:
            self._thumbnails.submit(take)
        except RuntimeError:  # shut down
            with self._lock:
                self._in_flight.discard(url)

    def _screenshot_headers(self, url: str) -> dict[str, str]:
        """A closed display's screenshot is never a free read (it may show its pairing code):
        the token got by pairing, else the one that goes with the signing secret it gave."""
        headers = self._headers(url)
        if self._tokens is not None and self._tokens(url):
            return headers
        secret = self._storage.push_secret(url)
        if secret:
            headers["Authorization"] = f"Bearer {bearer_from_secret(secret)}"
        return headers

    def _headers(self, url: str) -> dict[str, str]:
        token = (self._tokens(url) if self._tokens is not None else None) or self._token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _check(self, claim: Claim) -> Outcome:
        """One read of the display's health (and thumbnail, when due)."""
        url = claim.url
        # Off last time, or never read: a refused connection says so for a fraction of an
        # HTTP read's cost.
        problem = connect_problem(url, TIMEOUT) if claim.doubtful else None
        outcome = Outcome(problem, unreachable=True) if problem else self._read_health(url)
        if outcome.error is not None:
            # The same failure as the last read's is stored already (thousands may be off).
            if outcome.error != claim.last_error or not claim.failures:
                # offline_since: kept by merge_status when it was offline already.
                self._update(url, online=False, last_error=outcome.error, offline_since=time.time())
            return outcome
        status = self._book.get(url)
        if status is not None and self._thumbnail_due(status):
            self.refresh_thumbnail(url)
        return ANSWERED

    def _read_health(self, url: str) -> Outcome:
        try:
            response = self._session.get(
                url.rstrip("/") + "/x/health",
                timeout=TIMEOUT,
                headers={"Accept": "application/json", **self._headers(url)},
            )
            if response.status_code not in (200, 503):
                raise ValueError(f"/x/health answered {response.status_code}")
            body = response.json()
            if not isinstance(body, dict):
                raise ValueError("/x/health did not answer a JSON object")
        except (requests.RequestException, ValueError) as error:
            return failed_read(url, error, TIMEOUT)
        fields: dict[str, Any] = {
            "online": True,
            "last_seen": time.time(),
            "last_error": None,
            "offline_since": None,
            "health": body.get("status") if body.get("status") in ("ok", "degraded") else None,
            "problem": health_problem(body),
            "health_checked": time.time(),
            "version": body["version"] if isinstance(body.get("version"), str) else None,
            "rolled_back_from": _rolled_back_from(body),
            "clock": clock_of(body),
        }
        playback = body.get("playback")
        if isinstance(playback, dict):
            known = self._book.get(url)
            current = known.playing if known else None
            sequence_known = current.get("sequence") if current else None
            sequence = playback.get("sequence")
            # An ingested update newer than this read wins; a newer record replaces it.
            if (
                not isinstance(sequence_known, int)
                or not isinstance(sequence, int)
                or sequence >= sequence_known
            ):
                fields["playing"] = now_playing(playback)
        self._update(url, **fields)
        return ANSWERED

    def _thumbnail_due(self, status: DisplayStatus) -> bool:
        if status.thumbnail_taken is None:
            return True
        age = time.time() - status.thumbnail_taken
        if age >= self._thumbnail_interval:
            return True
        item = (status.playing or {}).get("content-item")
        return item != status.thumbnail_of and age >= min(THUMBNAIL_MIN_GAP, self._interval)

    def refresh_thumbnail(self, url: str) -> DisplayStatus:
        """Take a new thumbnail of the display now (its ``/x/screenshot``, scaled down)."""
        known = self._book.get(url)
        showing = ((known.playing if known else None) or {}).get("content-item")
        try:
            response = self._session.get(
                url.rstrip("/") + "/x/screenshot",
                timeout=TIMEOUT + 5,
                headers={"Accept": "image/png", **self._screenshot_headers(url)},
            )
            if response.status_code != 200:
                problem = f"/x/screenshot answered {response.status_code}"
                with contextlib.suppress(ValueError, AttributeError):
                    problem += f": {response.json().get('message')}"
                raise ValueError(problem)
            if len(response.content) > MAX_THUMBNAIL_BYTES:
                raise ValueError("the screenshot is too large")
            small = self._downscale(response.content)
        except (requests.RequestException, ValueError) as error:
            self._update(
                url,
                thumbnail_error=str(error)[:300],
                thumbnail_taken=time.time(),
                thumbnail_of=showing,
            )
        else:
            self._update(
                url,
                thumbnail=small,
                thumbnail_taken=time.time(),
                thumbnail_error=None,
                thumbnail_of=showing,
            )
        return self._book.get(url) or DisplayStatus(url)


def add_fleet_status_routes(app: Flask, storage: SchedulerStorage, status: FleetStatus) -> None:
    """GET /x/fleet; GET and POST /x/displays/thumbnail?display=URL."""

    def registered(given: str | None) -> str:
        if not given:
            raise ApiError(400, "invalid-field", "'display' is required.", field="display")
        display = storage.display(Uri(schemes=HTTP)("display", given))
        if display is None:
            raise ApiError(
                404,
                "unknown-display",
                f"No display {given} is registered here.",
                field="display",
            )
        return display.url

    @app.get("/x/fleet")
    def fleet_status() -> Response:
        return json_response(status.snapshot())

    @app.get("/x/displays/thumbnail")
    def get_thumbnail() -> Response:
        url = registered(request.args.get("display"))
        thumbnail = status.thumbnail(url)
        if thumbnail is None:
            raise ApiError(404, "no-thumbnail", f"There is no thumbnail of {url} yet.")
        return thumbnail_response(*thumbnail)

    @app.post("/x/displays/thumbnail")
    def take_thumbnail() -> Response:
        url = registered(request.args.get("display"))
        # 200 either way: the display's status, whose thumbnail.error says why there is no
        # new picture (unreachable, no screen, busy); the scheduler itself did not fail.
        status.refresh_thumbnail(url)
        return json_response(status.status_json(url), 200)


def thumbnail_response(png: bytes, taken: float) -> Response:
    response = Response(png, mimetype="image/png")
    response.headers["Cache-Control"] = "no-store"
    response.headers["Last-Modified"] = http_date(taken)
    return response
