"""The display's side of the Scheduling segment, and remote content-sets. No Qt.

:class:`ScheduleFollower` (``pdn display --schedule URL --register SCHEDULER_URL``):
- at start, plays the last CDS it kept on disk, so a display rebooted with no network shows
  its schedule at once;
- fetches the schedule (``GET /schedule/<id>/``) and hands it to the same code path as a
  ``POST /schedule`` with ``text/xml``; keeps it on disk (atomic rename);
- subscribes the display's own ``/schedule`` for updates, and registers the display (url,
  location, name) with the scheduler;
- then checks again every ``poll_interval`` (and re-subscribes, which is idempotent), so a
  scheduler that was down, or lost its state, is caught up with as soon as it is back.
  Failures retry after 2 s, doubling up to the poll interval.

:class:`RemoteSetFetcher` fetches the CDS of every ``type="remote"`` content-set the display's
documents name (sources http, https or file, tried in order), every ``refresh`` (default 1 h);
a failure retries after 60 s, doubling up to the refresh interval. The last good copy of each
is kept on disk and plugged in at start, before any network is there.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

import requests

from cds.errors import CdsError

log = logging.getLogger("pdn.follower")

TIMEOUT = 10.0
POLL_INTERVAL = 60.0
FIRST_RETRY = 2.0
REMOTE_REFRESH = 3600.0
REMOTE_FIRST_RETRY = 60.0
MAX_DOCUMENT = 8 << 20
#: Registration is repeated after the scheduler was unreachable, and this often anyway (in
#: case it lost its registry); not every poll, as each one makes it re-read the display.
REREGISTER_INTERVAL = 3600.0


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a power cut leaves the old or the new file, whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


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
        poll_interval: float = POLL_INTERVAL,
        first_retry: float = FIRST_RETRY,
        token: str | None = None,
    ) -> None:
        self._apply = apply_cds
        self._display_url = display_url
        self.saved_path = state_dir / "followed-schedule.xml"
        self.schedule_url = schedule_url
        self.register_url = register_url.rstrip("/") if register_url else None
        self._location = location
        self._name = name
        self._poll = poll_interval
        self._first_retry = first_retry
        self._session = requests.Session()
        # One exchange a minute: no kept-alive connection to pin a scheduler that restarts.
        self._session.headers["Connection"] = "close"
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: bytes | None = None
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
        try:
            response = self._session.get(
                self.schedule_url, timeout=TIMEOUT, headers={"Accept": "text/xml"}
            )
        except requests.RequestException as error:
            self._subscribed = False
            self._registered_at = None
            self._problem("fetch", "cannot fetch the schedule %s: %s", self.schedule_url, error)
            return False
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
        if data == self._last:
            return True
        try:
            self._apply(data)
        except CdsError as error:
            log.error("the schedule %s is not a valid CDS: %s", self.schedule_url, error)
            return True  # the scheduler answered; its document is at fault
        self._last = data
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
        try:
            response = self._session.post(url, json={"subscriber-uri": subscriber}, timeout=TIMEOUT)
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
        url = f"{self.register_url}/displays"
        try:
            response = self._session.post(url, json=body, timeout=TIMEOUT)
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
        log.info("registered %s with %s", body["url"], self.register_url)
        return True


# -- remote content-sets ---------------------------------------------------------------------


class RemoteSetInfo(Protocol):
    """What the fetcher needs of ``cds.evaluate.RemoteSet``."""

    @property
    def key(self) -> str: ...

    @property
    def uris(self) -> tuple[str, ...]: ...

    @property
    def refresh(self) -> float | None: ...


def fetch_document(session: requests.Session, uri: str) -> bytes:
    """One source's bytes: http(s) with a timeout, or a local file; OSError/RequestException."""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        with open(unquote(parts.path), "rb") as handle:
            data = handle.read(MAX_DOCUMENT + 1)
    elif parts.scheme in ("http", "https"):
        response = session.get(uri, timeout=TIMEOUT, headers={"Accept": "text/xml"})
        response.raise_for_status()
        data = response.content
    else:
        raise OSError(f"cannot fetch {uri}: only http, https and file sources")
    if len(data) > MAX_DOCUMENT:
        raise OSError(f"{uri} is larger than {MAX_DOCUMENT} bytes")
    return data


class RemoteSetFetcher:
    """Keeps the fetched CDS of every remote content-set current, and on disk."""

    def __init__(
        self,
        *,
        remote_sets: Callable[[], list[Any]],
        deliver: Callable[[str, bytes], None],
        cache_dir: Path,
        default_refresh: float = REMOTE_REFRESH,
        first_retry: float = REMOTE_FIRST_RETRY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._remote_sets = remote_sets
        self._deliver = deliver
        self.cache_dir = cache_dir
        self._default_refresh = default_refresh
        self._first_retry = first_retry
        self._clock = clock
        self._session = requests.Session()
        self._due: dict[str, float] = {}
        self._retry: dict[str, float] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def cache_path(self, key: str) -> Path:
        return self.cache_dir / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".xml")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="remote-sets", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=TIMEOUT + 2)
        self._session.close()

    def poke(self) -> None:
        """The documents changed: look for new remote sets now."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                delay = self.step()
            except Exception:
                log.exception("remote content-sets: unexpected failure")
                delay = self._first_retry
            self._wake.wait(min(delay, 5.0))
            self._wake.clear()

    def step(self) -> float:
        """Fetch what is due; return seconds until the next fetch is due."""
        now = self._clock()
        sets: list[RemoteSetInfo] = list(self._remote_sets())
        keys = {remote.key for remote in sets}
        for gone in [key for key in self._due if key not in keys]:
            del self._due[gone]
            self._retry.pop(gone, None)
        for remote in sets:
            if remote.key not in self._due:
                self._due[remote.key] = now
                self._load_cached(remote.key)
            if self._due[remote.key] <= now:
                self._refresh(remote, now)
        if not self._due:
            return self._default_refresh
        return max(0.0, min(self._due.values()) - self._clock())

    def _load_cached(self, key: str) -> None:
        try:
            data = self.cache_path(key).read_bytes()
        except OSError:
            return
        try:
            self._deliver(key, data)
            log.info("remote set %s: playing the kept copy", key)
        except CdsError as error:
            log.error("remote set %s: the kept copy is not valid: %s", key, error)

    def _refresh(self, remote: RemoteSetInfo, now: float) -> None:
        refresh = remote.refresh or self._default_refresh
        errors: list[str] = []
        for uri in remote.uris:
            try:
                data = fetch_document(self._session, uri)
                self._deliver(remote.key, data)
            except (OSError, requests.RequestException, CdsError) as error:
                errors.append(f"{uri}: {error}")
                continue
            try:
                write_atomically(self.cache_path(remote.key), data)
            except OSError as error:
                log.error("remote set %s: cannot keep a copy: %s", remote.key, error)
            self._retry.pop(remote.key, None)
            self._due[remote.key] = now + refresh
            log.info("remote set %s fetched from %s; next in %.0f s", remote.key, uri, refresh)
            return
        retry = min(refresh, self._retry.get(remote.key, self._first_retry / 2) * 2)
        self._retry[remote.key] = retry
        self._due[remote.key] = now + retry
        log.warning(
            "remote set %s could not be fetched (%s); trying again in %.0f s",
            remote.key,
            "; ".join(errors) or "no sources",
            retry,
        )


# -- wiring into ``pdn display`` -----------------------------------------------------------


def start_for_display(
    *,
    schedule_url: str | None,
    register_url: str | None,
    service: Any,
    playlist: Any,
    display_url: Callable[[], str],
    data_dir: Path,
    location: dict[str, str] | None,
    name: str | None,
) -> Callable[[], None]:
    """Start the follower (when asked) and the remote-set fetcher; return their stopper.

    ``service.apply_cds`` is the code path of ``POST /schedule`` with ``text/xml``;
    ``playlist`` (the display's ``cds.evaluate.Playlist``) lists the remote sets, and
    ``service.set_remote`` plugs each fetched one in.
    """
    from cds.parser import parse

    def deliver_remote(key: str, data: bytes) -> None:
        # set_remote plugs it in under the service's documents lock and re-plans playback.
        service.set_remote(key, parse(data).root)

    fetcher = RemoteSetFetcher(
        remote_sets=playlist.remote_sets,
        deliver=deliver_remote,
        cache_dir=data_dir / "remote-sets",
    )
    fetcher.start()
    stoppers: list[Callable[[], None]] = [fetcher.stop]
    if schedule_url or register_url:
        follower = ScheduleFollower(
            apply_cds=service.apply_cds,
            display_url=display_url,
            state_dir=data_dir,
            schedule_url=schedule_url,
            register_url=register_url,
            location=location,
            name=name,
            token=os.environ.get("PDN_SCHEDULER_TOKEN") or None,
        )
        follower.start()
        stoppers.insert(0, follower.stop)

    def stop() -> None:
        for stopper in stoppers:
            stopper()

    return stop
