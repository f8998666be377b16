"""The hostile-input guard: bytes, text or a path in, a bounded lxml tree out.

Hostile input is refused before it costs anything: the document is bounded in size (8 MiB),
depth (64 levels) and number of elements; DTDs and entity declarations are refused outright
(so billion-laughs and external-entity documents never expand), and lxml runs with entity
resolution, DTD loading and network access off. It runs before the model is built and before
the RELAX NG check, which both trust the tree it hands over to be small and entity-free.
"""

from __future__ import annotations

import os
import re
from typing import Any

from lxml import etree

from cds.elements import line_of, local_name, shown_name
from cds.errors import CdsError, Problem

__all__ = [
    "MAX_ATTRIBUTES",
    "MAX_BYTES",
    "MAX_CHILDREN",
    "MAX_DEPTH",
    "MAX_ELEMENTS",
    "MAX_UNKNOWN_ELEMENTS",
    "load",
    "xml_parser",
]

MAX_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 64
MAX_ELEMENTS = 100_000
MAX_CHILDREN = 5_000  # direct children of one element (items of one set)
MAX_ATTRIBUTES = 64
MAX_UNKNOWN_ELEMENTS = 2_000  # unknown elements and everything inside them, in all
# Elements that hold a handful of things in any real CDS (addresses, digests, windows).
_FEW_CHILDREN = 64
_FEW_CHILDREN_IN = frozenset(
    (
        "content-item",
        "constraints",
        "scheduling-constraints",
        "time",
        "day-of-week",
        "date",
        "requires-file",
        "hashes",
        "sources",
        "playback",
        "priority",
        "between",
    )
)
_DECLARATION = re.compile(rb"<!\s*(DOCTYPE|ENTITY|ELEMENT|ATTLIST)", re.IGNORECASE)


def load(data: bytes | str | os.PathLike[str]) -> etree._Element:
    """The document's root element, or :class:`~cds.errors.CdsError` if it cannot be read,
    is not well-formed, or breaks a bound above."""
    raw, is_text = _read(data)
    return _parse_xml(raw, is_text)


def _read(data: bytes | str | os.PathLike[str]) -> tuple[bytes, bool]:
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        is_text = False
    elif isinstance(data, str):
        raw = data.encode("utf-8", errors="surrogatepass")
        is_text = True
    elif isinstance(data, os.PathLike):
        path = os.fspath(data)
        try:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_BYTES + 1)
        except IsADirectoryError:
            raise CdsError([Problem(None, None, "this is a directory, not a CDS file")]) from None
        except FileNotFoundError:
            raise CdsError([Problem(None, None, "no such file")]) from None
        except OSError as error:
            reason = error.strerror or str(error)
            raise CdsError([Problem(None, None, f"cannot read the file: {reason}")]) from None
        is_text = False
    else:
        raise CdsError([Problem(None, None, "a CDS must be given as bytes, text or a file path")])
    if len(raw) > MAX_BYTES:
        raise CdsError(
            [Problem(None, None, f"the document is larger than {MAX_BYTES // (1024 * 1024)} MiB")]
        )
    if not raw.strip():
        raise CdsError([Problem(None, None, "the document is empty")])
    return raw, is_text


def xml_parser(encoding: str | None = None) -> etree.XMLParser:
    return etree.XMLParser(
        encoding=encoding,
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        collect_ids=False,
    )


def _parse_xml(raw: bytes, is_text: bool) -> etree._Element:
    _refuse_declarations(raw)
    # Every element costs at least one '<': refuse a flood of them before building a tree.
    if raw.count(b"<") > 2 * MAX_ELEMENTS + 1000:
        raise CdsError([Problem(None, None, f"the document has more than {MAX_ELEMENTS} elements")])
    try:
        root = etree.fromstring(raw, xml_parser("utf-8" if is_text else None))
    except etree.XMLSyntaxError as error:
        line = error.lineno if isinstance(error.lineno, int) and error.lineno > 0 else None
        raise CdsError([Problem(line, None, _syntax_message(str(error.msg or error)))]) from None
    except (etree.LxmlError, ValueError, LookupError) as error:
        raise CdsError(
            [Problem(None, None, f"the document is not readable XML: {error}")]
        ) from None
    if root is None:
        raise CdsError([Problem(None, None, "the document is empty")])
    docinfo: Any = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None or docinfo.externalDTD is not None:
        raise CdsError([Problem(1, None, _DTD_MESSAGE)])
    _check_shape(root)
    return root


_DTD_MESSAGE = (
    "the document declares a DOCTYPE or entities, which a CDS must not do "
    "(they are refused for safety); remove the <!DOCTYPE ...> part"
)


def _refuse_declarations(raw: bytes) -> None:
    """Refuse DOCTYPE/ENTITY declarations before the XML parser sees them."""
    texts = [raw]
    if b"\x00" in raw[:4] or raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        # UTF-16/32 text hides the ASCII pattern; look at decoded copies too (which of them is
        # right does not matter: a declaration shows up in the right one).
        for encoding in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"):
            decoded = raw.decode(encoding, errors="ignore")
            texts.append(decoded.encode("utf-8", errors="replace"))
    for text in texts:
        match = _DECLARATION.search(text)
        if match:
            line = text.count(b"\n", 0, match.start()) + 1
            raise CdsError([Problem(line, None, _DTD_MESSAGE)])


def _check_shape(root: etree._Element) -> None:
    """Bound the document's shape before anything costly runs on it.

    libxml2's RELAX NG validation of free-order content grows faster than linearly with the
    number of siblings and attributes, so besides depth and size the number of children and
    attributes of one element is bounded too, tightly where a real CDS has only a few.
    """
    depth = 0
    count = 0
    for event, element in etree.iterwalk(root, events=("start", "end")):
        if event == "end":
            depth -= 1
            continue
        depth += 1
        count += 1
        line = line_of(element)
        if depth > MAX_DEPTH:
            raise CdsError(
                [
                    Problem(
                        line,
                        None,
                        f"elements are nested more than {MAX_DEPTH} levels deep; "
                        "a CDS never needs that many",
                    )
                ]
            )
        if count > MAX_ELEMENTS:
            raise CdsError(
                [Problem(None, None, f"the document has more than {MAX_ELEMENTS} elements")]
            )
        name = shown_name(element)
        if len(element.attrib) > MAX_ATTRIBUTES:
            raise CdsError(
                [Problem(line, name, f"<{name}> has more than {MAX_ATTRIBUTES} attributes")]
            )
        limit = _FEW_CHILDREN if local_name(element) in _FEW_CHILDREN_IN else MAX_CHILDREN
        if len(element) > limit:
            raise CdsError(
                [
                    Problem(
                        line,
                        name,
                        f"<{name}> holds more than {limit} elements; "
                        + (
                            "a CDS needs only a few here"
                            if limit == _FEW_CHILDREN
                            else "split it into several sets"
                        ),
                    )
                ]
            )


def _syntax_message(message: str) -> str:
    message = message.strip()
    message = re.sub(r",? line \d+, column \d+$", "", message)
    if "Document is empty" in message or "Start tag expected" in message:
        return "this is not an XML document (it should start with <content-set ...>)"
    found = re.match(r"Opening and ending tag mismatch: (\S+) line (\d+) and (\S+)", message)
    if found:
        opened, line, closed = found.groups()
        return f"</{closed}> does not close <{opened}> opened on line {line}"
    found = re.match(r"Premature end of data in tag (\S+) line (\d+)", message)
    if found:
        return f"the document ends before <{found.group(1)}> (line {found.group(2)}) is closed"
    if "amplification" in message or "entity reference loop" in message.lower():
        return _DTD_MESSAGE
    if "Excessive depth" in message:
        return f"elements are nested more than {MAX_DEPTH} levels deep; a CDS never needs that many"
    if "Extra content at the end of the document" in message:
        return "there is more after the end of the root element; a CDS has one root <content-set>"
    if "AttValue: \" or ' expected" in message:
        return "an attribute value must be in quotes"
    return f"the document is not well-formed XML: {message}"
