"""Schedules live in the scheduler's storage; this module takes them in (from a folder, from the
API), keeps a copy in memory and publishes every change.

The storage is the one source of schedules: with several scheduler processes on one PostgreSQL each
serves what the database holds (its copy is refreshed when the storage says another process changed
a schedule: ``watch_schedules``, LISTEN/NOTIFY there), and a change is published by the process
that stored it only, in the transaction that stored it (``save_schedule(publish=...)``: when two
processes take in the same file change, the second finds it stored and publishes nothing). Without
a folder (``directory`` None) schedules come only through the API.

A folder, if given, is imported from and watched: ``<id>.xml`` in it is the schedule ``<id>``. The
directory is polled (stat every half second, and the content hash of every file now and then, so a
change that keeps size and mtime is still seen): no extra dependency, works on every file system,
network mounts included. A changed file is validated with ``cds``; a good one becomes the
schedule's new version (stored, then pushed to the schedule's subscribers), a broken one is logged
with its lines and the last good version keeps being served. A deleted file removes the schedule
(one imported from this folder; not one written through the API to a scheduler without a folder,
nor one from another process's folder) and tells subscribers with an empty content-set of the same
name (which the display reads as "remove this set").

Schedules written through the API (``PUT``/``DELETE /x/schedules/<id>``) are validated by
:meth:`ScheduleLibrary.put` and stored; with a folder, ``<id>.xml`` is also written there
atomically (so the folder stays the editable copy); :meth:`ScheduleLibrary.delete` removes the file
and the schedule. Every change is also told to ``on_change(schedule_id)`` once stored (the fleet
re-pushes the schedule to the displays it is assigned to).

A playlist's schedule (``server.scheduler.playlists``, source ``PLAYLIST_SOURCE``) is stored and
removed with its playlist, which tells the library (:meth:`ScheduleLibrary.stored`,
:meth:`ScheduleLibrary.forgotten`); ``PUT``/``DELETE`` of its id here is
``ScheduleConflictError``, and a folder file of its id is logged and not taken.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lxml import etree

from cds.errors import CdsError
from cds.parser import parse
from server.scheduler.storage import (
    PLAYLIST_SOURCE,
    ScheduleConflictError,
    SchedulerStorage,
    StoredSchedule,
)

log = logging.getLogger("pdn.scheduler.schedules")

SCHEDULE_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$")

#: publish(schedule_id, cds_bytes, connection): hand a schedule update to the subscribers'
#: outbox; ``connection``: the storage's transaction to join (PostgreSQL), or None.
Publisher = Callable[[str, bytes, Any], None]

_SAFE_PARSER = etree.XMLParser(
    resolve_entities=False, no_network=True, load_dtd=False, remove_comments=False
)


def is_schedule_id(text: str) -> bool:
    return bool(SCHEDULE_ID.match(text))


def removal_document(root_name: str) -> bytes:
    """An inline content-set with no items: the display drops its set of that name."""
    element = etree.Element("content-set", name=root_name, type="inline")
    return bytes(etree.tostring(element, xml_declaration=True, encoding="UTF-8")) + b"\n"


def _with_root_name(data: bytes, name: str) -> bytes:
    """The document with ``name`` set on its root content-set (so updates replace it)."""
    tree = etree.fromstring(data, _SAFE_PARSER)
    root = tree
    if etree.QName(root).localname != "content-set":
        found = next(
            (child for child in root if etree.QName(child).localname == "content-set"), None
        )
        if found is None:
            return data
        root = found
    root.set("name", name)
    return bytes(etree.tostring(tree, xml_declaration=True, encoding="UTF-8")) + b"\n"


class ScheduleLibrary:
    """Schedules from storage, kept in step with the folder (if any); publishes every change."""

    def __init__(
        self,
        directory: Path | None,
        storage: SchedulerStorage,
        publish: Publisher,
        *,
        poll_interval: float = 0.5,
        rehash_interval: float = 10.0,
        on_change: Callable[[str], None] = lambda schedule_id: None,
    ) -> None:
        self.directory = directory
        # What this folder's imports are marked with (a folder shared by several processes,
        # e.g. a network mount, has the same path on each).
        self._source = str(directory.resolve()) if directory is not None else ""
        self._storage = storage
        self._publish = publish
        self.on_change = on_change
        # One change at a time: the watcher's scans and the API's writes.
        self._change_lock = threading.RLock()
        self._poll_interval = poll_interval
        self._rehash_interval = rehash_interval
        self._stats: dict[str, tuple[int, int]] = {}
        self._file_digests: dict[str, str] = {}  # last content seen in each file, good or bad
        self._known: dict[str, StoredSchedule] = {s.schedule_id: s for s in storage.schedules()}
        self._removing: set[str] = set()  # forgotten here, not yet deleted from the storage
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_rehash = 0.0
        self._directory_missing = False
        self._unwatch: Callable[[], None] | None = None

    # -- reading ---------------------------------------------------------------------------

    def get(self, schedule_id: str) -> StoredSchedule | None:
        with self._lock:
            known = self._known.get(schedule_id)
        if known is not None:
            return known
        # Perhaps stored a moment ago through another process, whose notification is not here
        # yet: any process answers any request, so the storage is asked before "no such".
        stored = self._storage.schedule(schedule_id)
        if stored is not None:
            with self._lock:
                if schedule_id in self._removing:
                    return None  # on its way out: not brought back from the storage
                stored = self._known.setdefault(schedule_id, stored)
        return stored

    def all(self) -> list[StoredSchedule]:
        with self._lock:
            return sorted(self._known.values(), key=lambda s: s.schedule_id)

    # -- watching --------------------------------------------------------------------------

    def start(self) -> None:
        self._unwatch = self._storage.watch_schedules(self._refresh)
        self._refresh(None)  # what changed before the watch began
        if self.directory is None:
            return
        self.scan(rehash=True)
        self._thread = threading.Thread(target=self._run, name="schedules-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._unwatch is not None:
            self._unwatch()

    def _refresh(self, schedule_id: str | None) -> None:
        """Another process changed ``schedule_id`` (None: perhaps any): read it again."""
        if schedule_id is None:
            every = {s.schedule_id: s for s in self._storage.schedules()}
            with self._lock:
                self._known = every
            return
        schedule = self._storage.schedule(schedule_id)
        with self._lock:
            if schedule is None:
                self._known.pop(schedule_id, None)
            else:
                self._known[schedule_id] = schedule

    def _run(self) -> None:
        while not self._stop.wait(self._poll_interval):
            now = time.monotonic()
            rehash = now - self._last_rehash >= self._rehash_interval
            try:
                self.scan(rehash=rehash)
            except Exception:
                log.exception("scanning %s failed; trying again", self.directory)

    def scan(self, *, rehash: bool = False) -> None:
        """One pass over the directory: pick up new, changed and deleted schedule files."""
        with self._change_lock:
            self._scan(rehash=rehash)

    # -- writing (the API) -----------------------------------------------------------------

    def put(self, schedule_id: str, data: bytes) -> bool:
        """Validate and store a schedule as ``<id>.xml``; True when it is new.

        Raises ``cds.errors.CdsError`` for a document that is not a valid CDS (nothing
        changes), ``ScheduleConflictError`` when the id is a playlist's, OSError when the file
        cannot be written."""
        parse(data)
        with self._change_lock:
            self._not_a_playlist(schedule_id)
            created = self.get(schedule_id) is None
            if self.directory is None:
                self._take(schedule_id, data, f"PUT /x/schedules/{schedule_id}")
                return created
            path = self.directory / f"{schedule_id}.xml"
            temporary = self.directory / f".{schedule_id}.xml.tmp"
            with open(temporary, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
            stat = path.stat()
            self._stats[schedule_id] = (stat.st_mtime_ns, stat.st_size)
            self._consider(schedule_id, path)
        return created

    def delete(self, schedule_id: str) -> bool:
        """Remove the schedule and its file; False when there was no such schedule.
        ``ScheduleConflictError`` when it is a playlist's (removed with its playlist only)."""
        with self._change_lock:
            self._not_a_playlist(schedule_id)
            known = self.get(schedule_id) is not None
            if self.directory is not None:
                with contextlib.suppress(FileNotFoundError):
                    (self.directory / f"{schedule_id}.xml").unlink()
            self._stats.pop(schedule_id, None)
            self._file_digests.pop(schedule_id, None)
            self._remove(schedule_id)
        return known

    def _not_a_playlist(self, schedule_id: str) -> None:
        known = self.get(schedule_id)
        if known is not None and known.source == PLAYLIST_SOURCE:
            raise ScheduleConflictError(schedule_id, True)

    # -- schedules made elsewhere (playlists: server.scheduler.playlists) --------------------

    @property
    def change_lock(self) -> threading.RLock:
        """Held while a schedule changes (the watcher's scans, the API's writes)."""
        return self._change_lock

    def stored(self, schedule: StoredSchedule) -> None:
        """``schedule`` was stored (and published) by its maker: serve it, pass it on."""
        with self._lock:
            self._known[schedule.schedule_id] = schedule
        self._changed(schedule.schedule_id)

    def forgotten(self, schedule_id: str) -> None:
        """The schedule was deleted (and its removal published) by its maker."""
        with self._lock:
            self._known.pop(schedule_id, None)
        self._changed(schedule_id)

    def publish_stored(self, connection: Any, schedule: StoredSchedule) -> None:
        """The storage's ``publish`` for a stored schedule (its subscribers get it)."""
        self._publish_safely(schedule.schedule_id, schedule.xml, connection)

    def publish_removal(self, connection: Any, schedule: StoredSchedule) -> None:
        """The storage's ``publish`` for a removed schedule (an empty set of its name)."""
        body = removal_document(schedule.root_name or schedule.schedule_id)
        self._publish_safely(schedule.schedule_id, body, connection)

    def _scan(self, *, rehash: bool) -> None:
        if self.directory is None:
            return
        if rehash:
            self._last_rehash = time.monotonic()
        try:
            entries = list(os.scandir(self.directory))
        except OSError as error:
            # A directory that vanished (an unmounted share) is not a reason to delete every
            # schedule; keep serving the last good versions until it is back.
            if not self._directory_missing:
                log.error("cannot read the schedules directory %s: %s", self.directory, error)
                self._directory_missing = True
            return
        if self._directory_missing:
            log.info("the schedules directory %s is readable again", self.directory)
            self._directory_missing = False
        present: set[str] = set()
        for entry in entries:
            if not entry.name.endswith(".xml") or entry.name.startswith("."):
                continue
            schedule_id = entry.name[: -len(".xml")]
            if not is_schedule_id(schedule_id):
                if schedule_id not in self._stats:
                    log.warning(
                        "ignoring %s: a schedule id is letters, digits, '.', '_', '-'", entry.path
                    )
                    self._stats[schedule_id] = (0, 0)
                continue
            try:
                if not entry.is_file():
                    continue
                stat = entry.stat()
            except OSError:
                continue
            present.add(schedule_id)
            signature = (stat.st_mtime_ns, stat.st_size)
            if not rehash and self._stats.get(schedule_id) == signature:
                continue
            self._stats[schedule_id] = signature
            self._consider(schedule_id, Path(entry.path))
        with self._lock:
            gone = [
                s.schedule_id
                for s in self._known.values()
                if s.schedule_id not in present and s.source in (self._source, "*")
            ]
        for schedule_id in gone:
            self._remove(schedule_id)
        for schedule_id in [s for s in self._stats if s not in present]:
            del self._stats[schedule_id]
            self._file_digests.pop(schedule_id, None)

    def _consider(self, schedule_id: str, path: Path) -> None:
        try:
            data = path.read_bytes()
        except OSError as error:
            log.error("%s: cannot read: %s", path, error)
            return
        digest = hashlib.sha256(data).hexdigest()
        if self._file_digests.get(schedule_id) == digest:
            return
        self._file_digests[schedule_id] = digest
        if not self._take(schedule_id, data, str(path), digest):
            # Storage failed: look again at the next full pass.
            self._file_digests.pop(schedule_id, None)

    def _take(self, schedule_id: str, data: bytes, path: str, digest: str = "") -> bool:
        """Validate and store one schedule document; False when storing failed."""
        digest = digest or hashlib.sha256(data).hexdigest()
        known = self.get(schedule_id)
        if known is not None and known.source == PLAYLIST_SOURCE:
            log.error("%s: '%s' is a playlist's schedule; the file is not taken", path, schedule_id)
            return True
        if known is not None and known.digest == digest and known.source == self._source:
            return True
        try:
            document = parse(data)
        except CdsError as error:
            for problem in error.problems:
                where = f"{path}:{problem.line}" if problem.line else str(path)
                log.error("%s: %s", where, problem.message)
            if known is not None:
                log.error(
                    "schedule %r: keeping the last good version (from %s)",
                    schedule_id,
                    time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(known.updated)),
                )
            else:
                log.error("schedule %r is not served until the file is fixed", schedule_id)
            return True  # logged once: looked at again when the file changes
        for warning in document.warnings:
            log.warning("%s:%s: %s", path, warning.line or "", warning.message)
        root_name = document.root.name
        served = data
        if not root_name:
            # Displays replace a CDS by its root name; without one, an update would pile up
            # beside the old version instead of replacing it.
            root_name = schedule_id
            served = _with_root_name(data, root_name)
        schedule = StoredSchedule(
            schedule_id, served, digest, root_name, time.time(), source=self._source
        )
        # Published in the storing transaction (PostgreSQL), or just before it (SQLite: if the
        # process dies in between, the next start sees the file differ from storage and
        # publishes again: a duplicate, never a lost update); by this process only when it is
        # the one that changed the stored schedule.
        try:
            changed = self._storage.save_schedule(schedule, self.publish_stored)
        except ScheduleConflictError:
            log.error("%s: '%s' is a playlist's schedule; the file is not taken", path, schedule_id)
            return True
        except Exception:
            log.exception("could not store schedule %r", schedule_id)
            return False
        with self._lock:
            self._known[schedule_id] = schedule
        if changed:
            self._changed(schedule_id)
            log.info(
                "schedule %r %s (%d bytes)",
                schedule_id,
                "updated" if known is not None else "added",
                len(served),
            )
        return True

    def _remove(self, schedule_id: str) -> None:
        # Forgotten first: the removal is published with the delete, and a subscriber told of
        # it must not still read the schedule here (a fresh-root run did, between the two).
        with self._lock:
            known = self._known.pop(schedule_id, None)
            if known is None:
                return
            self._removing.add(schedule_id)
        try:
            removed = self._storage.delete_schedule(schedule_id, self.publish_removal)
        except Exception:
            log.exception("could not remove schedule %r", schedule_id)
            with self._lock:
                self._known.setdefault(schedule_id, known)
            return
        finally:
            with self._lock:
                self._removing.discard(schedule_id)
        if removed:
            self._changed(schedule_id)
            log.info("schedule %r removed", schedule_id)

    def _changed(self, schedule_id: str) -> None:
        try:
            self.on_change(schedule_id)
        except Exception:
            log.exception("could not pass on the change of schedule %r", schedule_id)

    def _publish_safely(self, schedule_id: str, data: bytes, connection: Any) -> None:
        if connection is not None:
            # Inside the storing transaction: a failure undoes the change (nothing half-done).
            self._publish(schedule_id, data, connection)
            return
        try:
            self._publish(schedule_id, data, None)
        except Exception:
            log.exception(
                "could not queue the update of schedule %r for its subscribers", schedule_id
            )


#: The document with ``name`` set on its root content-set (the fleet names pushed sets so).
with_root_name = _with_root_name
