"""What a playlist is, and reading one from the operator's JSON (docs/fleet.md, "Playlists").

A playlist is an ordered list of entries, each a media item of the library (``{"media":
sha256}``) or a web link (``{"link": URL}``), with:

- ``duration``: how long it shows (a duration as everywhere in the API: ``"10 s"``, ``"PT1M"``,
  or a number of seconds). A video without one shows for its own length (from the library);
  a picture, a page or a link without one shows for ``DEFAULT_SECONDS``;
- ``from`` / ``until``: the first and last day it shows (``YYYY-MM-DD``, both included);
- ``windows``: the times of day it shows, ``[{"start": "08:00", "end": "12:00"}, ...]`` (an end
  before its start runs overnight);
- ``days``: the days of the week it shows, ``["monday", "tue", ...]``;
- ``transition``: ``"crossfade"`` (the default) or ``"cut"``.

The playlist as a whole has its ``order`` (``"inorder"`` or ``"shuffle"``), its ``priority``
(``lowest`` .. ``highest``, default ``medium``) and an optional ``name``.

Reading checks every field and names the first one that is wrong (``items[2].windows[0].end``)
in a :class:`server.platform.validation.ValidationError`, so a bad body changes nothing. This
module needs neither Flask nor the database.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cds.model import DAY_NAMES
from server.platform.validation import (
    CALENDAR_DAY_PATTERN,
    CLOCK_PATTERN,
    DAY_OF_WEEK_PATTERN,
    HTTP,
    NOT_BLANK_PATTERN,
    SHA256_PATTERN,
    Duration,
    ValidationError,
    check_uri,
    invalid_field,
)

__all__ = [
    "DEFAULT_SECONDS",
    "MAX_ITEMS",
    "ORDERS",
    "PRIORITIES",
    "TRANSITIONS",
    "Entry",
    "Playlist",
    "Window",
    "read_playlist",
]

#: How long a picture, a page or a link shows when its entry gives no duration.
DEFAULT_SECONDS = 10.0
MAX_ITEMS = 1000
MAX_WINDOWS = 24
MAX_NAME = 200
ORDERS = ("inorder", "shuffle")
PRIORITIES = ("lowest", "low", "medium", "high", "highest")
TRANSITIONS = ("crossfade", "cut")
_SHA256 = re.compile(SHA256_PATTERN)
_CLOCK = re.compile(CLOCK_PATTERN)
_DATE = re.compile(CALENDAR_DAY_PATTERN)
_DAY = re.compile(DAY_OF_WEEK_PATTERN)
_NOT_BLANK = re.compile(NOT_BLANK_PATTERN)
_ENTRY_FIELDS = frozenset(
    ("media", "link", "duration", "from", "until", "windows", "days", "transition")
)
#: What ``GET /x/playlists/<id>`` adds: ignored when a playlist read is sent back.
READ_ONLY = frozenset(("id", "seconds", "duration", "updated", "schedule"))
_PLAYLIST_FIELDS = frozenset(("items", "order", "priority", "name")) | READ_ONLY
_duration = Duration()


@dataclass(frozen=True)
class Window:
    """A time of day window, ``HH:MM`` or ``HH:MM:SS`` as given."""

    start: str
    end: str


@dataclass(frozen=True)
class Entry:
    """One entry of a playlist: ``media`` (a SHA-256) or ``link`` (a URL), not both."""

    media: str | None = None
    link: str | None = None
    duration: float | None = None  # seconds; None: the item's own or the default
    start: datetime.date | None = None  # "from"
    until: datetime.date | None = None
    windows: tuple[Window, ...] = ()
    days: tuple[str, ...] = ()  # full lower-case names, in the week's order
    transition: str = "crossfade"

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"media": self.media} if self.media else {"link": self.link}
        if self.duration is not None:
            body["duration"] = self.duration
        if self.start is not None:
            body["from"] = self.start.isoformat()
        if self.until is not None:
            body["until"] = self.until.isoformat()
        if self.windows:
            body["windows"] = [{"start": w.start, "end": w.end} for w in self.windows]
        if self.days:
            body["days"] = list(self.days)
        body["transition"] = self.transition
        return body


@dataclass(frozen=True)
class Playlist:
    entries: tuple[Entry, ...] = ()
    order: str = "inorder"
    priority: str = "medium"
    name: str | None = None

    @property
    def media(self) -> list[str]:
        """The library items it uses, each once, in the order first used."""
        return list(dict.fromkeys(e.media for e in self.entries if e.media))

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "items": [entry.to_json() for entry in self.entries],
            "order": self.order,
            "priority": self.priority,
        }
        if self.name is not None:
            body["name"] = self.name
        return body

    def without(self, sha256: str) -> Playlist:
        """The playlist with every entry of ``sha256`` taken out."""
        return Playlist(
            tuple(e for e in self.entries if e.media != sha256),
            self.order,
            self.priority,
            self.name,
        )


def read_playlist(body: Any) -> Playlist:
    """The playlist in ``body`` (parsed JSON), checked; ValidationError naming the field."""
    if not isinstance(body, Mapping):
        raise ValidationError(400, "invalid-json", "The body must be a JSON object.")
    _no_unknown(body, _PLAYLIST_FIELDS, "")
    items = body.get("items")
    if not isinstance(items, list) or len(items) > MAX_ITEMS:
        raise invalid_field("items", f"'items' is required: a list of at most {MAX_ITEMS} entries.")
    entries = tuple(_entry(f"items[{index}]", item) for index, item in enumerate(items))
    order = _choice(body, "order", ORDERS, "inorder")
    priority = _choice(body, "priority", PRIORITIES, "medium")
    name = body.get("name")
    if name is not None and (
        not isinstance(name, str) or not _NOT_BLANK.search(name) or len(name) > MAX_NAME
    ):
        raise invalid_field("name", f"'name' must be text of 1 to {MAX_NAME} characters.")
    return Playlist(entries, order, priority, name)


def _no_unknown(body: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    # A playlist is the operator's whole intent: a misspelt field ("util") would silently
    # drop a date range, so unknown fields are refused rather than ignored.
    for key in body:
        if key not in known:
            name = f"{where}.{key}" if where else str(key)
            raise invalid_field(
                name, f"'{name}' is not a playlist field; known: {', '.join(sorted(known))}."
            )


def _choice(body: Mapping[str, Any], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = body.get(name, default)
    if value not in allowed:
        raise invalid_field(name, f"'{name}' must be one of {', '.join(allowed)}.")
    return str(value)


def _entry(where: str, item: Any) -> Entry:
    if not isinstance(item, Mapping):
        raise invalid_field(where, f"'{where}' must be an object with 'media' or 'link'.")
    _no_unknown(item, _ENTRY_FIELDS, where)
    media, link = item.get("media"), item.get("link")
    if ("media" in item) == ("link" in item):
        raise invalid_field(where, f"'{where}' needs either 'media' (a SHA-256) or 'link'.")
    if "media" in item and (not isinstance(media, str) or not _SHA256.match(media)):
        raise invalid_field(
            f"{where}.media", f"'{where}.media' must be a SHA-256: 64 lower-case hex digits."
        )
    if "link" in item:
        problem = check_uri(link, HTTP) if isinstance(link, str) else "it is not text"
        if problem is None and isinstance(link, str) and len(link) > 2000:
            problem = "at most 2000 characters"
        if problem is not None:
            raise invalid_field(
                f"{where}.link", f"'{where}.link' must be an http or https URL ({problem})."
            )
    duration = None
    if "duration" in item:
        duration = _duration(f"{where}.duration", item["duration"])
    start = _date(item, "from", where)
    until = _date(item, "until", where)
    if start is not None and until is not None and until < start:
        raise invalid_field(
            f"{where}.until", f"'{where}.until' ({until}) is before its 'from' ({start})."
        )
    transition = item.get("transition", "crossfade")
    if transition not in TRANSITIONS:
        raise invalid_field(
            f"{where}.transition", f"'{where}.transition' must be one of {', '.join(TRANSITIONS)}."
        )
    return Entry(
        media=media,
        link=link,
        duration=duration,
        start=start,
        until=until,
        windows=_windows(item.get("windows", []), f"{where}.windows"),
        days=_days(item.get("days", []), f"{where}.days"),
        transition=str(transition),
    )


def _date(item: Mapping[str, Any], key: str, where: str) -> datetime.date | None:
    value = item.get(key)
    if value is None:
        return None
    name = f"{where}.{key}"
    if isinstance(value, str) and _DATE.match(value):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            pass
    raise invalid_field(name, f"'{name}' must be a day in the calendar, like 2026-12-24.")


def _windows(value: Any, where: str) -> tuple[Window, ...]:
    if not isinstance(value, list) or len(value) > MAX_WINDOWS:
        raise invalid_field(
            where, f"'{where}' must be a list of at most {MAX_WINDOWS} {{start, end}} objects."
        )
    windows = []
    for index, window in enumerate(value):
        name = f"{where}[{index}]"
        if not isinstance(window, Mapping):
            raise invalid_field(name, f"'{name}' must be an object like {{'start': '08:00'}}.")
        _no_unknown(window, frozenset(("start", "end")), name)
        bounds = []
        for key in ("start", "end"):
            text = window.get(key)
            if not isinstance(text, str) or not _CLOCK.match(text):
                raise invalid_field(
                    f"{name}.{key}", f"'{name}.{key}' must be a time of day like 08:00 or 17:30."
                )
            bounds.append(text)
        if bounds[0] == bounds[1]:
            raise invalid_field(f"{name}.end", f"'{name}' starts and ends at the same time.")
        windows.append(Window(bounds[0], bounds[1]))
    return tuple(windows)


def _days(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > 7:
        raise invalid_field(where, f"'{where}' must be a list of days of the week.")
    found: set[str] = set()
    for index, day in enumerate(value):
        text = day.lower() if isinstance(day, str) and _DAY.match(day) else ""
        match = next((d for d in DAY_NAMES if text in (d, d[:3])), None)
        if match is None:
            raise invalid_field(
                f"{where}[{index}]", f"'{where}[{index}]' must be a day such as monday or mon."
            )
        found.add(match)
    return tuple(day for day in DAY_NAMES if day in found)
