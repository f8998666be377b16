"""Synchronised sets (``<playback sync="wall-clock"/>``): where the grid is at an instant.

The rules are docs/cds.md, "Screens that change together".

A synchronised set's items play on a grid fixed to wall-clock time. Its cycle is the sum of
its items' durations (``preferred-duration``, else a video's own length, else 15 seconds); the
cycle repeats from an epoch, the start of the set's time window that day (the window that is
open now, of the set or else of the nearest set above it), or midnight in the display's time
zone when it has none. The epoch comes back every day, so the day's last cycle is cut short
there. ``order="random"`` shuffles each cycle with a seed made of the set's name, the epoch's
date and the cycle's number; ``reverseorder`` plays the items backwards.

Everything here is a pure function of the document, the time zone and the instant, in whole
microseconds (no float rounding that two machines could do differently), so every display
that computes it for the same set at the same instant gets the same slot: the same item, the
same offset into it, with no message between the displays. Their clocks are kept by NTP or PTP.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from cds.model import ContentItem, PlaybackOrder, TimeWindow

__all__ = [
    "DEFAULT_SECONDS",
    "Slot",
    "cycle_order",
    "epoch_at",
    "looks_like_video",
    "slot_at",
]

#: An item's duration with neither ``preferred-duration`` nor a video's own length.
DEFAULT_SECONDS = 15.0
_US = 1_000_000
_UTC = datetime.UTC
_VIDEO_SUFFIXES = frozenset({"mp4", "m4v", "mov", "mkv", "webm"})


@dataclass(frozen=True)
class Slot:
    """One item's turn on the grid."""

    #: the item's index among the set's items (document order, nested sets flattened)
    position: int
    #: cycles completed since the epoch
    cycle: int
    #: when the turn begins and ends (UTC); the end is cut at the next epoch
    start: datetime.datetime
    end: datetime.datetime
    #: the epoch this grid counts from (UTC)
    epoch: datetime.datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    def offset(self, now: datetime.datetime) -> float:
        """Seconds into the turn at ``now`` (a display joining mid-item starts there)."""
        return (now - self.start).total_seconds()


def looks_like_video(item: ContentItem) -> bool:
    """A video by its type, or by its file name when the type says nothing more."""
    media = (item.content_type or "").split(";")[0].strip().lower()
    if media.startswith("video/"):
        return True
    if media not in ("", "application/octet-stream", "binary/octet-stream"):
        return False
    path = unquote(urlsplit(item.url).path)
    return PurePosixPath(path).suffix.lower().lstrip(".") in _VIDEO_SUFFIXES


def _local(day: datetime.date, moment: datetime.time, tz: datetime.tzinfo) -> datetime.datetime:
    """A wall-clock time of the display's zone as an instant (UTC)."""
    return (
        datetime.datetime.combine(day, moment.replace(tzinfo=None))
        .replace(tzinfo=tz)
        .astimezone(_UTC)
    )


def epoch_at(
    now: datetime.datetime, tz: datetime.tzinfo, windows: Sequence[TimeWindow]
) -> tuple[datetime.datetime, datetime.datetime]:
    """The epoch the grid counts from at ``now``, and the next one (both UTC).

    With time windows, the start of the one open now (the earliest start, when several
    overlap), on the day it opened (a window across midnight opened the day before); without
    one open, or with none, the display's local midnight. The next epoch is a day later.
    """
    local = now.astimezone(tz)
    day, moment = local.date(), local.time().replace(tzinfo=None)
    starts: list[tuple[datetime.date, datetime.time]] = []
    for window in windows:
        if not window.contains(moment):
            continue
        opened = day if window.start <= moment else day - datetime.timedelta(days=1)
        starts.append((opened, window.start))
    if not starts:
        return _local(day, datetime.time(0), tz), _local(
            day + datetime.timedelta(days=1), datetime.time(0), tz
        )
    opened, start = min(starts, key=lambda found: _local(found[0], found[1], tz))
    return _local(opened, start, tz), _local(opened + datetime.timedelta(days=1), start, tz)


def _below(seed: str, index: int, bound: int) -> int:
    """A number in ``0 .. bound - 1`` drawn from ``seed``: the same on every machine and
    every Python (not :mod:`random`, whose algorithms may change between versions)."""
    digest = hashlib.sha256(f"{seed}#{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % bound


def _shuffled(count: int, seed: str) -> list[int]:
    order = list(range(count))
    for index in range(count - 1, 0, -1):  # Fisher-Yates
        other = _below(seed, index, index + 1)
        order[index], order[other] = order[other], order[index]
    return order


def cycle_order(
    count: int, order: PlaybackOrder, label: str, epoch_day: datetime.date, cycle: int
) -> list[int]:
    """The items' positions in the order of cycle ``cycle`` of the day ``epoch_day``.

    ``random``: a shuffle seeded by the set's ``label`` (its name), the day and the cycle
    number, identical everywhere; a cycle never starts with the item the cycle before it
    ended with (with one or two items that leaves document order).
    """
    if order == "reverseorder":
        return list(range(count - 1, -1, -1))
    if order != "random" or count <= 2:
        return list(range(count))
    this = _shuffled(count, f"{label}|{epoch_day.isoformat()}|{cycle}")
    if cycle > 0:
        before = _shuffled(count, f"{label}|{epoch_day.isoformat()}|{cycle - 1}")
        # Swapping the first two leaves the last in place (three items or more), so the
        # cycle before keeps the last item this comparison saw: no chain back to the epoch.
        if this[0] == before[-1]:
            this[0], this[1] = this[1], this[0]
    return this


def slot_at(
    now: datetime.datetime,
    durations: Sequence[float],
    order: PlaybackOrder,
    label: str,
    epoch: datetime.datetime,
    next_epoch: datetime.datetime,
    tz: datetime.tzinfo,
) -> Slot | None:
    """The turn on the grid at ``now`` (None: no items, or ``now`` is before the epoch)."""
    lengths = [max(1, round(seconds * _US)) for seconds in durations]
    if not lengths:
        return None
    epoch_us = _micros(epoch)
    now_us = _micros(now)
    if now_us < epoch_us:
        return None
    total = sum(lengths)
    elapsed = now_us - epoch_us
    cycle, into = divmod(elapsed, total)
    positions = cycle_order(len(lengths), order, label, epoch.astimezone(tz).date(), cycle)
    begin = epoch_us + cycle * total
    for position in positions:
        if into < lengths[position]:
            end = min(begin + lengths[position], _micros(next_epoch))
            return Slot(position, cycle, _instant(begin), _instant(end), epoch)
        into -= lengths[position]
        begin += lengths[position]
    raise AssertionError("the cycle's turns add up to the cycle")  # pragma: no cover


def _micros(moment: datetime.datetime) -> int:
    delta = moment.astimezone(_UTC) - datetime.datetime(1970, 1, 1, tzinfo=_UTC)
    return (delta.days * 86_400 + delta.seconds) * _US + delta.microseconds


def _instant(micros: int) -> datetime.datetime:
    return datetime.datetime(1970, 1, 1, tzinfo=_UTC) + datetime.timedelta(microseconds=micros)
