"""What the console draws: a display's next 24 hours (from ``cds`` evaluation) and plays per
item per day. Plain data out; the templates draw the SVG."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from cds.errors import CdsError
from cds.parser import parse
from cds.playlist import Playlist
from server.scheduler.fleet import Document
from server.scheduler.storage import PlayRecord

MAX_STEPS = 500


@dataclass(frozen=True)
class Bar:
    row: int
    start: float  # 0..1 of the chart's width
    end: float


@dataclass(frozen=True)
class Timeline:
    start: datetime.datetime
    hours: int
    rows: list[str]  # item URLs, each a row
    sets: list[str]  # the schedule (root set) of each row
    bars: list[Bar]
    problems: list[str]

    def hour_ticks(self) -> list[tuple[float, str]]:
        first = self.start.replace(minute=0, second=0, microsecond=0)
        ticks = []
        for hour in range(0, self.hours + 1):
            at = first + datetime.timedelta(hours=hour)
            offset = (at - self.start).total_seconds() / (self.hours * 3600)
            if 0 <= offset <= 1 and at.hour % 3 == 0:
                ticks.append((offset, at.strftime("%H:%M")))
        return ticks


def timeline(documents: Iterable[Document], now: datetime.datetime, hours: int = 24) -> Timeline:
    """What may play over the next ``hours`` (in UTC): per item, the spans in which it is among
    the items at the highest priority whose windows are open. Files are taken as available;
    remote sets are not fetched here."""
    problems: list[str] = []
    parsed = []
    for document in documents:
        try:
            parsed.append(parse(document.body))
        except CdsError as error:
            problems.append(f"{document.name}: {error.problems[0]}")
    playlist = Playlist(datetime.UTC)
    playlist.set_documents(parsed)
    end = now + datetime.timedelta(hours=hours)
    total = (end - now).total_seconds()
    rows: dict[str, int] = {}
    sets: list[str] = []
    bars: list[Bar] = []
    at = now
    for _ in range(MAX_STEPS):
        if at >= end:
            break
        following = playlist.next_change(at)
        until = end if following is None or following > end else following
        if until <= at:  # never stand still
            until = at + datetime.timedelta(minutes=1)
        for selection in playlist.eligible(at, lambda item: True):
            row = rows.setdefault(selection.url, len(rows))
            if row == len(sets):
                sets.append(selection.root_name or "")
            bars.append(
                Bar(
                    row,
                    (at - now).total_seconds() / total,
                    (min(until, end) - now).total_seconds() / total,
                )
            )
        at = until
    return Timeline(now, hours, list(rows), sets, _merged(bars), problems)


def _merged(bars: list[Bar]) -> list[Bar]:
    """Adjacent spans of one row as one bar."""
    merged: list[Bar] = []
    for bar in sorted(bars, key=lambda b: (b.row, b.start)):
        last = merged[-1] if merged else None
        if last is not None and last.row == bar.row and abs(last.end - bar.start) < 1e-9:
            merged[-1] = Bar(bar.row, last.start, bar.end)
        else:
            merged.append(bar)
    return merged


@dataclass(frozen=True)
class PlaysChart:
    days: list[str]  # YYYY-MM-DD, oldest first
    items: list[str]
    counts: dict[tuple[str, str], int]  # (item, day) -> plays
    most: int


def plays_per_item_per_day(
    plays: Iterable[PlayRecord], today: datetime.date, days: int = 7
) -> PlaysChart:
    """How many times each item started, per UTC day, over the last ``days`` days."""
    day_names = [(today - datetime.timedelta(days=n)).isoformat() for n in range(days - 1, -1, -1)]
    counts: Counter[tuple[str, str]] = Counter()
    for play in plays:
        if play.item is None:
            continue
        day = datetime.datetime.fromtimestamp(play.started_at, datetime.UTC).date().isoformat()
        if day in day_names:
            counts[(play.item, day)] += 1
    totals: Counter[str] = Counter()
    for (item, _day), count in counts.items():
        totals[item] += count
    items = [item for item, _ in totals.most_common(12)]
    return PlaysChart(day_names, items, dict(counts), max(counts.values(), default=0))
