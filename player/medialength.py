"""A video file's own length, read from its container's header: no decoder, no Qt.

A synchronised set's grid (``cds.syncgrid``) needs the length of every video that has no
``preferred-duration`` before the video has ever played, and every display must read the same
number from the same (hash-verified) file. The header says it:

- MP4, MOV, M4V (ISO base media): ``moov/mvhd``'s duration over its timescale;
- Matroska, WebM: ``Segment/Info/Duration`` (in ``TimecodeScale`` units, default 1 ms).

Anything else, or a header without a length (a WebM recorded live may have none), gives None:
the set then waits, and a ``preferred-duration`` on the item is the way out (docs/cds.md).
"""

from __future__ import annotations

import io
import logging
import os
import struct
import threading
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urlsplit

log = logging.getLogger("pdn.cache")

_MATROSKA_MAGIC = b"\x1a\x45\xdf\xa3"
_SEGMENT, _INFO, _SCALE, _DURATION = 0x18538067, 0x1549A966, 0x2AD7B1, 0x4489
_CLUSTER = 0x1F43B675  # media data: the Info element comes before it
_MAX_BOXES = 4096  # a hostile file cannot keep us walking


def media_length(path: Path) -> float | None:
    """Seconds the video at ``path`` lasts, as its container says (None: unknown)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(12)
            handle.seek(0)
            if head[:4] == _MATROSKA_MAGIC:
                return _matroska(handle)
            if head[4:8] in (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip"):
                return _iso(handle, os.fstat(handle.fileno()).st_size)
    except (OSError, struct.error, ValueError) as error:
        log.debug("cannot read the length of %s: %s", path, error)
    return None


def _iso(handle: BinaryIO, size: int) -> float | None:
    end, found = size, None
    for _ in range(_MAX_BOXES):
        box = _iso_box(handle, end)
        if box is None:
            return found
        kind, _, box_end = box
        if kind == b"moov":
            end = box_end  # walk into it
            continue
        if kind == b"mvhd":
            version = handle.read(4)[0]
            if version == 1:
                _, _, timescale, duration = struct.unpack(">QQIQ", handle.read(28))
            else:
                _, _, timescale, duration = struct.unpack(">IIII", handle.read(16))
            if timescale and duration and duration not in (0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF):
                found = duration / timescale
            return found
        handle.seek(box_end)
    return found


def _iso_box(handle: BinaryIO, end: int) -> tuple[bytes, int, int] | None:
    start = handle.tell()
    if start + 8 > end:
        return None
    size, kind = struct.unpack(">I4s", handle.read(8))
    if size == 1:
        (size,) = struct.unpack(">Q", handle.read(8))
    elif size == 0:
        size = end - start
    if size < 8 or start + size > end:
        return None
    return kind, handle.tell(), start + size


def _vint(handle: BinaryIO, keep_marker: bool) -> tuple[int, int]:
    """An EBML variable-size integer: (value, bytes); an all-ones size is "unknown" (-1)."""
    first = handle.read(1)
    if not first:
        raise ValueError("end of file")
    byte = first[0]
    length = 1
    while length <= 8 and not byte & (0x80 >> (length - 1)):
        length += 1
    if length > 8:
        raise ValueError("not an EBML number")
    value = byte if keep_marker else byte & (0xFF >> length)
    for extra in handle.read(length - 1):
        value = (value << 8) | extra
    if not keep_marker and value == (1 << (7 * length)) - 1:
        return -1, length
    return value, length


def _matroska(handle: BinaryIO) -> float | None:
    _vint(handle, keep_marker=True)  # the EBML header's id
    header_size, _ = _vint(handle, keep_marker=False)
    handle.seek(handle.tell() + header_size)
    segment_id, _ = _vint(handle, keep_marker=True)
    if segment_id != _SEGMENT:
        return None
    _vint(handle, keep_marker=False)  # the segment's size: often unknown, not needed
    for _ in range(_MAX_BOXES):
        element, _ = _vint(handle, keep_marker=True)
        size, _ = _vint(handle, keep_marker=False)
        if element == _INFO and size > 0:
            return _matroska_info(handle.read(size))
        if element == _CLUSTER or size < 0:
            return None
        handle.seek(handle.tell() + size)
    return None


def _matroska_info(body: bytes) -> float | None:
    info = io.BytesIO(body)
    scale, duration = 1_000_000, None
    while info.tell() < len(body):
        element, _ = _vint(info, keep_marker=True)
        size, _ = _vint(info, keep_marker=False)
        value = info.read(size)
        if element == _SCALE and 0 < size <= 8:
            scale = int.from_bytes(value, "big")
        elif element == _DURATION and size in (4, 8):
            duration = struct.unpack(">f" if size == 4 else ">d", value)[0]
    if duration is None or not duration > 0:
        return None
    return float(duration) * scale / 1e9


class LengthCache:
    """:func:`media_length` of local ``file://`` URLs, kept per file (path, size, mtime): the
    grid asks for it at every engine tick."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[str, int, int], float | None] = {}

    def of_url(self, url: str) -> float | None:
        parts = urlsplit(url)
        if parts.scheme != "file":
            return None
        path = Path(unquote(parts.path))
        try:
            stat = path.stat()
        except OSError:
            return None
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        with self._lock:
            if key in self._known:
                return self._known[key]
        length = media_length(path)
        with self._lock:
            if len(self._known) > 512:
                self._known.clear()
            self._known[key] = length
        if length is not None:
            log.info("video %s lasts %.3f s", path.name, length)
        return length
