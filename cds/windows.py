"""Window arithmetic: whether the time, day-of-week and date windows of CDS constraints are
open at a moment, and the next instant at which any of them opens or closes (docs/cds.md,
"Windows").

Windows are read on the wall clock of the display's time zone, so DST days behave as a person
reading a wall clock expects: a window that starts at 02:30 on a spring-forward day (when 02:30
never happens) opens at the jump, and a 01:30 window on a fall-back day is open during both
01:30s. Nothing here knows about sets, items or priorities: :mod:`cds.playlist` asks.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TypeVar

from cds.model import DAY_NAMES, Constraints, DateWindow, DayWindow, TimeWindow

__all__ = [
    "constraints_hold",
    "has_windows",
    "next_window_change",
    "wall_clock",
    "why_closed",
]

_UTC = datetime.UTC
_Window = TypeVar("_Window", TimeWindow, DayWindow, DateWindow)


def wall_clock(now: datetime.datetime, tz: datetime.tzinfo) -> datetime.datetime:
    """``now`` on the wall clock of ``tz`` (a naive ``now`` is already on it)."""
    if now.tzinfo is None or now.utcoffset() is None:
        now = now.replace(tzinfo=tz)  # a naive time is read as the display's wall clock
    return now.astimezone(tz)


def _times_hold(windows: Sequence[TimeWindow], local: datetime.datetime) -> bool:
    moment = local.time()
    return not windows or any(window.contains(moment) for window in windows)


def _days_hold(windows: Sequence[DayWindow], local: datetime.datetime) -> bool:
    weekday = local.weekday()
    return not windows or any(window.contains(weekday) for window in windows)


def _dates_hold(windows: Sequence[DateWindow], local: datetime.datetime) -> bool:
    day = local.date()
    return not windows or any(window.contains(day) for window in windows)


def constraints_hold(constraints: Constraints, local: datetime.datetime) -> bool:
    """Whether the time, day-of-week and date windows of ``constraints`` are open at the
    wall-clock time ``local`` (already in the display's time zone)."""
    return (
        _times_hold(constraints.times, local)
        and _days_hold(constraints.days, local)
        and _dates_hold(constraints.dates, local)
    )


def _instant(
    day: datetime.date, moment: datetime.time, tz: datetime.tzinfo, fold: int
) -> datetime.datetime | None:
    """When the wall clock of ``tz`` shows ``moment`` on ``day`` (None past year 1 or 9999)."""
    try:
        local = datetime.datetime.combine(day, moment, tzinfo=tz).replace(fold=fold)
        return local.astimezone(_UTC)
    except (OverflowError, ValueError):
        return None


def _days_after(day: datetime.date, days: int) -> datetime.date | None:
    try:
        return day + datetime.timedelta(days=days)
    except OverflowError:
        return None


def _transitions(
    tz: datetime.tzinfo, start: datetime.datetime, end: datetime.datetime
) -> list[datetime.datetime]:
    """Instants in [start, end] where the zone's UTC offset changes (DST), to the second."""
    found: list[datetime.datetime] = []
    step = datetime.timedelta(hours=1)
    here = start
    offset = start.astimezone(tz).utcoffset()
    while here < end:
        there = min(here + step, end)
        there_offset = there.astimezone(tz).utcoffset()
        if there_offset != offset:
            low, high = here, there  # offset(low) == offset, offset(high) differs
            while high - low > datetime.timedelta(seconds=1):
                middle = low + (high - low) / 2
                middle = middle.replace(microsecond=0)
                if middle <= low:
                    break
                if middle.astimezone(tz).utcoffset() == offset:
                    low = middle
                else:
                    high = middle
            found.append(high)
            offset = there_offset
        here = there
    return found


def _first_change(
    candidates: Iterable[datetime.datetime | None],
    now: datetime.datetime,
    holds: Callable[[datetime.datetime], bool],
    tz: datetime.tzinfo,
) -> datetime.datetime | None:
    state = holds(now.astimezone(tz))
    for candidate in sorted({c for c in candidates if c is not None and c > now}):
        if holds(candidate.astimezone(tz)) != state:
            return candidate
    return None


def next_window_change(
    constraints: Iterable[Constraints], now: datetime.datetime, tz: datetime.tzinfo
) -> datetime.datetime | None:
    """The first instant after ``now`` at which any time, day-of-week or date window among
    ``constraints`` opens or closes (in ``tz``); None if none ever will."""
    try:
        return _next_window_change(constraints, now, tz)
    except OverflowError:  # "now" within hours of year 1 or 9999
        return None


def _next_window_change(
    constraints: Iterable[Constraints], now: datetime.datetime, tz: datetime.tzinfo
) -> datetime.datetime | None:
    now = wall_clock(now, tz).astimezone(_UTC)
    today = now.astimezone(tz).date()
    try:
        transitions = _transitions(
            tz, now - datetime.timedelta(hours=1), now + datetime.timedelta(days=9)
        )
    except OverflowError:  # within days of year 1 or 9999: no clock change worth knowing
        transitions = []
    best: datetime.datetime | None = None
    seen: set[tuple[str, tuple[object, ...]]] = set()
    days_around = {offset: _days_after(today, offset) for offset in range(-1, 9)}
    midnights = [
        _instant(day, datetime.time(0), tz, 0)
        for offset, day in days_around.items()
        if offset >= 1 and day is not None
    ]

    def time_edges(times: tuple[TimeWindow, ...]) -> list[datetime.datetime | None]:
        bounds = {moment for w in times for moment in (w.start, w.end)}
        return [
            _instant(day, moment, tz, fold)
            for offset, day in days_around.items()
            if offset < 3 and day is not None
            for moment in bounds
            for fold in (0, 1)
        ]

    def day_edges(_days: tuple[DayWindow, ...]) -> list[datetime.datetime | None]:
        return midnights

    def date_edges(dates: tuple[DateWindow, ...]) -> list[datetime.datetime | None]:
        return [
            _instant(day, datetime.time(0), tz, 0)
            for w in dates
            for day in (w.start, _days_after(w.end, 1))
            if day is not None
        ]

    def consider(
        kind: str,
        windows: tuple[_Window, ...],
        holds: Callable[[Sequence[_Window], datetime.datetime], bool],
        edges: Callable[[tuple[_Window, ...]], list[datetime.datetime | None]],
    ) -> None:
        """The first change of one kind of window (each distinct set of windows once)."""
        nonlocal best
        if not windows:
            return
        key = (kind, tuple((w.start, w.end) for w in windows))
        if key in seen:
            return
        seen.add(key)
        change = _first_change([*edges(windows), *transitions], now, partial(holds, windows), tz)
        if change is not None and (best is None or change < best):
            best = change

    for item in constraints:
        consider("time", tuple(item.times), _times_hold, time_edges)
        consider("day", tuple(item.days), _days_hold, day_edges)
        consider("date", tuple(item.dates), _dates_hold, date_edges)
    # UTC: a local time in a repeated (fall-back) hour never compares equal to other zones.
    return best


def has_windows(constraints: Constraints) -> bool:
    """Whether ``constraints`` has any time, day-of-week or date window at all."""
    return bool(constraints.times or constraints.days or constraints.dates)


def why_closed(
    constraints: Constraints, label: str, local: datetime.datetime, zone: str
) -> list[str]:
    """Each window of ``constraints`` closed at ``local``, as a sentence naming ``label``
    (the set or item it belongs to) and ``zone`` (the display's time zone)."""
    reasons: list[str] = []
    if not _times_hold(constraints.times, local):
        windows = " or ".join(str(w) for w in constraints.times)
        reasons.append(
            f"time window {windows} ({label}) is closed at {local.strftime('%H:%M')} {zone}"
        )
    if not _days_hold(constraints.days, local):
        windows = " or ".join(str(w) for w in constraints.days)
        today = DAY_NAMES[local.weekday()]
        reasons.append(f"day-of-week {windows} ({label}) does not include {today}")
    if not _dates_hold(constraints.dates, local):
        windows = " or ".join(str(w) for w in constraints.dates)
        reasons.append(f"date {windows} ({label}) does not include {local.date().isoformat()}")
    return reasons
