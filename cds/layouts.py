"""Zones: the screen split into regions that each play a set of their own (docs/cds.md,
"Zones"). The templates by name, the boxes a :class:`~cds.model.Layout` gives its zones, which
zones could play a video, and the documents each zone plays.

A box is four fractions of the screen as people see it (after ``[screen] rotation``): ``x`` and
``y`` of its top-left corner, ``width`` and ``height``; ``z`` stacks zones that overlap (higher
in front). A template names its zones (``main`` always one of them) and gives each a box; a
``<zone>`` may override any part of its box, and a zone the template does not name gives all
four. Without a template every zone gives its box.

Could a zone play a video: its set holds, at any depth, an item that is a video (a ``video/...``
content-type, or a video file name with no more telling type) or a live stream (an HLS
playlist by its type or a ``.m3u8`` address, an ``rtsp:``, ``rtsps:`` or ``srt:`` address); a
zone's set holds no remote set (the parser refuses one). The main zone always counts: the
full-screen documents and the JSON requests it plays may be videos. A layout whose count is
above the display's ``[screen] video-zones`` is refused.

No Qt, no Flask: the parser checks layouts with this module, and the zone engine
(``player.zones``) splits the screen and feeds each zone from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from cds.model import MAIN_ZONE, ContentItem, ContentSet, Layout
from cds.streams import is_stream
from cds.syncgrid import looks_like_video

__all__ = [
    "CLOCK_TYPE",
    "MAIN_ZONE",
    "TEMPLATES",
    "TICKER_TYPES",
    "ZONE_NAME_PATTERN",
    "Box",
    "ZoneBox",
    "clock_format",
    "could_play_video",
    "is_live_stream",
    "native_kind",
    "video_zones",
    "zone_boxes",
    "zone_document",
    "zone_set",
]

#: A zone's name: 1 to 40 lower-case letters, digits, '-' or '_', starting with a letter or a
#: digit (the grammar of ``<zone name>`` and of a JSON request's ``zone``).
ZONE_NAME_PATTERN = "^[a-z0-9][a-z0-9_-]{0,39}$"
_ZONE_NAME = re.compile(ZONE_NAME_PATTERN)

#: Native zone content: a ticker (a text file or a ``data:text/plain,`` text, one message a
#: line, or an RSS or Atom feed) and a clock (``pdn:clock?format=HH:mm``). The renderer shows
#: them itself; the content cache never downloads them (a ticker reads its feed itself).
TICKER_TYPES = ("text/plain", "application/rss+xml", "application/atom+xml")
CLOCK_TYPE = "application/x-pdn-clock"
DEFAULT_CLOCK_FORMAT = "HH:mm"
MAX_CLOCK_FORMAT = 64


@dataclass(frozen=True)
class Box:
    """A region of the screen, in fractions of its width and height."""

    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class ZoneBox:
    """One zone of a layout as the screen places it: its name, the set it plays, its box."""

    name: str
    set_name: str
    x: float
    y: float
    width: float
    height: float
    z: int


def _template(*zones: tuple[str, float, float, float, float]) -> dict[str, Box]:
    return {name: Box(x, y, width, height) for name, x, y, width, height in zones}


#: The templates: each zone's box, ``main`` first. A template's zones stack in this order
#: (``main`` at z 0, the others at 1) unless a ``<zone z=...>`` says otherwise.
TEMPLATES: dict[str, dict[str, Box]] = {
    "full": _template(("main", 0, 0, 1, 1)),
    "main+ticker": _template(("main", 0, 0, 1, 0.9), ("ticker", 0, 0.9, 1, 0.1)),
    "main+sidebar": _template(("main", 0, 0, 0.75, 1), ("side", 0.75, 0, 0.25, 1)),
    "l-shape": _template(
        ("main", 0, 0, 0.75, 0.85), ("side", 0.75, 0, 0.25, 0.85), ("ticker", 0, 0.85, 1, 0.15)
    ),
    "2x2": _template(
        ("main", 0, 0, 0.5, 0.5),
        ("top-right", 0.5, 0, 0.5, 0.5),
        ("bottom-left", 0, 0.5, 0.5, 0.5),
        ("bottom-right", 0.5, 0.5, 0.5, 0.5),
    ),
    "portrait-main+ticker": _template(("main", 0, 0, 1, 0.94), ("ticker", 0, 0.94, 1, 0.06)),
    "portrait-main+sidebar": _template(("main", 0, 0, 1, 0.7), ("side", 0, 0.7, 1, 0.3)),
    "portrait-l-shape": _template(
        ("main", 0, 0, 1, 0.56), ("side", 0, 0.56, 1, 0.36), ("ticker", 0, 0.92, 1, 0.08)
    ),
}


def valid_zone_name(name: str) -> bool:
    return _ZONE_NAME.fullmatch(name) is not None


def zone_boxes(layout: Layout) -> tuple[ZoneBox, ...]:
    """Each zone of a layout the parser took, with its box (the template's, overridden by the
    zone's own) and its z, in the layout's order."""
    template = TEMPLATES.get(layout.template or "", {})
    order = list(template)
    boxes: list[ZoneBox] = []
    for index, zone in enumerate(layout.zones):
        base = template.get(zone.name)
        default_z = (0 if zone.name == MAIN_ZONE else 1) if base is not None else index
        boxes.append(
            ZoneBox(
                name=zone.name,
                set_name=zone.set_name,
                x=_given(zone.x, base.x if base else None),
                y=_given(zone.y, base.y if base else None),
                width=_given(zone.width, base.width if base else None),
                height=_given(zone.height, base.height if base else None),
                z=zone.z if zone.z is not None else default_z,
            )
        )
    boxes.sort(key=lambda box: order.index(box.name) if box.name in order else len(order))
    return tuple(boxes)


def _given(own: float | None, default: float | None) -> float:
    value = own if own is not None else default
    return float(value) if value is not None else 0.0


def zone_set(root: ContentSet, zone_name: str) -> ContentSet | None:
    """The child set of ``root`` that its layout's zone ``zone_name`` plays."""
    layout = root.layout
    if layout is None:
        return None
    zone = next((z for z in layout.zones if z.name == zone_name), None)
    if zone is None:
        return None
    return next(
        (c for c in root.children if isinstance(c, ContentSet) and c.name == zone.set_name), None
    )


def zone_document(root: ContentSet, zone_name: str) -> ContentSet | None:
    """What one zone of a layout document plays, as a document of its own: a root set with
    the layout set's name and constraints (its windows, priority, order, sync... hold in every
    zone) holding the zone's set alone. Its items' records name the layout set, as any
    scheduled item names its document."""
    found = zone_set(root, zone_name)
    if found is None:
        return None
    return ContentSet(name=root.name, constraints=root.constraints, children=[found])


def is_live_stream(item: ContentItem) -> bool:
    """An HLS playlist, or an RTSP or SRT address (``cds.streams``): played natively, never
    cached."""
    return is_stream(item.url, item.content_type)


def native_kind(content_type: str | None) -> Literal["ticker", "clock"] | None:
    """Whether an item of this content-type is a ticker or a clock (None: neither)."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media in TICKER_TYPES:
        return "ticker"
    return "clock" if media == CLOCK_TYPE else None


def clock_format(uri: str) -> str:
    """The Qt date format a ``pdn:clock?format=...`` address asks for
    (:data:`DEFAULT_CLOCK_FORMAT` without one); ValueError for another address or an
    unreasonable format."""
    parts = urlsplit(uri)
    if parts.scheme != "pdn" or parts.path != "clock" or parts.netloc or parts.fragment:
        raise ValueError(f"a clock's address is pdn:clock?format=..., not {uri!r}")
    values = parse_qs(parts.query, keep_blank_values=True).get("format", [DEFAULT_CLOCK_FORMAT])
    fmt = values[-1].strip() or DEFAULT_CLOCK_FORMAT
    if len(fmt) > MAX_CLOCK_FORMAT or any(ord(c) < 32 for c in fmt):
        raise ValueError(f"a clock's format is at most {MAX_CLOCK_FORMAT} printable characters")
    return fmt


def could_play_video(content_set: ContentSet) -> bool:
    """Whether a set could put a video on screen: a video or a live stream among its items at
    any depth."""
    return any(looks_like_video(item) or is_live_stream(item) for item in content_set.walk_items())


def video_zones(root: ContentSet) -> list[str]:
    """The zones of a layout document that could play a video at once: ``main`` always (it
    plays full-screen documents and requests too), and every other zone whose set could."""
    layout = root.layout
    if layout is None:
        return []
    found = [MAIN_ZONE]
    for zone in layout.zones:
        if zone.name == MAIN_ZONE:
            continue
        played = zone_set(root, zone.name)
        if played is not None and could_play_video(played):
            found.append(zone.name)
    return found
