"""Where the media library's items live: :class:`MediaStore`, over the scheduler's own
database (``server.platform.sql``), so SQLite and PostgreSQL run the same statements.

An item's row (table ``media``) and its bytes (table ``media_chunks``, ``CHUNK`` bytes a row)
are written in one transaction: after a power cut an item is there whole or not at all. The
key is the SHA-256 of the bytes, so the same file stored twice is one item; of two processes
storing the same file at once, the second finds the row (``ON CONFLICT DO NOTHING``) and
writes no chunks. Reading takes only the chunks a byte range needs.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from server.platform.sql import Database, Transaction

__all__ = ["CHUNK", "ChunkFile", "MediaItem", "MediaStore"]

#: Bytes in one row of media_chunks.
CHUNK = 1 << 20

_COLUMNS = (
    "sha256, name, tags, kind, mime, size, width, height, duration, codec, profile,"
    " uploader, uploaded, fps, link, root, warnings"
)


@dataclass(frozen=True)
class MediaItem:
    """One item of the library (docs/media.md, "Data model")."""

    sha256: str
    name: str
    kind: str  # "image", "video", "page" or "link"
    mime: str
    size: int
    tags: list[str] = field(default_factory=list)
    width: int | None = None
    height: int | None = None
    duration: float | None = None
    codec: str | None = None
    profile: str | None = None
    uploader: str = ""
    uploaded: float = 0.0
    fps: float | None = None
    #: A web link's URL (its ``sha256`` is that of this text; no bytes are stored).
    link: str | None = None
    #: A page bundle's folder holding ``index.html`` inside the zip ("" for its root).
    root: str | None = None
    #: What will play where (``server.scheduler.media.playable``).
    warnings: list[str] = field(default_factory=list)


def _item(row: tuple[Any, ...]) -> MediaItem:
    return MediaItem(
        sha256=row[0],
        name=row[1],
        tags=json.loads(row[2]),
        kind=row[3],
        mime=row[4],
        size=int(row[5]),
        width=row[6],
        height=row[7],
        duration=row[8],
        codec=row[9],
        profile=row[10],
        uploader=row[11],
        uploaded=row[12],
        fps=row[13],
        link=row[14],
        root=row[15],
        warnings=json.loads(row[16]),
    )


class OverQuotaError(Exception):
    """Storing the item would take the library past its quota."""


class MediaStore:
    """The media library's items and bytes in ``database`` (its tables are the scheduler's
    migrations: ``server.scheduler.schema``). Safe to call from any thread."""

    def __init__(self, database: Database, *, quota: int) -> None:
        self._db = database
        self.quota = quota

    def add(
        self, item: MediaItem, body: IO[bytes] | None, thumbnail: bytes | None
    ) -> tuple[MediaItem, bool]:
        """Store ``item`` with the bytes read from ``body`` (at its start; none for a web link),
        in one transaction. Returns (the stored item, True) when it is new, (the item stored
        before, False) when these bytes were there already. :class:`OverQuotaError` and nothing
        stored when the library would pass its quota."""
        with self._db.transaction() as transaction:
            self._db.lock(transaction, "media-quota")  # one quota check at a time
            existing = transaction.row(
                f"SELECT {_COLUMNS} FROM media WHERE sha256 = ?", (item.sha256,)
            )
            if existing is not None:
                return _item(existing), False
            used = transaction.row("SELECT COALESCE(SUM(size), 0) FROM media")
            if int(used[0] if used else 0) + item.size > self.quota:
                raise OverQuotaError()
            inserted = transaction.execute(
                f"INSERT INTO media ({_COLUMNS}, thumbnail)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (sha256) DO NOTHING",
                (
                    item.sha256,
                    item.name,
                    json.dumps(item.tags),
                    item.kind,
                    item.mime,
                    item.size,
                    item.width,
                    item.height,
                    item.duration,
                    item.codec,
                    item.profile,
                    item.uploader,
                    item.uploaded or time.time(),
                    item.fps,
                    item.link,
                    item.root,
                    json.dumps(item.warnings),
                    thumbnail,
                ),
            )
            if inserted == 0:  # another process stored it first
                row = transaction.row(
                    f"SELECT {_COLUMNS} FROM media WHERE sha256 = ?", (item.sha256,)
                )
                assert row is not None
                return _item(row), False
            seq = 0
            if body is not None:
                body.seek(0)
            while body is not None and (chunk := body.read(CHUNK)):
                transaction.execute(
                    "INSERT INTO media_chunks (sha256, seq, data) VALUES (?, ?, ?)",
                    (item.sha256, seq, chunk),
                )
                seq += 1
            row = transaction.row(f"SELECT {_COLUMNS} FROM media WHERE sha256 = ?", (item.sha256,))
            assert row is not None
            return _item(row), True

    def get(self, sha256: str) -> MediaItem | None:
        row = self._db.row(f"SELECT {_COLUMNS} FROM media WHERE sha256 = ?", (sha256,))
        return _item(row) if row is not None else None

    def get_in(self, transaction: Transaction, sha256: str) -> MediaItem | None:
        """:meth:`get` inside the caller's ``transaction``."""
        row = transaction.row(f"SELECT {_COLUMNS} FROM media WHERE sha256 = ?", (sha256,))
        return _item(row) if row is not None else None

    def items(self) -> list[MediaItem]:
        """Every item, newest first."""
        rows = self._db.rows(f"SELECT {_COLUMNS} FROM media ORDER BY uploaded DESC, sha256")
        return [_item(row) for row in rows]

    def used(self) -> int:
        """The bytes the library holds."""
        row = self._db.row("SELECT COALESCE(SUM(size), 0) FROM media")
        return int(row[0]) if row else 0

    def thumbnail(self, sha256: str) -> bytes | None:
        row = self._db.row("SELECT thumbnail FROM media WHERE sha256 = ?", (sha256,))
        return bytes(row[0]) if row is not None and row[0] is not None else None

    def delete(self, sha256: str) -> bool:
        """Remove an item and its bytes; False when there was none."""
        with self._db.transaction() as transaction:
            return self.delete_in(transaction, sha256)

    def delete_in(self, transaction: Transaction, sha256: str) -> bool:
        """:meth:`delete` inside the caller's ``transaction``."""
        gone = transaction.execute("DELETE FROM media WHERE sha256 = ?", (sha256,))
        transaction.execute("DELETE FROM media_chunks WHERE sha256 = ?", (sha256,))
        return gone > 0

    def chunk(self, sha256: str, seq: int) -> bytes | None:
        """One chunk row's bytes, or None."""
        row = self._db.row(
            "SELECT data FROM media_chunks WHERE sha256 = ? AND seq = ?", (sha256, seq)
        )
        return bytes(row[0]) if row is not None else None

    def read(self, sha256: str, start: int, stop: int) -> Iterator[bytes]:
        """The item's bytes from ``start`` up to (not including) ``stop``, chunk by chunk, each
        chunk read on its own (a long download holds no transaction open)."""
        seq = start // CHUNK
        while start < stop:
            row = self._db.row(
                "SELECT data FROM media_chunks WHERE sha256 = ? AND seq = ?", (sha256, seq)
            )
            if row is None:
                return
            data = bytes(row[0])
            offset = start - seq * CHUNK
            piece = data[offset : offset + (stop - start)]
            if not piece:
                return
            yield piece
            start += len(piece)
            seq += 1

    def open(self, item: MediaItem) -> ChunkFile:
        """The item's bytes as a read-only, seekable file that reads the chunk rows it needs
        (a page bundle's zip is read member by member, never whole)."""
        return ChunkFile(self, item.sha256, item.size)


class ChunkFile(io.RawIOBase):
    """A stored item's bytes as a seekable binary file over its chunk rows."""

    def __init__(self, store: MediaStore, sha256: str, size: int) -> None:
        super().__init__()
        self._store, self._sha256, self._size, self._pos = store, sha256, size, 0
        self._held: tuple[int, bytes] = (-1, b"")  # the chunk read last: (seq, data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        want = min(self._size - self._pos, len(buffer))
        if want <= 0:
            return 0
        seq, offset = divmod(self._pos, CHUNK)
        if self._held[0] != seq:
            data = self._store.chunk(self._sha256, seq)
            if data is None:
                return 0
            self._held = (seq, data)
        piece = self._held[1][offset : offset + want]
        buffer[: len(piece)] = piece
        self._pos += len(piece)
        return len(piece)
