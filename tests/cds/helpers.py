"""Small builders for CDS documents in tests: readable XML, parsed with the real parser."""

from __future__ import annotations

import datetime
from zoneinfo import ZoneInfo

from cds.model import ContentItem, ContentSet
from cds.parser import parse

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


def item(name: str, *constraints: str) -> str:
    """An item whose URL ends in ``name`` (so tests can read plays back as names)."""
    return (
        f'<content-item content-type="text/html">{sc(*constraints) if constraints else ""}'
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
