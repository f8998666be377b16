"""A playlist written as a CDS (docs/cds.md): the schedule the displays are pushed.

One inline content-set named after the playlist, its ``playback`` order (``shuffle`` is CDS's
``random``) and ``priority``; one content-item per entry, in the playlist's order:

- a library item names the scheduler's own URL for it (``<base>/media/<sha256>/<name>``,
  absolute: the display fetches it) with its SHA-256, so the display downloads it ahead,
  checks it and plays it from its cache, offline too; its content type is the item's;
- a web link is a ``text/html`` item loading its URL live;
- the entry's dates, windows and days are its ``date``, ``time`` and ``day-of-week``
  constraints, its duration its ``preferred-duration`` (the one given, else a video's own
  length as the library measured it, else ``DEFAULT_SECONDS``; none for a video the library
  could not measure: the display reads its file's) and its transition its
  ``<playback transition>``.

The result is checked with the project's own CDS parser before anything is stored.
"""

from __future__ import annotations

from collections.abc import Mapping

from lxml import etree

from cds.durations import format_duration
from cds.parser import parse
from server.scheduler.media.api import media_url
from server.scheduler.media.store import MediaItem
from server.scheduler.playlists.model import DEFAULT_SECONDS, Entry, Playlist

__all__ = ["cds_document", "entry_seconds"]

#: The open ends of a date range given on one side only (CDS needs both).
FIRST_DAY = "0001-01-01"
LAST_DAY = "9999-12-31"
#: Kinds of library item the display caches and checks by hash; others load as pages.
CACHED_KINDS = ("image", "video")


def entry_seconds(entry: Entry, item: MediaItem | None) -> float:
    """How long the entry shows: its own duration, a video's length, else the default."""
    if entry.duration is not None:
        return entry.duration
    if item is not None and item.kind == "video" and item.duration:
        return round(item.duration, 3)
    return DEFAULT_SECONDS


def cds_document(
    schedule_id: str, playlist: Playlist, media: Mapping[str, MediaItem], base_url: str
) -> bytes:
    """The CDS of ``playlist`` (``media``: every item it names, by SHA-256); ``base_url``: how
    the displays reach this scheduler. Raises ``cds.errors.CdsError`` if it is not valid."""
    root = etree.Element("content-set", name=schedule_id, type="inline")
    constraints = _constraints(root)
    etree.SubElement(
        constraints, "playback", order="random" if playlist.order == "shuffle" else "inorder"
    )
    etree.SubElement(constraints, "priority", level=playlist.priority)
    for entry in playlist.entries:
        item = media[entry.media] if entry.media else None
        _content_item(root, entry, item, base_url.rstrip("/"))
    data = bytes(etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True))
    parse(data)  # what is stored and pushed is a CDS the displays take
    return data


def _constraints(parent: etree._Element) -> etree._Element:
    return etree.SubElement(etree.SubElement(parent, "constraints"), "scheduling-constraints")


def _content_item(
    root: etree._Element, entry: Entry, item: MediaItem | None, base_url: str
) -> None:
    element = etree.SubElement(root, "content-item")
    constraints = _constraints(element)
    etree.SubElement(constraints, "playback", transition=entry.transition)
    for window_kind, pairs in (
        ("time", [(w.start, w.end) for w in entry.windows]),
        ("day-of-week", [(day, day) for day in entry.days]),
        ("date", _dates(entry)),
    ):
        if pairs:
            kind = etree.SubElement(constraints, window_kind)
            for start, end in pairs:
                etree.SubElement(kind, "between", start=start, end=end)
    # A video whose length the library could not read gets none: the display reads its file's.
    unmeasured = (
        entry.duration is None and item is not None and item.kind == "video" and not item.duration
    )
    if not unmeasured:
        etree.SubElement(constraints, "preferred-duration").text = format_duration(
            entry_seconds(entry, item)
        )
    requires = etree.Element("requires-file")
    if item is None:
        element.set("content-type", "text/html")
        uri = entry.link or ""
    else:
        element.set("content-type", item.mime if item.kind in CACHED_KINDS else "text/html")
        # A web link is its own URL; a page bundle is its index.html (media_url says which).
        path = media_url(item)
        uri = path if item.link is not None else f"{base_url}{path}"
        if item.kind in CACHED_KINDS:
            element.set("size", f"{item.size} bytes")
            hashes = etree.SubElement(requires, "hashes")
            etree.SubElement(hashes, "hash", type="sha256").text = item.sha256
    etree.SubElement(etree.SubElement(requires, "sources"), "uri").text = uri
    element.append(requires)


def _dates(entry: Entry) -> list[tuple[str, str]]:
    if entry.start is None and entry.until is None:
        return []
    start = entry.start.isoformat() if entry.start else FIRST_DAY
    until = entry.until.isoformat() if entry.until else LAST_DAY
    return [(start, until)]
