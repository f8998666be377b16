"""The content cache: files a CDS requires, downloaded in the background, verified, kept on disk.

No Qt here. The engine tells the cache what the schedules need (:meth:`ContentCache.wanted`),
asks :meth:`ContentCache.path_for` which of those are ready to play, and is called back
(``on_ready``, from a downloader thread) when one becomes ready, so it can re-evaluate.

Rules (docs/cds.md, "Files"):

- Sources are tried in order (``player.cachefetch`` resumes and verifies one); a file that fails
  a hash is discarded and logged, never served. A file with no hashes is kept as downloaded.
- Files are written under ``<data-dir>/cache/files/`` by an atomic rename after verification;
  the index is SQLite (WAL), so a power cut leaves either the old state or the new one. On
  start, entries whose file is missing or of the wrong size are dropped and files nobody
  indexed are deleted: after a restart with no network, verified files are still served.
- Over the size bound, the least recently used files no current schedule needs are evicted.
- Failed downloads are retried while still wanted, backing off from ``retry_initial`` doubling
  to ``retry_max`` seconds.
- A file without hashes is revalidated with a conditional request on each schedule change (at
  most once per ``revalidate_floor`` seconds) and every ``revalidate_every`` seconds. A changed
  file is swapped in atomically under a new name (the renderer's next load gets the new URL);
  the old copy plays until then. Without validators the whole file is compared by content.
- :meth:`ContentCache.stats` tells, per wanted file, its state, progress and last failure.

The entries' transitions (queued, downloading, installed, revalidated, evicted) live here, in
one index under one lock. What stands alone is beside it: ``player.cachefetch`` (bringing one
file's bytes onto the disk and checking them), ``player.cachefiles`` (the files on disk and the
cache's settings) and ``player.cachedcontent`` (serving them).
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from player.cachefetch import (
    CacheError,
    NotModifiedError,
    Transfer,
    fetch_http,
    fetch_verified,
    fsync_dir,
    same_content,
    verify,
)
from player.cachefiles import DEFAULT_MAX_BYTES, DEFAULT_REVALIDATE_EVERY, CacheConfig, FileSpec
from server.platform.db import Migrations, connect, migrate, transaction

log = logging.getLogger("pdn.cache")

# MIGRATIONS[n] takes the index from user_version n to n + 1. Indexes made before the schema
# was versioned have the files table and user_version 0: hence IF NOT EXISTS.
MIGRATIONS: Migrations = (
    (
        "CREATE TABLE IF NOT EXISTS files (key TEXT PRIMARY KEY, name TEXT NOT NULL,"
        " size INTEGER NOT NULL, added REAL NOT NULL, last_used REAL NOT NULL,"
        " source TEXT NOT NULL)",
    ),
    (
        "ALTER TABLE files ADD COLUMN etag TEXT",
        "ALTER TABLE files ADD COLUMN last_modified TEXT",
        "ALTER TABLE files ADD COLUMN checked REAL",
    ),
)
DEFAULT_REVALIDATE_FLOOR = 30.0  # a schedule change re-checks a file at most this often
TOUCH_EVERY = 60.0  # seconds between writes of a file's last use to the index

ReadyCallback = Callable[[FileSpec, Path], None]


@dataclass
class _Entry:
    name: str
    size: int
    last_used: float
    touched: float  # when last_used was last written to the index
    source: str = ""
    etag: str | None = None
    last_modified: str | None = None
    checked: float = 0.0  # when the copy was last found current (wall clock)


@dataclass
class _Job:
    spec: FileSpec
    due: float = 0.0
    attempts: int = 0
    running: bool = False
    last_error: str | None = None
    revalidate: bool = False  # a conditional re-check of a cached file without hashes
    transfer: Transfer = field(default_factory=Transfer)


@dataclass
class CacheStats:
    files: int
    bytes: int
    max_bytes: int
    queued: int
    failing: dict[str, str] = field(default_factory=dict)
    files_wanted: list[dict[str, Any]] = field(default_factory=list)


class ContentCache:
    """Downloads, verifies and keeps required files under ``<data_dir>/cache``."""

    def __init__(
        self,
        data_dir: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        on_ready: ReadyCallback | None = None,
        workers: int = 2,
        timeout: tuple[float, float] = (5.0, 30.0),
        retry_initial: float = 5.0,
        retry_max: float = 600.0,
        session: requests.Session | None = None,
        config: CacheConfig | None = None,
        revalidate_every: float | None = None,
        revalidate_floor: float = DEFAULT_REVALIDATE_FLOOR,
    ) -> None:
        """``config`` (the ``[cache]`` section) sets ``max_bytes`` and ``revalidate_every``."""
        if config is not None:
            max_bytes = config.max_bytes
            revalidate_every = revalidate_every or config.revalidate_every
        self.root = Path(data_dir) / "cache"
        self.files_dir = self.root / "files"
        self.partial_dir = self.root / "partial"
        self.files_dir.mkdir(parents=True, exist_ok=True)
        self.partial_dir.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.revalidate_every = revalidate_every or DEFAULT_REVALIDATE_EVERY
        self.revalidate_floor = revalidate_floor
        self.on_ready = on_ready
        self._timeout = timeout
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self._session = session or requests.Session()
        self._lock = threading.Condition(threading.RLock())
        self._entries: dict[str, _Entry] = {}
        self._jobs: dict[str, _Job] = {}
        self._wanted: dict[str, FileSpec] = {}
        self._closed = False
        self._check_errors: dict[str, str] = {}  # why the last revalidation failed, by key
        self._db = connect(self.root / "index.sqlite3", synchronous="FULL", busy_timeout=5.0)
        migrate(self._db, MIGRATIONS, legacy=2)  # the steps pdn 0.1.0 knew (server.platform.db)
        self._load_index()
        self._threads = [
            threading.Thread(target=self._work, name=f"cache-download-{n}", daemon=True)
            for n in range(max(1, workers))
        ]
        self._threads.append(
            threading.Thread(target=self._periodic, name="cache-revalidate", daemon=True)
        )
        for thread in self._threads:
            thread.start()

    # -- what the engine calls --------------------------------------------------------------

    def wanted(self, files: Iterable[FileSpec]) -> None:
        """The files current schedules need (replaces the previous set): missing ones are
        fetched, and only files outside this set may be evicted."""
        with self._lock:
            self._wanted = {spec.key: spec for spec in files}
            for key in [k for k, job in self._jobs.items() if k not in self._wanted]:
                if not self._jobs[key].running:
                    del self._jobs[key]
            for key, spec in self._wanted.items():
                if key not in self._entries and key not in self._jobs:
                    self._jobs[key] = _Job(spec)
            self._queue_revalidation(self.revalidate_floor)
            self._lock.notify_all()
            self._evict()

    def revalidate(self, min_age: float = 0.0) -> int:
        """Re-check every wanted file without hashes last found current over ``min_age``
        seconds ago (conditional requests, in the background). Returns how many were queued."""
        with self._lock:
            queued = self._queue_revalidation(min_age)
            self._lock.notify_all()
            return queued

    def _queue_revalidation(self, min_age: float) -> int:
        now = time.time()
        queued = 0
        for key, spec in self._wanted.items():
            entry = self._entries.get(key)
            if spec.hashes or entry is None or key in self._jobs:
                continue
            if urlsplit(entry.source or spec.sources[0]).scheme.lower() not in ("http", "https"):
                continue
            if now - entry.checked < min_age:
                continue
            self._jobs[key] = _Job(spec, revalidate=True)
            queued += 1
        return queued

    def _periodic(self) -> None:
        next_run = time.monotonic() + self.revalidate_every
        with self._lock:
            while not self._closed:
                left = next_run - time.monotonic()
                if left > 0:
                    self._lock.wait(left)
                    continue
                next_run = time.monotonic() + self.revalidate_every
                count = self._queue_revalidation(self.revalidate_every / 2)
                if count:
                    log.info("revalidating %d cached file(s) without hashes", count)
                    self._lock.notify_all()

    def fetch(self, spec: FileSpec) -> None:
        """Fetch one file now (added to the wanted set)."""
        with self._lock:
            self._wanted[spec.key] = spec
            if spec.key not in self._entries and spec.key not in self._jobs:
                self._jobs[spec.key] = _Job(spec)
                self._lock.notify_all()

    def path_for(self, spec: FileSpec) -> Path | None:
        """The verified local copy, or None while it is not (yet) in the cache."""
        with self._lock:
            entry = self._entries.get(spec.key)
            if entry is None:
                return None
            path = self.files_dir / entry.name
            now = time.time()
            entry.last_used = now
            if now - entry.touched > TOUCH_EVERY:
                entry.touched = now
                self._db.execute("UPDATE files SET last_used=? WHERE key=?", (now, spec.key))
        if not path.exists():
            log.warning("cached file %s vanished from disk", path.name)
            self._drop(spec.key)
            return None
        return path

    def is_ready(self, spec: FileSpec) -> bool:
        return self.path_for(spec) is not None

    def last_error(self, spec: FileSpec) -> str | None:
        """Why the last attempt to fetch this file failed (None: no failure known)."""
        with self._lock:
            job = self._jobs.get(spec.key)
            return job.last_error if job is not None else None

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                files=len(self._entries),
                bytes=sum(e.size for e in self._entries.values()),
                max_bytes=self.max_bytes,
                queued=len(self._jobs),
                failing={key: job.last_error for key, job in self._jobs.items() if job.last_error},
                files_wanted=[self._file_status(key, spec) for key, spec in self._wanted.items()],
            )

    def _file_status(self, key: str, spec: FileSpec) -> dict[str, Any]:
        """One wanted file for health: state, progress, the last failure and why."""
        entry = self._entries.get(key)
        job = self._jobs.get(key)
        status: dict[str, Any] = {"url": spec.sources[0], "key": key}
        if job is not None and job.revalidate:
            state = "revalidating" if job.running else "ready"
        elif job is not None:
            state = "downloading" if job.running else ("failed" if job.last_error else "queued")
        else:
            state = "ready" if entry is not None else "queued"
        status["state"] = state
        if job is not None and job.running:
            status["received"] = job.transfer.received
            status["total"] = job.transfer.total
        if entry is not None:
            status["size"] = entry.size
            if not spec.hashes:
                status["checked"] = _iso(entry.checked)
        if (job is None or not job.last_error) and key in self._check_errors:
            status["error"] = "revalidation failed: " + self._check_errors[key]
        if job is not None and job.last_error:
            status["error"] = job.last_error
            status["attempts"] = job.attempts
            if not job.running:
                status["retry-in"] = round(max(0.0, job.due - time.monotonic()), 1)
        return status

    def wait_idle(self, timeout: float) -> bool:
        """Block until no download is queued or running (tests, tools). True when idle."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while any(job.running or job.attempts == 0 for job in self._jobs.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.1))
            return True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        for thread in self._threads:
            thread.join(timeout=self._timeout[0] + self._timeout[1])
        with self._lock:
            self._db.close()

    # -- the index --------------------------------------------------------------------------

    def _load_index(self) -> None:
        rows = self._db.execute(
            "SELECT key, name, size, last_used, source, etag, last_modified, checked FROM files"
        ).fetchall()
        dropped = 0
        with transaction(self._db):
            for key, name, size, last_used, source, etag, modified, checked in rows:
                path = self.files_dir / name
                try:
                    on_disk = path.stat().st_size
                except OSError:
                    on_disk = -1
                if on_disk != size:
                    dropped += 1
                    self._db.execute("DELETE FROM files WHERE key=?", (key,))
                    path.unlink(missing_ok=True)
                    continue
                self._entries[key] = _Entry(
                    name, size, last_used, last_used, source, etag, modified, checked or 0.0
                )
        known = {entry.name for entry in self._entries.values()}
        strays = [p for p in self.files_dir.iterdir() if p.name not in known]
        for stray in strays:
            # Renamed into place but never indexed (a crash in between): not trusted.
            stray.unlink(missing_ok=True)
        log.info(
            "content cache: %d files, %d bytes (%d index entries dropped, %d strays removed)",
            len(self._entries),
            sum(e.size for e in self._entries.values()),
            dropped,
            len(strays),
        )

    def _drop(self, key: str) -> None:
        with self._lock:
            entry = self._entries.pop(key, None)
            self._db.execute("DELETE FROM files WHERE key=?", (key,))
        if entry is not None:
            (self.files_dir / entry.name).unlink(missing_ok=True)

    def _evict(self) -> None:
        """Least recently used first, never a file a current schedule needs."""
        with self._lock:
            total = sum(e.size for e in self._entries.values())
            if total <= self.max_bytes:
                return
            candidates = sorted(
                (e.last_used, key) for key, e in self._entries.items() if key not in self._wanted
            )
            for _, key in candidates:
                if total <= self.max_bytes:
                    break
                total -= self._entries[key].size
                log.info("evicting %s (cache over %d bytes)", key, self.max_bytes)
                self._drop(key)
            if total > self.max_bytes:
                log.warning(
                    "content cache holds %d bytes, over its bound of %d: every file is needed",
                    total,
                    self.max_bytes,
                )

    # -- downloading ------------------------------------------------------------------------

    def _next_job(self) -> _Job | None:
        with self._lock:
            while not self._closed:
                now = time.monotonic()
                due = [j for j in self._jobs.values() if not j.running and j.due <= now]
                if due:
                    job = min(due, key=lambda j: j.due)
                    job.running = True
                    return job
                waiting = [j.due for j in self._jobs.values() if not j.running]
                self._lock.wait(min(waiting) - now if waiting else None)
            return None

    def _work(self) -> None:
        while True:
            job = self._next_job()
            if job is None:
                return
            spec = job.spec
            if job.revalidate:
                self._run_revalidation(job)
                continue
            try:
                path = self._download(spec, job)
            except CacheError as error:
                with self._lock:
                    job.running = False
                    job.attempts += 1
                    job.last_error = str(error)
                    delay = min(self._retry_max, self._retry_initial * 2 ** (job.attempts - 1))
                    job.due = time.monotonic() + delay
                    if spec.key not in self._wanted:
                        self._jobs.pop(spec.key, None)
                    self._lock.notify_all()
                log.warning("cannot fetch %s: %s (retry in %.0f s)", spec.key, error, delay)
                continue
            except Exception:
                log.exception("downloader: unexpected error for %s", spec.key)
                with self._lock:
                    job.running = False
                    job.attempts += 1
                    job.due = time.monotonic() + self._retry_max
                    self._lock.notify_all()
                continue
            # Evict before the job is done, so that an idle cache (wait_idle) is within its bound.
            self._evict()
            with self._lock:
                self._jobs.pop(spec.key, None)
                self._lock.notify_all()
            callback = self.on_ready
            if callback is not None:
                try:
                    callback(spec, path)
                except Exception:
                    log.exception("cache on_ready callback failed for %s", spec.key)

    def _run_revalidation(self, job: _Job) -> None:
        spec = job.spec
        try:
            path = self._revalidate_file(job)
            error = None
        except CacheError as failure:
            path, error = None, str(failure)
            log.warning("cannot revalidate %s: %s (the cached copy stays)", spec.sources[0], error)
        except Exception:
            path, error = None, "unexpected error (logged)"
            log.exception("revalidation: unexpected error for %s", spec.key)
        with self._lock:
            if self._jobs.get(spec.key) is job:
                del self._jobs[spec.key]
            if error is None:
                self._check_errors.pop(spec.key, None)
            else:
                self._check_errors[spec.key] = error
            self._lock.notify_all()
        callback = self.on_ready
        if path is not None and callback is not None:
            try:
                callback(spec, path)
            except Exception:
                log.exception("cache on_ready callback failed for %s", spec.key)

    def _revalidate_file(self, job: _Job) -> Path | None:
        """A conditional request for a cached file without hashes: None when it is unchanged,
        else the new copy's path (installed beside the old one, which is then deleted)."""
        spec = job.spec
        with self._lock:
            entry = self._entries.get(spec.key)
            if entry is None:
                return None
            old = self.files_dir / entry.name
            source, etag, modified = (
                entry.source or spec.sources[0],
                entry.etag,
                entry.last_modified,
            )
        conditions: dict[str, str] = {}
        if etag:
            conditions["If-None-Match"] = etag
        if modified:
            conditions["If-Modified-Since"] = modified
        part = self._partial_path(spec, source)
        part.unlink(missing_ok=True)
        try:
            fetch_http(
                self._session,
                source,
                part,
                limit=spec.size if spec.size is not None else self.max_bytes,
                expected_size=spec.size,
                timeout=self._timeout,
                transfer=job.transfer,
                conditions=conditions,
            )
        except NotModifiedError:
            got = job.transfer
            self._mark_checked(spec.key, got.etag or etag, got.last_modified or modified)
            return None
        try:
            verify(spec, part)
            if same_content(part, old):
                part.unlink(missing_ok=True)
                self._mark_checked(spec.key, job.transfer.etag, job.transfer.last_modified)
                return None
        except (CacheError, OSError):
            part.unlink(missing_ok=True)
            raise
        log.info("%s changed at its source: the new copy replaces the old one", spec.sources[0])
        return self._install(spec, source, part, job)

    def _mark_checked(self, key: str, etag: str | None, modified: str | None) -> None:
        now = time.time()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            entry.checked, entry.etag, entry.last_modified = now, etag, modified
            self._db.execute(
                "UPDATE files SET checked=?, etag=?, last_modified=? WHERE key=?",
                (now, etag, modified, key),
            )

    def _download(self, spec: FileSpec, job: _Job | None = None) -> Path:
        errors: list[str] = []
        for source in spec.sources:
            try:
                return self._download_from(spec, source, job)
            except CacheError as error:
                errors.append(f"{source}: {error}")
                log.info("source failed for %s: %s: %s", spec.key, source, error)
        raise CacheError("; ".join(errors) or "no source")

    def _partial_path(self, spec: FileSpec, source: str) -> Path:
        tag = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()[:10]
        return self.partial_dir / f"{spec.key}-{tag}.part"

    def _download_from(self, spec: FileSpec, source: str, job: _Job | None = None) -> Path:
        part = self._partial_path(spec, source)
        fetch_verified(
            self._session,
            spec,
            source,
            part,
            max_bytes=self.max_bytes,
            timeout=self._timeout,
            transfer=job.transfer if job is not None else None,
        )
        return self._install(spec, source, part, job)

    def _install(self, spec: FileSpec, source: str, part: Path, job: _Job | None = None) -> Path:
        with self._lock:
            previous = self._entries.get(spec.key)
        # A new version gets a new name: the old copy keeps playing until the renderer's next
        # load, which asks path_for and gets the new one.
        name = spec.key + spec.suffix
        if previous is not None and previous.name == name:
            name = f"{spec.key}-{secrets.token_hex(4)}{spec.suffix}"
        target = self.files_dir / name
        os.replace(part, target)
        fsync_dir(self.files_dir)
        for other in self.partial_dir.glob(f"{spec.key}-*.part"):
            other.unlink(missing_ok=True)
        size = target.stat().st_size
        now = time.time()
        etag = job.transfer.etag if job is not None else None
        modified = job.transfer.last_modified if job is not None else None
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO files (key, name, size, added, last_used, source, etag,"
                " last_modified, checked) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (spec.key, name, size, now, now, source, etag, modified, now),
            )
            self._entries[spec.key] = _Entry(name, size, now, now, source, etag, modified, now)
        if previous is not None and previous.name != name:
            (self.files_dir / previous.name).unlink(missing_ok=True)
        log.info("cached %s (%d bytes) from %s", spec.key, size, source)
        return target


def _iso(timestamp: float) -> str | None:
    return datetime.fromtimestamp(timestamp, UTC).isoformat() if timestamp else None
