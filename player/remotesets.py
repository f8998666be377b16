"""Remote content-sets: keep the CDS of every ``type="remote"`` set current. No Qt.

:class:`RemoteSetFetcher` fetches the CDS of every remote content-set the display's documents
name (sources http, https or file, tried in order), every ``refresh`` (default 1 h); a failure
retries after 60 s, doubling up to the refresh interval. The last good copy of each is kept on
disk and plugged in at start, before any network is there.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

import requests

from cds.errors import CdsError
from server.platform.atomicfile import write_atomically
from server.platform.net import shown_uri

log = logging.getLogger("pdn.remotesets")

TIMEOUT = 10.0
REMOTE_REFRESH = 3600.0
REMOTE_FIRST_RETRY = 60.0
MAX_DOCUMENT = 8 << 20


class RemoteSetInfo(Protocol):
    """What the fetcher needs of ``cds.playlist.RemoteSet``."""

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
                errors.append(f"{shown_uri(uri)}: {error}")
                continue
            try:
                write_atomically(self.cache_path(remote.key), data)
            except OSError as error:
                log.error("remote set %s: cannot keep a copy: %s", remote.key, error)
            self._retry.pop(remote.key, None)
            self._due[remote.key] = now + refresh
            log.info(
                "remote set %s fetched from %s; next in %.0f s", remote.key, shown_uri(uri), refresh
            )
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
