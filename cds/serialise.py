"""Write the model back as a CDS document that parses to the same model.

Known elements come out in a fixed, readable order, indented; unknown elements and attributes
kept by the parser go back where they were found (see :class:`cds.model.Extras`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from decimal import Decimal

from lxml import etree

from cds.durations import format_duration
from cds.model import (
    DAY_NAMES,
    PRIORITY_NAMES,
    Constraints,
    ContentItem,
    ContentSet,
    Document,
    Extras,
    Layout,
    RequiredFile,
)

__all__ = ["to_xml"]

_SAFE_PARSER = etree.XMLParser(
    resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False
)


def to_xml(value: Document | ContentSet, *, indent: bool = True) -> bytes:
    """The CDS as UTF-8 XML bytes with an XML declaration."""
    if isinstance(value, Document):
        root = _content_set(value.root)
        if value.wrapper_uri is not None:
            wrapper = etree.Element("subscription-update", uri=value.wrapper_uri)
            wrapper.append(root)
            root = wrapper
    else:
        root = _content_set(value)
    if indent:
        etree.indent(root, space="  ")
    body = etree.tostring(root, xml_declaration=False, encoding="UTF-8")
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + body + b"\n"


class _Places:
    """The elements of one model object by extras path, made on demand."""

    def __init__(
        self,
        base: etree._Element,
        known: dict[str, etree._Element],
        make: Callable[[str], etree._Element | None] | None = None,
    ) -> None:
        self.base = base
        self.known = known
        self.make = make

    def find(self, path: str) -> etree._Element:
        if path in self.known:
            return self.known[path]
        made = self.make(path) if self.make is not None else None
        if made is not None:
            self.known[path] = made
            return made
        parent, _, _ = path.rpartition("/")
        return self.find(parent) if parent else self.base

    def attach(self, extras: Extras) -> None:
        # Elements before attributes: setting a namespaced attribute declares a prefix, and
        # lxml would re-point later-appended elements of that namespace to it.
        for path, texts in extras.elements.items():
            target = self.find(path)
            for text in texts:
                target.append(etree.fromstring(text, _SAFE_PARSER))
        for (path, name), value in extras.attributes.items():
            self.find(path).set(name, value)


def _content_set(content_set: ContentSet) -> etree._Element:
    element = etree.Element("content-set")
    if content_set.name is not None:
        element.set("name", content_set.name)
    element.set("type", content_set.type)
    for kept in (content_set.auth, content_set.feedback):
        if kept is not None:
            element.append(etree.fromstring(kept, _SAFE_PARSER))
    constraints = _constraints(content_set.constraints)
    if constraints is not None:
        element.append(constraints)
    if content_set.requires_file is not None:
        element.append(_required_file(content_set.requires_file))
    if content_set.layout is not None:
        element.append(_layout(content_set.layout))
    for child in content_set.children:
        if isinstance(child, ContentSet):
            element.append(_content_set(child))
        else:
            element.append(_content_item(child))
    _Places(element, {"": element}).attach(content_set.extras)
    return element


def _layout(layout: Layout) -> etree._Element:
    element = etree.Element("layout")
    if layout.template is not None:
        element.set("template", layout.template)
    for zone in layout.zones:
        node = etree.SubElement(element, "zone", name=zone.name, set=zone.set_name)
        for attribute, value in (
            ("x", zone.x),
            ("y", zone.y),
            ("width", zone.width),
            ("height", zone.height),
        ):
            if value is not None:
                # Decimal of the repr: the same float read back, never in exponent form.
                node.set(attribute, format(Decimal(repr(float(value))), "f"))
        if zone.z is not None:
            node.set("z", str(zone.z))
        _Places(node, {"": node}).attach(zone.extras)
    _Places(element, {"": element}).attach(layout.extras)
    return element


def _content_item(item: ContentItem) -> etree._Element:
    element = etree.Element("content-item")
    if item.content_type is not None:
        element.set("content-type", item.content_type)
    if item.size is not None:
        element.set("size", f"{item.size} bytes")
    constraints = _constraints(item.constraints)
    if constraints is not None:
        element.append(constraints)
    for required in item.files:
        element.append(_required_file(required))
    _Places(element, {"": element}).attach(item.extras)
    return element


def _clock(moment: datetime.time) -> str:
    # Always with seconds, as in the spec's example: the strictest readers expect HH:MM:SS.
    return moment.strftime("%H:%M:%S")


def _constraints(constraints: Constraints) -> etree._Element | None:
    if constraints.is_empty():
        return None
    outer = etree.Element("constraints")
    inner = etree.SubElement(outer, "scheduling-constraints")
    known: dict[str, etree._Element] = {"constraints": outer, "scheduling-constraints": inner}

    if (
        constraints.order is not None
        or constraints.avoid_context_switch is not None
        or constraints.sync is not None
        or constraints.transition is not None
    ):
        playback = etree.SubElement(inner, "playback")
        if constraints.order is not None:
            playback.set("order", constraints.order)
        if constraints.avoid_context_switch is not None:
            playback.set(
                "avoid-context-switch", "true" if constraints.avoid_context_switch else "false"
            )
        if constraints.sync is not None:
            playback.set("sync", constraints.sync)
        if constraints.transition is not None:
            playback.set("transition", constraints.transition)
        known["playback"] = playback
    windows: list[tuple[str, list[tuple[str, str]]]] = [
        ("time", [(_clock(w.start), _clock(w.end)) for w in constraints.times]),
        ("day-of-week", [(DAY_NAMES[w.start], DAY_NAMES[w.end]) for w in constraints.days]),
        ("date", [(w.start.isoformat(), w.end.isoformat()) for w in constraints.dates]),
    ]
    for kind, bounds in windows:
        if not bounds:
            continue
        holder = etree.SubElement(inner, kind)
        known[kind] = holder
        for index, (start, end) in enumerate(bounds):
            known[f"{kind}/between[{index}]"] = etree.SubElement(
                holder, "between", start=start, end=end
            )
    if constraints.priority is not None:
        known["priority"] = etree.SubElement(
            inner, "priority", level=PRIORITY_NAMES[constraints.priority]
        )
    if constraints.preferred_duration is not None:
        duration = etree.SubElement(inner, "preferred-duration")
        duration.text = format_duration(constraints.preferred_duration)
        known["preferred-duration"] = duration

    def make(path: str) -> etree._Element | None:
        # A place that holds only unknown things (a playback element with no known attribute).
        if path == "playback":
            element = etree.Element("playback")
            inner.insert(0, element)
            return element
        return None

    _Places(outer, known, make).attach(constraints.extras)
    return outer


def _required_file(required: RequiredFile) -> etree._Element:
    element = etree.Element("requires-file")
    known: dict[str, etree._Element] = {"requires-file": element}
    if (
        required.hashes
        or any(path.startswith("hashes") for path, _ in required.extras.attributes)
        or any(path.startswith("hashes") for path in required.extras.elements)
    ):
        hashes = etree.SubElement(element, "hashes")
        known["hashes"] = hashes
        for index, (kind, digest) in enumerate(required.hashes):
            node = etree.SubElement(hashes, "hash", type=kind)
            node.text = digest
            known[f"hashes/hash[{index}]"] = node
    sources = etree.SubElement(element, "sources")
    known["sources"] = sources
    for index, (uri, refresh) in enumerate(required.sources):
        node = etree.SubElement(sources, "uri")
        if refresh is not None:
            node.set("refresh", format_duration(refresh))
        node.text = uri
        known[f"sources/uri[{index}]"] = node
    _Places(element, known).attach(required.extras)
    return element
