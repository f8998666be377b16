"""Read a ``<layout>`` into the model, and check it against the set it splits (docs/cds.md,
"Zones"), each problem at its line: the template and zone names, the boxes, the sets the zones
play, and how many zones could play a video at once (``[screen] video-zones``).

The functions report through the :class:`cds.walk.Walk` of the document being read, so a
layout's problems come with every other problem of the document, in line order.
"""

from __future__ import annotations

import re

from lxml import etree

from cds.elements import local_name, short
from cds.layouts import TEMPLATES, valid_zone_name, video_zones
from cds.model import MAIN_ZONE, ContentSet, Extras, Layout, Node, Zone
from cds.walk import Walk

__all__ = ["check_layout_sets", "check_video_zones", "read_layout"]

_FRACTION = re.compile(r"^(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)$")
_Z = re.compile(r"^[0-9]{1,2}$")
_BOX = ("x", "y", "width", "height")
# Rounding of the fractions a person writes (0.85 + 0.15) must not refuse a box that ends at 1.
_SLACK = 1e-9


def read_layout(walk: Walk, element: etree._Element) -> Layout:
    """A ``<layout>``: its template, its zones and their boxes."""
    extras = Extras()
    walk.unknown_attributes(element, ("template",), extras, "")
    walk.check_text(element)
    template = element.get("template")
    if template is not None:
        template = template.strip()
        if template not in TEMPLATES:
            walk.error(
                element,
                f"<layout> template '{short(template)}' is not known; the templates are "
                f"{', '.join(TEMPLATES)}",
            )
    zones: list[Zone] = []
    seen: dict[str, etree._Element] = {}
    for child in walk.children(element):
        if local_name(child) != "zone":
            walk.unknown_element(element, child, extras, "")
            continue
        zone = _zone(walk, child, template)
        if zone is None:
            continue
        if zone.name in seen:
            walk.error(child, f"<zone> '{zone.name}' is named twice in this <layout>")
            continue
        seen[zone.name] = child
        zones.append(zone)
    written = [
        (child.get("name") or "").strip()
        for child in walk.children(element)
        if local_name(child) == "zone"
    ]
    if not written:
        walk.error(element, '<layout> needs <zone name="main" set="..."/> and its other zones')
    elif MAIN_ZONE not in written:
        walk.error(
            element,
            '<layout> needs a zone named "main": it takes JSON requests and the full-screen '
            "schedules that share the screen with the layout",
        )
    if template in TEMPLATES:
        for name in TEMPLATES[template]:
            if name not in written:
                walk.error(
                    element,
                    f"template '{template}' has the zone '{name}': give it a set with "
                    f'<zone name="{name}" set="..."/>',
                )
    return Layout(zones=zones, template=template, extras=extras)


def _zone(walk: Walk, element: etree._Element, template: str | None) -> Zone | None:
    extras = Extras()
    walk.unknown_attributes(element, ("name", "set", *_BOX, "z"), extras, "")
    walk.check_text(element)
    for child in walk.children(element):
        walk.unknown_element(element, child, extras, "")
    name = (element.get("name") or "").strip()
    set_name = element.get("set")
    if not name:
        walk.error(element, '<zone> needs a name, like <zone name="main" set="...">')
        return None
    if not valid_zone_name(name):
        walk.error(
            element,
            f"<zone> name '{short(name)}' must be 1 to 40 lower-case letters, digits, '-' or "
            "'_', starting with a letter or a digit",
        )
        return None
    if set_name is None or not set_name.strip():
        walk.error(
            element,
            f"<zone> '{name}' has no set: name the child <content-set> it plays, "
            f'<zone name="{name}" set="...">',
        )
        return None
    values: dict[str, float | None] = {}
    for attribute in _BOX:
        text = element.get(attribute)
        values[attribute] = None
        if text is None:
            continue
        if not _FRACTION.match(text.strip()) or float(text) > 1:
            walk.error(
                element,
                f"<zone> '{name}' {attribute} must be a fraction of the screen from 0 to 1, "
                f"got '{short(text)}'",
            )
            return None
        values[attribute] = float(text)
    z_text = element.get("z")
    z: int | None = None
    if z_text is not None:
        if not _Z.match(z_text.strip()):
            walk.error(
                element,
                f"<zone> '{name}' z must be a whole number from 0 to 99, got '{short(z_text)}'",
            )
            return None
        z = int(z_text)
    base = TEMPLATES.get(template or "", {}).get(name)
    box = {
        attribute: values[attribute]
        if values[attribute] is not None
        else (getattr(base, attribute) if base is not None else None)
        for attribute in _BOX
    }
    missing = [attribute for attribute in _BOX if box[attribute] is None]
    if missing:
        where = (
            f"template '{template}' has no zone '{name}'"
            if template in TEMPLATES
            else "a layout without a template"
        )
        walk.error(
            element,
            f"<zone> '{name}' needs its box ({where}): give {', '.join(missing)} as fractions "
            'of the screen, like x="0" y="0.9" width="1" height="0.1"',
        )
        return None
    x, y, width, height = (float(box[attribute] or 0.0) for attribute in _BOX)
    if width <= 0 or height <= 0 or x + width > 1 + _SLACK or y + height > 1 + _SLACK:
        walk.error(
            element,
            f"<zone> '{name}' goes outside the screen or is empty: x + width and y + height "
            f"must be at most 1, width and height above 0 (x={x:g} y={y:g} width={width:g} "
            f"height={height:g})",
        )
        return None
    return Zone(
        name=name,
        set_name=set_name.strip(),
        x=values["x"],
        y=values["y"],
        width=values["width"],
        height=values["height"],
        z=z,
        extras=extras,
    )


def check_layout_sets(
    walk: Walk,
    element: etree._Element,
    layout: Layout,
    children: list[tuple[Node, etree._Element]],
) -> None:
    """The set a layout splits holds exactly the sets its zones play, each named once."""
    named: dict[str, list[etree._Element]] = {}
    for node, child in children:
        if isinstance(node, ContentSet) and node.name is not None:
            named.setdefault(node.name, []).append(child)
    played: dict[str, str] = {}
    for zone in layout.zones:
        if zone.set_name in played:
            walk.error(
                element,
                f"the set '{zone.set_name}' is played by two zones ('{played[zone.set_name]}' "
                f"and '{zone.name}'); each zone plays a set of its own",
            )
            continue
        played[zone.set_name] = zone.name
        found = named.get(zone.set_name, [])
        if not found:
            walk.error(
                element,
                f"<zone> '{zone.name}' plays the set '{zone.set_name}', which is not a child "
                f'<content-set name="{zone.set_name}"> of this set',
            )
        elif len(found) > 1:
            walk.error(
                found[1],
                f"two child sets are named '{zone.set_name}'; the zone '{zone.name}' plays "
                "one of them: give them different names",
            )
    for node, child in children:
        if isinstance(node, ContentSet) and node.name in played:
            continue
        what = "<content-item>" if not isinstance(node, ContentSet) else "<content-set>"
        walk.error(
            child,
            f"a set with a <layout> holds only the sets its zones play: this {what} belongs "
            "inside one of them (or name it in a <zone>)",
        )


def check_video_zones(
    walk: Walk, element: etree._Element, content_set: ContentSet, limit: int
) -> None:
    """Refuse a layout whose zones could play more videos at once than ``limit``."""
    zones = video_zones(content_set)
    if len(zones) > limit:
        layout = f"the layout of set '{content_set.name}'" if content_set.name else "the layout"
        walk.error(
            element,
            f"{layout} could play {len(zones)} videos at once (zones {', '.join(zones)}: the "
            "main zone always counts, and every zone with a video or a live stream); this "
            f"display plays at most {limit} ([screen] video-zones)",
        )
