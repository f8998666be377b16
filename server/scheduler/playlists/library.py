"""Where playlists are kept, and how a change of one reaches the screens: :class:`Playlists`.

A playlist is stored as the JSON the operator gave (checked, table ``playlists``), the media
items it uses (``playlist_media``: "where is this item used" is an index look-up), and its CDS
as a schedule of the same id (``server.scheduler.storage``, source ``PLAYLIST_SOURCE``), all in
one transaction of the scheduler's database, SQLite or PostgreSQL alike: a refused playlist (an
unknown media item, a hand-written schedule of that id) changes nothing, and neither does a
crash half-way. Changes are serialised by the ``playlists`` lock (on PostgreSQL an advisory
lock: several scheduler processes take turns), so an item cannot be deleted while a playlist
naming it is saved.

Once stored, the schedule library is told (``ScheduleLibrary.stored``), which hands it to the
fleet: the displays it is assigned to are pushed the new CDS at once, as for any schedule.
Deleting a media item with ``force`` takes it out of every playlist using it, their new CDS
stored in the same transaction as the deletion, then pushed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from server.platform.sql import Transaction
from server.scheduler.media.store import MediaItem, MediaStore
from server.scheduler.playlists.document import cds_document
from server.scheduler.playlists.model import Playlist, read_playlist
from server.scheduler.schedules import ScheduleLibrary
from server.scheduler.storage import PLAYLIST_SOURCE, SchedulerStorage, StoredSchedule

__all__ = ["Playlists", "StoredPlaylist", "UnknownMediaError"]

log = logging.getLogger("pdn.scheduler.playlists")

_LOCK = "playlists"


@dataclass(frozen=True)
class StoredPlaylist:
    playlist_id: str
    playlist: Playlist
    updated: float


class UnknownMediaError(Exception):
    """An entry names a media item the library does not hold."""

    def __init__(self, index: int, sha256: str) -> None:
        super().__init__(f"items[{index}].media: no media item {sha256}")
        self.index = index
        self.sha256 = sha256


class Playlists:
    """The playlists of one scheduler. ``base_url()``: how displays reach it (the media URLs
    in each CDS are absolute). Safe to call from any thread."""

    def __init__(
        self,
        storage: SchedulerStorage,
        media: MediaStore,
        schedules: ScheduleLibrary,
        base_url: Callable[[], str],
    ) -> None:
        self._storage = storage
        self._db = storage.database
        self._media = media
        self._schedules = schedules
        self._base_url = base_url

    # -- reading ---------------------------------------------------------------------------

    def get(self, playlist_id: str) -> StoredPlaylist | None:
        row = self._db.row("SELECT id, body, updated FROM playlists WHERE id = ?", (playlist_id,))
        return None if row is None else _stored(row)

    def all(self) -> list[StoredPlaylist]:
        rows = self._db.rows("SELECT id, body, updated FROM playlists ORDER BY id")
        return [_stored(row) for row in rows]

    def used_by(self, sha256: str) -> list[str]:
        """The ids of the playlists that use the media item ``sha256``."""
        rows = self._db.rows(
            "SELECT playlist_id FROM playlist_media WHERE sha256 = ? ORDER BY playlist_id",
            (sha256,),
        )
        return [row[0] for row in rows]

    def media_of(self, playlist: Playlist) -> dict[str, MediaItem]:
        """The library items ``playlist`` names that are still there, by SHA-256."""
        found = {sha256: self._media.get(sha256) for sha256 in playlist.media}
        return {sha256: item for sha256, item in found.items() if item is not None}

    # -- changing --------------------------------------------------------------------------

    def put(self, playlist_id: str, playlist: Playlist) -> bool:
        """Store ``playlist`` and its CDS; True when it is new. :class:`UnknownMediaError`
        or ``ScheduleConflictError`` (a hand-written schedule has this id): nothing changes."""
        with self._schedules.change_lock:
            with self._db.transaction() as transaction:
                self._db.lock(transaction, _LOCK)
                created = (
                    transaction.row("SELECT 1 FROM playlists WHERE id = ?", (playlist_id,)) is None
                )
                schedule = self._write(transaction, playlist_id, playlist)
            self._schedules.stored(schedule)
        log.info("playlist %r %s", playlist_id, "added" if created else "replaced")
        return created

    def delete(self, playlist_id: str) -> bool:
        """Remove the playlist and its schedule (displays drop it); False when there was none."""
        with self._schedules.change_lock:
            with self._db.transaction() as transaction:
                self._db.lock(transaction, _LOCK)
                if transaction.execute("DELETE FROM playlists WHERE id = ?", (playlist_id,)) == 0:
                    return False
                transaction.execute(
                    "DELETE FROM playlist_media WHERE playlist_id = ?", (playlist_id,)
                )
                self._storage.delete_schedule_in(
                    transaction, playlist_id, self._schedules.publish_removal
                )
            self._schedules.forgotten(playlist_id)
        log.info("playlist %r removed", playlist_id)
        return True

    def delete_media(self, sha256: str, *, force: bool) -> list[str]:
        """Delete the media item ``sha256``. When playlists use it: without ``force`` nothing
        changes and their ids are returned; with ``force`` it is taken out of them (their
        CDS stored anew) in the transaction that deletes it, and the displays follow.
        Returns [] when it was deleted."""
        with self._schedules.change_lock:
            written: list[StoredSchedule] = []
            with self._db.transaction() as transaction:
                self._db.lock(transaction, _LOCK)
                users = [
                    row[0]
                    for row in transaction.rows(
                        "SELECT playlist_id FROM playlist_media WHERE sha256 = ?"
                        " ORDER BY playlist_id",
                        (sha256,),
                    )
                ]
                if users and not force:
                    return users
                for playlist_id in users:
                    row = transaction.row(
                        "SELECT id, body, updated FROM playlists WHERE id = ?", (playlist_id,)
                    )
                    if row is not None:
                        playlist = _stored(row).playlist.without(sha256)
                        written.append(self._write(transaction, playlist_id, playlist))
                self._media.delete_in(transaction, sha256)
            for schedule in written:
                self._schedules.stored(schedule)
        if written:
            log.info(
                "media item %s deleted and taken out of playlists %s",
                sha256,
                ", ".join(s.schedule_id for s in written),
            )
        return []

    def refresh(self) -> int:
        """Write every playlist's CDS again (the scheduler's address may have changed since
        it was stored); returns how many changed, each pushed where it is assigned."""
        changed = 0
        for stored in self.all():
            with self._schedules.change_lock:
                before = self._storage.schedule(stored.playlist_id)
                try:
                    with self._db.transaction() as transaction:
                        self._db.lock(transaction, _LOCK)
                        xml, _items = self._document(
                            transaction, stored.playlist_id, stored.playlist
                        )
                        if before is not None and before.xml == xml:
                            continue
                        schedule = self._write(transaction, stored.playlist_id, stored.playlist)
                except Exception:
                    log.exception("could not write playlist %r again", stored.playlist_id)
                    continue
                changed += 1
                self._schedules.stored(schedule)
        return changed

    def _document(
        self, transaction: Transaction, playlist_id: str, playlist: Playlist
    ) -> tuple[bytes, dict[str, MediaItem]]:
        """The CDS of ``playlist`` and the items it uses (:class:`UnknownMediaError`)."""
        items: dict[str, MediaItem] = {}
        for index, entry in enumerate(playlist.entries):
            if entry.media is None or entry.media in items:
                continue
            item = self._media.get_in(transaction, entry.media)
            if item is None:
                raise UnknownMediaError(index, entry.media)
            items[entry.media] = item
        return cds_document(playlist_id, playlist, items, self._base_url()), items

    def _write(
        self, transaction: Transaction, playlist_id: str, playlist: Playlist
    ) -> StoredSchedule:
        """Store ``playlist``, what it uses and its CDS, in ``transaction``."""
        xml, items = self._document(transaction, playlist_id, playlist)
        now = time.time()
        schedule = StoredSchedule(
            playlist_id,
            xml,
            hashlib.sha256(xml).hexdigest(),
            playlist_id,
            now,
            source=PLAYLIST_SOURCE,
        )
        # A hand-written schedule of this id: ScheduleConflictError, and the transaction is undone.
        self._storage.save_schedule_in(transaction, schedule, self._schedules.publish_stored)
        transaction.execute(
            "INSERT INTO playlists (id, body, updated) VALUES (?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated = excluded.updated",
            (playlist_id, json.dumps(playlist.to_json(), sort_keys=True), now),
        )
        transaction.execute("DELETE FROM playlist_media WHERE playlist_id = ?", (playlist_id,))
        transaction.executemany(
            "INSERT INTO playlist_media (playlist_id, sha256) VALUES (?, ?)",
            [(playlist_id, sha256) for sha256 in items],
        )
        return schedule


def _stored(row: tuple[Any, ...]) -> StoredPlaylist:
    return StoredPlaylist(str(row[0]), read_playlist(json.loads(row[1])), float(row[2]))
