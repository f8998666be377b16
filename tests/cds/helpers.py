"""Small builders for CDS documents in tests: readable XML, parsed with the real parser, and
the playlists that play them."""

from __future__ import annotations

import datetime
import random
from zoneinfo import ZoneInfo

from cds.model import ContentItem, ContentSet
from cds.parser import parse
from cds.playlist import Playlist, Selection

LONDON = ZoneInfo("Europe/London")
NEW_YORK = ZoneInfo("America/New_York")


def sc(*parts: str) -> str:
    """A constraints element holding the given scheduling constraints."""
    inner = "".join(parts)
    return f"<constraints><scheduling-constraints>{inner}</scheduling-constraints></constraints>"


def times(*windows: tuple[str, str]) -> str:
    return "<time>" + "".join(f'<between start="{s}" end="{e}"/>' for s, e in windows) + "</time>"


def days(*windows: tuple[str, str]) -> str:
    return (
        "<day-of-week>"
        + "".join(f'<between start="{s}" end="{e}"/>' for s, e in windows)
        + "</day-of-week>"
    )


def dates(*windows: tuple[str, str]) -> str:
    return "<date>" + "".join(f'<between start="{s}" end="{e}"/>' for s, e in windows) + "</date>"


def priority(level: str) -> str:
    return f'<priority level="{level}"/>'


def playback(order: str | None = None, avoid: bool | None = None) -> str:
    attributes = ""
    if order is not None:
        attributes += f' order="{order}"'
    if avoid is not None:
        attributes += f' avoid-context-switch="{"true" if avoid else "false"}"'
    return f"<playback{attributes}/>"


def duration(text: str) -> str:
    return f"<preferred-duration>{text}</preferred-duration>"


def item(name: str, *constraints: str, content_type: str = "text/html") -> str:
    """An item whose URL ends in ``name`` (so tests can read plays back as names)."""
    return (
        f'<content-item content-type="{content_type}">{sc(*constraints) if constraints else ""}'
        f"<requires-file><sources><uri>http://example.org/{name}</uri></sources></requires-file>"
        "</content-item>"
    )


def content_set(name: str | None, *children: str, constraints: tuple[str, ...] = ()) -> str:
    named = f' name="{name}"' if name is not None else ""
    own = sc(*constraints) if constraints else ""
    return f"<content-set{named}>{own}{''.join(children)}</content-set>"


def doc(name: str | None, *children: str, constraints: tuple[str, ...] = ()) -> ContentSet:
    """A parsed root set."""
    return parse(content_set(name, *children, constraints=constraints)).root


def at(text: str, tz: datetime.tzinfo = LONDON) -> datetime.datetime:
    """'2026-11-23 09:00' (a Monday) on the wall clock of ``tz``."""
    return datetime.datetime.fromisoformat(text).replace(tzinfo=tz)


def utc(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.UTC)


def name_of(item_: ContentItem) -> str:
    return item_.url.rsplit("/", 1)[1]


def everything(_item: ContentItem) -> bool:
    return True


def playlist(*docs: ContentSet, tz: datetime.tzinfo = LONDON, seed: int = 7) -> Playlist:
    result = Playlist(tz, random.Random(seed))
    result.set_documents(list(docs))
    return result


def names(selections: list[Selection]) -> list[str]:
    return [name_of(s.item) for s in selections]


def eligible_names(p: Playlist, when: datetime.datetime) -> list[str]:
    return names(p.eligible(when, everything))


def plays(p: Playlist, when: datetime.datetime, count: int) -> list[str]:
    found: list[str] = []
    for _ in range(count):
        chosen = p.next(when, everything)
        assert chosen is not None
        found.append(name_of(chosen.item))
    return found


def is_eligible(constraint: str, when: datetime.datetime, tz: datetime.tzinfo = LONDON) -> bool:
    return bool(playlist(doc("s", item("a", constraint)), tz=tz).eligible(when, everything))
