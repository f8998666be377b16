"""Learning about registered displays from the displays themselves.

After ``POST /displays`` (and every ``refresh_interval`` afterwards) the scheduler reads the
display's ``GET /`` for its name (extension field) and the URL of its sensors, then that URL for
the sensor list. A display that does not answer is tried again with a growing pause, never
holding up the API: the reads run on a small pool of worker threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urljoin

import requests

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
    """Reads every display's GET / in the background: after registration, then now and then."""

    def __init__(
        self,
        storage: SchedulerStorage,
        *,
        refresh_interval: float = 300.0,
        workers: int = 4,
        on_back: Callable[[str], None] = lambda url: None,
        subscriber_for: Callable[[str], str | None] = lambda url: None,
        display_token: str | None = None,
    ) -> None:
        """``on_back(url)``: the display answers again after failing to.
        ``subscriber_for(url)``: where the display's playback updates should go; each read
        (re)subscribes it there (idempotent), with ``display_token`` as bearer if given."""
        self._storage = storage
        self._on_back = on_back
        self._subscriber_for = subscriber_for
        self._display_token = display_token
        self._subscribe_failed: set[str] = set()
        self._refresh = refresh_interval
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="display-probe")
        self._session = requests.Session()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._in_flight: set[str] = set()
        self._retry_at: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="display-prober", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._session.close()

    def poke(self, url: str) -> None:
        """Read this display soon (it has just registered)."""
        with self._lock:
            self._retry_at.pop(url, None)
            self._failures.pop(url, None)
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=min(5.0, self._refresh))
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                due = self._storage.displays_to_check(time.time() - self._refresh)
            except Exception:
                log.exception("cannot list displays to read")
                continue
            now = time.monotonic()
            with self._lock:
                for url in due:
                    if url in self._in_flight or self._retry_at.get(url, 0.0) > now:
                        continue
                    self._in_flight.add(url)
                    self._pool.submit(self._check, url)

    def _check(self, url: str) -> None:
        try:
            name, sensors = read_display_info(self._session, url)
        except (requests.RequestException, ValueError) as error:
            with self._lock:
                failures = self._failures.get(url, 0) + 1
                self._failures[url] = failures
                pause = min(self._refresh, 10.0 * 2 ** (failures - 1))
                self._retry_at[url] = time.monotonic() + pause
            log.info("display %s did not answer GET / (%s); next try in %.0f s", url, error, pause)
        else:
            self._storage.record_display_info(url, name, sensors)
            with self._lock:
                failed = self._failures.pop(url, None)
                self._retry_at.pop(url, None)
            log.debug("display %s: name %r, %d sensors", url, name, len(sensors))
            self._subscribe_playback(url)
            if failed:
                log.info("display %s answers again", url)
                try:
                    self._on_back(url)
                except Exception:
                    log.exception("catching display %s up failed", url)
        finally:
            with self._lock:
                self._in_flight.discard(url)

    def _subscribe_playback(self, url: str) -> None:
        """Have the display POST its playback updates to the scheduler (proof of play)."""
        subscriber = self._subscriber_for(url)
        if subscriber is None:
            return
        headers = {"Authorization": f"Bearer {self._display_token}"} if self._display_token else {}
        target = url.rstrip("/") + "/playback/subscribe/"
        try:
            response = self._session.post(
                target, json={"subscriber-uri": subscriber}, headers=headers, timeout=TIMEOUT
            )
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
