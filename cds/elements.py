"""How the parser names an element to a person, and how it keeps one it does not know.

Shared by every layer of reading a CDS (:mod:`cds.guard`, :mod:`cds.relaxng`, :mod:`cds.walk`
and the readers built on it), so that an element is named the same way in every message, and
so that unknown elements kept in :class:`cds.model.Extras` round-trip to the same text.
"""

from __future__ import annotations

from lxml import etree

__all__ = ["canonical_xml", "line_of", "local_name", "short", "shown_attribute", "shown_name"]


def line_of(element: etree._Element) -> int | None:
    line = element.sourceline
    return line if isinstance(line, int) and line > 0 else None


def local_name(element: etree._Element) -> str | None:
    """The name of a CDS element (no namespace), or None for anything else."""
    tag = element.tag
    if not isinstance(tag, str) or tag.startswith("{"):
        return None
    return tag


def shown_name(element: etree._Element) -> str:
    tag = element.tag
    if not isinstance(tag, str):
        return "?"
    if tag.startswith("{"):
        prefix = element.prefix
        local = etree.QName(element).localname
        return f"{prefix}:{local}" if prefix else local
    return tag


def shown_attribute(element: etree._Element, name: str) -> str:
    if not name.startswith("{"):
        return name
    namespace, local = name[1:].split("}", 1)
    for prefix, uri in (element.nsmap or {}).items():
        if uri == namespace and prefix:
            return f"{prefix}:{local}"
    return local


def canonical_xml(element: etree._Element) -> str:
    """An unknown element as text that depends only on what it means, so a round trip gives
    the same text back: no tail, whitespace-only text removed (pretty-printing adds it), and
    namespace prefixes renamed ns0, ns1, ... in order of first use, declared on the element
    itself (the prefixes a document used are not part of its meaning, and lxml renames them
    when an element moves under a parent that declares the same namespace)."""
    uris: list[str] = []
    for node in element.iter():
        if isinstance(node.tag, str):
            for name in (node.tag, *map(str, node.attrib)):
                if name.startswith("{"):
                    uri = name[1:].split("}", 1)[0]
                    if uri not in uris and uri != _XML_NAMESPACE:
                        uris.append(uri)
    nsmap = {f"ns{index}": uri for index, uri in enumerate(uris)}

    def rebuild(node: etree._Element, parent: etree._Element | None) -> etree._Element:
        tag = str(node.tag)
        made = (
            etree.Element(tag, nsmap=nsmap or None)
            if parent is None
            else etree.SubElement(parent, tag)
        )
        for name, value in node.attrib.items():
            made.set(name, value)
        made.text = node.text if node.text is not None and node.text.strip() else None
        for child in node:
            if isinstance(child.tag, str):
                rebuilt = rebuild(child, made)
                tail = child.tail
                rebuilt.tail = tail if tail is not None and tail.strip() else None
        return made

    return etree.tostring(rebuild(element, None), encoding="unicode", with_tail=False)


_XML_NAMESPACE = "http://www.w3.org/XML/1998/namespace"


def short(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
