"""Read a CDS document into the model, safely, with errors a person can act on.

Hostile input is refused before it costs anything: the document is bounded in size (8 MiB),
depth (64 levels) and number of elements; DTDs and entity declarations are refused outright
(so billion-laughs and external-entity documents never expand), and lxml runs with entity
resolution, DTD loading and network access off.

Every document is checked twice: by the walk below, which builds the model and words each
problem for a person scheduling a screen, and by the RELAX NG schema in ``cds/schema/``,
whose verdict is used when the walk found nothing (so the schema stays the definition of the
grammar, and a gap in either shows up).

:func:`parse` raises :class:`~cds.errors.CdsError` and nothing else, whatever the input.
"""

from __future__ import annotations

import datetime
import logging
import os
import re
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any, TypeVar
from urllib.parse import urlsplit

from lxml import etree

from cds.durations import parse_duration
from cds.errors import CdsError, Problem
from cds.model import (
    DAY_NAMES,
    HASH_TYPES,
    PRIORITY_NAMES,
    Constraints,
    ContentItem,
    ContentSet,
    DateWindow,
    DayWindow,
    Document,
    Extras,
    Hash,
    Node,
    PlaybackOrder,
    RequiredFile,
    SetType,
    Source,
    TimeWindow,
)

__all__ = [
    "MAX_BYTES",
    "MAX_CHILDREN",
    "MAX_DEPTH",
    "MAX_ELEMENTS",
    "parse",
    "schema",
    "schema_problems",
]

log = logging.getLogger("pdn.cds")

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
# Enough to fix a document in one go, without drowning the reader.
MAX_PROBLEMS = 50

WRAPPERS = ("subscription-update", "subscription_update")
LEGACY: dict[str, str] = {
    "content-collection": (
        "<content-collection> is an old form that this player cannot give a safe meaning; "
        'the root of a CDS is <content-set name="...">'
    ),
    "play-on": (
        "<play-on> is an old form that this player cannot give a safe meaning; "
        'write the times as <between start="09:00" end="17:00"/> inside <time>'
    ),
    "http-source": (
        "<http-source> is an old form that this player cannot give a safe meaning; "
        "list the file's addresses as <sources><uri>https://...</uri></sources> "
        "inside <requires-file>"
    ),
}
_CONSTRAINT_ELEMENTS = (
    "playback",
    "time",
    "day-of-week",
    "date",
    "between",
    "priority",
    "preferred-duration",
)
_FILE_ELEMENTS = ("hashes", "hash", "sources", "uri")
KNOWN_ELEMENTS = frozenset(
    (
        "content-set",
        "content-item",
        "auth",
        "feedback",
        "constraints",
        "scheduling-constraints",
        "requires-file",
        *_CONSTRAINT_ELEMENTS,
        *_FILE_ELEMENTS,
        *WRAPPERS,
        *LEGACY,
    )
)
URI_SCHEMES = ("http", "https", "file")

_DECLARATION = re.compile(rb"<!\s*(DOCTYPE|ENTITY|ELEMENT|ATTLIST)", re.IGNORECASE)
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_SIZE = re.compile(r"^(\d+)\s*(?:bytes?)?$", re.IGNORECASE)
_HEX = re.compile(r"^[0-9a-f]+$")
_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
_ORDERS: tuple[PlaybackOrder, ...] = ("inorder", "reverseorder", "random")
W = TypeVar("W")


@cache
def schema() -> etree.RelaxNG:
    """The CDS grammar (``cds/schema/cds.rng``), loaded once."""
    text = resources.files("cds").joinpath("schema/cds.rng").read_bytes()
    return etree.RelaxNG(etree.fromstring(text, _xml_parser()))


def parse(data: bytes | str | os.PathLike[str], *, filename: str | None = None) -> Document:
    """Parse a CDS from bytes, text, or a file path; raise CdsError saying what is wrong.

    ``filename`` names the document in the log. Messages never repeat it: callers put it
    in front (``FILE:LINE: message``).
    """
    try:
        raw, is_text = _read(data)
        root = _parse_xml(raw, is_text)
        return _Builder().document(root)
    except CdsError:
        raise
    except RecursionError:
        raise CdsError([Problem(None, None, "the document nests elements too deeply")]) from None
    except Exception as error:  # a bug here must not take down the caller: say so, log it
        log.exception("unexpected error while parsing the CDS %s", filename or "")
        raise CdsError(
            [Problem(None, None, f"the document could not be read ({type(error).__name__})")]
        ) from error


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


def _xml_parser(encoding: str | None = None) -> etree.XMLParser:
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
        root = etree.fromstring(raw, _xml_parser("utf-8" if is_text else None))
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
        line = _line(element)
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
        name = _shown(element)
        if len(element.attrib) > MAX_ATTRIBUTES:
            raise CdsError(
                [Problem(line, name, f"<{name}> has more than {MAX_ATTRIBUTES} attributes")]
            )
        limit = _FEW_CHILDREN if _local(element) in _FEW_CHILDREN_IN else MAX_CHILDREN
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


# ----------------------------------------------------------------------------- the walk


def _line(element: etree._Element) -> int | None:
    line = element.sourceline
    return line if isinstance(line, int) and line > 0 else None


def _local(element: etree._Element) -> str | None:
    """The name of a CDS element (no namespace), or None for anything else."""
    tag = element.tag
    if not isinstance(tag, str) or tag.startswith("{"):
        return None
    return tag


def _shown(element: etree._Element) -> str:
    tag = element.tag
    if not isinstance(tag, str):
        return "?"
    if tag.startswith("{"):
        prefix = element.prefix
        local = etree.QName(element).localname
        return f"{prefix}:{local}" if prefix else local
    return tag


def _shown_attribute(element: etree._Element, name: str) -> str:
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


def _in_line_order(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda problem: problem.line or 0)


def _short(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Builder:
    def __init__(self) -> None:
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []
        self.unknown_budget = MAX_UNKNOWN_ELEMENTS

    def keep(self, element: etree._Element) -> str:
        """An unknown (or auth/feedback) element as text, within the document's budget."""
        size = sum(1 for _ in element.iter())
        self.unknown_budget -= size
        if self.unknown_budget < 0 <= self.unknown_budget + size:
            self.error(
                element,
                f"the document has more than {MAX_UNKNOWN_ELEMENTS} elements that are not part "
                "of the CDS grammar; is it a CDS?",
            )
        return canonical_xml(element) if self.unknown_budget >= 0 else ""

    # -- reporting

    def error(self, element: etree._Element | None, message: str) -> None:
        if len(self.errors) < MAX_PROBLEMS:
            line = _line(element) if element is not None else None
            name = _shown(element) if element is not None else None
            self.errors.append(Problem(line, name, message))

    def warn(self, element: etree._Element, message: str) -> None:
        if len(self.warnings) < MAX_PROBLEMS:
            self.warnings.append(Problem(_line(element), _shown(element), message))

    def unknown_element(
        self, parent: etree._Element, child: etree._Element, extras: Extras, path: str
    ) -> None:
        """Keep an element the grammar does not know; refuse CDS elements out of place."""
        name = _local(child)
        where = _shown(parent)
        if name in LEGACY:
            self.error(child, LEGACY[name])
        elif name in KNOWN_ELEMENTS:
            if name in _CONSTRAINT_ELEMENTS or name == "scheduling-constraints":
                hint = "; constraints go inside <constraints><scheduling-constraints>"
                if name == "between":
                    hint = "; <between> goes inside <time>, <day-of-week> or <date>"
            elif name in _FILE_ELEMENTS:
                hint = "; files are described inside <requires-file> (<hashes>, <sources><uri>)"
            elif name in ("content-set", "content-item"):
                hint = "; sets and items go inside a <content-set>"
            else:
                hint = ""
            self.error(child, f"<{name}> does not belong inside <{where}>{hint}")
        else:
            extras.add_element(path, self.keep(child))
            self.warn(
                child,
                f"<{_shown(child)}> inside <{where}> is not part of the CDS grammar; "
                "it is ignored (and kept when the CDS is written out again)",
            )

    def unknown_attributes(
        self, element: etree._Element, known: tuple[str, ...], extras: Extras, path: str
    ) -> None:
        for raw_name, raw_value in element.attrib.items():
            name, value = str(raw_name), str(raw_value)
            if name in known:
                continue
            extras.add_attribute(path, name, value)
            self.warn(
                element,
                f'attribute {_shown_attribute(element, name)}="{_short(value)}" on '
                f"<{_shown(element)}> is not part of the CDS grammar; it is ignored "
                "(and kept when the CDS is written out again)",
            )

    def check_text(self, element: etree._Element) -> None:
        """Container elements hold elements only (whitespace anywhere is fine)."""
        text = element.text
        if text is None or not text.strip():
            text = next((c.tail for c in element if c.tail is not None and c.tail.strip()), None)
        if text is not None and text.strip():
            self.error(
                element,
                f"<{_shown(element)}> contains the text '{_short(text)}' outside any "
                "element; text belongs only in <uri>, <hash> and <preferred-duration>",
            )

    def leaf_text(self, element: etree._Element) -> str:
        """The text of an element that holds only text (uri, hash, preferred-duration)."""
        children = list(element)
        if children:
            self.error(
                children[0],
                f"<{_shown(element)}> holds only text, not elements like <{_shown(children[0])}>",
            )
        return (element.text or "").strip()

    @staticmethod
    def children(element: etree._Element) -> list[etree._Element]:
        return [child for child in element if isinstance(child.tag, str)]

    # -- document

    def document(self, root: etree._Element) -> Document:
        name = _local(root)
        wrapper_uri: str | None = None
        set_element: etree._Element | None = None
        if name in WRAPPERS:
            wrapper_uri = self.wrapper(root)
            sets = [child for child in self.children(root) if _local(child) == "content-set"]
            for child in self.children(root):
                child_name = _local(child)
                if child_name == "content-set":
                    continue
                if child_name in KNOWN_ELEMENTS:
                    self.unknown_element(root, child, Extras(), "")  # says what is wrong
                else:
                    self.warn(
                        child,
                        f"<{_shown(child)}> inside <{name}> is not part of the CDS grammar; "
                        "it is ignored",
                    )
            if len(sets) != 1:
                self.error(
                    root,
                    f"<{name}> must hold exactly one <content-set>, found {len(sets)}",
                )
            else:
                set_element = sets[0]
        elif name in LEGACY:
            self.error(root, LEGACY[name])
        elif name == "content-set":
            set_element = root
        elif isinstance(root.tag, str) and etree.QName(root).localname in (
            "content-set",
            *WRAPPERS,
        ):
            self.error(
                root,
                f"<{_shown(root)}> is in the XML namespace '{etree.QName(root).namespace}'; "
                "CDS elements use no namespace (remove the xmlns=... attribute)",
            )
        else:
            self.error(
                root,
                f"the document's root element is <{_shown(root)}>; a CDS starts with "
                '<content-set name="..."> (optionally inside <subscription-update>)',
            )
        content_set = self.content_set(set_element) if set_element is not None else None
        if not self.errors:
            self.validate(root)
        if self.errors or content_set is None:
            raise CdsError(_in_line_order(self.errors))
        return Document(
            root=content_set, wrapper_uri=wrapper_uri, warnings=_in_line_order(self.warnings)
        )

    def wrapper(self, element: etree._Element) -> str | None:
        self.check_text(element)
        for attribute in map(str, element.attrib):
            if attribute != "uri":
                self.warn(
                    element,
                    f"attribute {_shown_attribute(element, attribute)} on <{_shown(element)}> "
                    "is not part of the CDS grammar; it is ignored",
                )
        uri = element.get("uri")
        if uri is None:
            self.warn(element, f"<{_shown(element)}> has no uri attribute")
            return None
        return uri.strip()

    def validate(self, root: etree._Element) -> None:
        """The schema's verdict, for whatever the walk did not already catch."""
        for problem in schema_problems(root):
            if len(self.errors) < MAX_PROBLEMS:
                self.errors.append(problem)

    # -- sets and items

    def content_set(self, element: etree._Element) -> ContentSet:
        extras = Extras()
        self.unknown_attributes(element, ("name", "type"), extras, "")
        self.check_text(element)
        constraints: Constraints | None = None
        requires: RequiredFile | None = None
        children: list[Node] = []
        kept: dict[str, str] = {}
        for child in self.children(element):
            name = _local(child)
            if name == "content-set":
                children.append(self.content_set(child))
            elif name == "content-item":
                children.append(self.content_item(child))
            elif name == "constraints":
                if constraints is not None:
                    self.error(child, "a <content-set> has at most one <constraints>")
                constraints = self.constraints(child)
            elif name == "requires-file":
                if requires is not None:
                    self.error(child, "a <content-set> has at most one <requires-file>")
                requires = self.required_file(child)
            elif name in ("auth", "feedback"):
                if name in kept:
                    self.error(child, f"a <content-set> has at most one <{name}>")
                kept[name] = self.keep(child)
            else:
                self.unknown_element(element, child, extras, "")
        set_name = element.get("name")
        set_type = self.set_type(element, has_children=bool(children), has_file=bool(requires))
        if set_type == "remote":
            if children:
                self.error(
                    element,
                    "a remote <content-set> cannot hold items or sets: its content comes "
                    "from the CDS named in its <requires-file>",
                )
            if requires is None:
                self.error(
                    element,
                    'a <content-set type="remote"> needs <requires-file><sources><uri>'
                    "address of its CDS</uri></sources></requires-file>",
                )
        elif requires is not None:
            self.error(
                element,
                '<requires-file> on a <content-set> is only for type="remote" sets (where to '
                "fetch the set's CDS); put files inside <content-item>",
            )
        return ContentSet(
            name=set_name,
            type=set_type,
            constraints=constraints or Constraints(),
            children=children,
            requires_file=requires,
            auth=kept.get("auth"),
            feedback=kept.get("feedback"),
            extras=extras,
        )

    def set_type(self, element: etree._Element, *, has_children: bool, has_file: bool) -> SetType:
        given = element.get("type")
        if given is None:
            # CDS.md: inline when it has children, else remote; an empty set with no file is
            # an (empty) inline set, which is how a schedule is withdrawn.
            return "remote" if has_file and not has_children else "inline"
        value = given.strip().lower()
        if value == "inline":
            return "inline"
        if value == "remote":
            return "remote"
        self.error(element, f"<content-set> type must be inline or remote, got '{_short(given)}'")
        return "inline"

    def content_item(self, element: etree._Element) -> ContentItem:
        extras = Extras()
        self.unknown_attributes(element, ("content-type", "size"), extras, "")
        self.check_text(element)
        constraints: Constraints | None = None
        files: list[RequiredFile] = []
        for child in self.children(element):
            name = _local(child)
            if name == "constraints":
                if constraints is not None:
                    self.error(child, "a <content-item> has at most one <constraints>")
                constraints = self.constraints(child)
            elif name == "requires-file":
                files.append(self.required_file(child))
            else:
                self.unknown_element(element, child, extras, "")
        if not files:
            self.error(
                element,
                "a <content-item> needs a <requires-file> with <sources><uri>address of the "
                "content</uri></sources>",
            )
        content_type = element.get("content-type")
        size: int | None = None
        size_text = element.get("size")
        if size_text is not None:
            found = _SIZE.match(size_text.strip())
            if found:
                size = int(found.group(1))
            else:
                self.error(
                    element,
                    f"<content-item> size must be a number of bytes like '1234 bytes', "
                    f"got '{_short(size_text)}'",
                )
        return ContentItem(
            files=files,
            content_type=content_type.strip() if content_type is not None else None,
            size=size,
            constraints=constraints or Constraints(),
            extras=extras,
        )

    # -- constraints

    def constraints(self, element: etree._Element) -> Constraints:
        result = Constraints()
        self.unknown_attributes(element, (), result.extras, "constraints")
        self.check_text(element)
        seen = False
        for child in self.children(element):
            if _local(child) == "scheduling-constraints":
                if seen:
                    self.error(child, "<constraints> has at most one <scheduling-constraints>")
                seen = True
                self.scheduling(child, result)
            else:
                self.unknown_element(element, child, result.extras, "constraints")
        return result

    def scheduling(self, element: etree._Element, result: Constraints) -> None:
        extras = result.extras
        self.unknown_attributes(element, (), extras, "scheduling-constraints")
        self.check_text(element)
        once: set[str] = set()
        for child in self.children(element):
            name = _local(child)
            if name in ("playback", "priority", "preferred-duration"):
                if name in once:
                    self.error(child, f"<scheduling-constraints> has at most one <{name}>")
                once.add(name)
            if name == "playback":
                self.playback(child, result)
            elif name == "time":
                self.windows(child, "time", result.times, self.time_window, extras)
            elif name == "day-of-week":
                self.windows(child, "day-of-week", result.days, self.day_window, extras)
            elif name == "date":
                self.windows(child, "date", result.dates, self.date_window, extras)
            elif name == "priority":
                self.priority(child, result)
            elif name == "preferred-duration":
                self.unknown_attributes(child, (), extras, "preferred-duration")
                text = self.leaf_text(child)
                try:
                    result.preferred_duration = parse_duration(text)
                except ValueError as error:
                    self.error(child, f"<preferred-duration>: {error}")
            else:
                self.unknown_element(element, child, extras, "scheduling-constraints")

    def playback(self, element: etree._Element, result: Constraints) -> None:
        self.unknown_attributes(
            element, ("order", "avoid-context-switch"), result.extras, "playback"
        )
        self.check_text(element)
        for child in self.children(element):
            self.unknown_element(element, child, result.extras, "playback")
        order = element.get("order")
        if order is not None:
            value = order.strip().lower()
            for known in _ORDERS:
                if value == known:
                    result.order = known
                    break
            else:
                self.error(
                    element,
                    f"<playback> order must be inorder, reverseorder or random, "
                    f"got '{_short(order)}'",
                )
        avoid = element.get("avoid-context-switch")
        if avoid is not None:
            flag = _BOOLEANS.get(avoid.strip().lower())
            if flag is None:
                self.error(
                    element,
                    f"<playback> avoid-context-switch must be true or false, got '{_short(avoid)}'",
                )
            else:
                result.avoid_context_switch = flag

    def priority(self, element: etree._Element, result: Constraints) -> None:
        self.unknown_attributes(element, ("level",), result.extras, "priority")
        self.check_text(element)
        for child in self.children(element):
            self.unknown_element(element, child, result.extras, "priority")
        level = element.get("level")
        if level is None:
            self.error(element, '<priority> needs a level, like <priority level="high"/>')
            return
        value = level.strip().lower()
        if value in PRIORITY_NAMES:
            result.priority = PRIORITY_NAMES.index(value)
        elif value in ("0", "1", "2", "3", "4"):
            result.priority = int(value)
        else:
            self.error(
                element,
                "<priority> level must be lowest, low, medium, high or highest (or 0 to 4), "
                f"got '{_short(level)}'",
            )

    def windows(
        self,
        element: etree._Element,
        kind: str,
        into: list[W],
        read: Callable[[etree._Element, str], W | None],
        extras: Extras,
    ) -> None:
        """``time``, ``day-of-week`` or ``date``: one or more ``between`` (any of them)."""
        self.unknown_attributes(element, (), extras, kind)
        self.check_text(element)
        count = 0
        for child in self.children(element):
            if _local(child) in LEGACY:
                count += 1  # refused on its own; "needs a between" would only repeat it
            if _local(child) == "between":
                count += 1
                window = read(child, kind)
                path = f"{kind}/between[{len(into)}]"
                if window is not None:
                    into.append(window)
                self.unknown_attributes(child, ("start", "end"), extras, path)
                self.check_text(child)
                for grandchild in self.children(child):
                    self.unknown_element(child, grandchild, extras, path)
            else:
                self.unknown_element(element, child, extras, kind)
        if count == 0:
            example = {
                "time": 'start="09:00" end="17:00"',
                "day-of-week": 'start="monday" end="friday"',
                "date": 'start="2026-12-01" end="2026-12-24"',
            }[kind]
            self.error(element, f"<{kind}> needs at least one <between {example}/>")

    def _bounds(self, element: etree._Element, kind: str, what: str) -> tuple[str, str] | None:
        start, end = element.get("start"), element.get("end")
        missing = [name for name, value in (("start", start), ("end", end)) if value is None]
        if missing:
            self.error(
                element,
                f"<between> in <{kind}> needs {' and '.join(missing)}, like {what}",
            )
            return None
        assert start is not None and end is not None
        return start, end

    def time_window(self, element: etree._Element, kind: str) -> TimeWindow | None:
        bounds = self._bounds(element, kind, 'start="09:00" end="17:00"')
        if bounds is None:
            return None
        parsed = [
            self.clock(element, kind, label, text)
            for label, text in zip(("start", "end"), bounds, strict=True)
        ]
        if parsed[0] is None or parsed[1] is None:
            return None
        return TimeWindow(parsed[0], parsed[1])

    def clock(
        self, element: etree._Element, kind: str, label: str, text: str
    ) -> datetime.time | None:
        found = _CLOCK.match(text.strip())
        if found:
            hour, minute = int(found.group(1)), int(found.group(2))
            second = int(found.group(3) or 0)
            if hour == 24 and minute == 0 and second == 0:
                return datetime.time(0, 0)  # 24:00 ends at midnight
            if hour < 24 and minute < 60 and second < 60:
                return datetime.time(hour, minute, second)
        self.error(
            element,
            f"<between> in <{kind}> needs {label} like 09:00 or 09:00:00, got '{_short(text)}'",
        )
        return None

    def day_window(self, element: etree._Element, kind: str) -> DayWindow | None:
        bounds = self._bounds(element, kind, 'start="monday" end="friday"')
        if bounds is None:
            return None
        days: list[int] = []
        for label, text in zip(("start", "end"), bounds, strict=True):
            value = text.strip().lower()
            for index, day in enumerate(DAY_NAMES):
                if value in (day, day[:3]):
                    days.append(index)
                    break
            else:
                self.error(
                    element,
                    f"<between> in <{kind}> needs {label} as a day name such as monday or mon, "
                    f"got '{_short(text)}'",
                )
        return DayWindow(days[0], days[1]) if len(days) == 2 else None

    def date_window(self, element: etree._Element, kind: str) -> DateWindow | None:
        bounds = self._bounds(element, kind, 'start="2026-12-01" end="2026-12-24"')
        if bounds is None:
            return None
        dates: list[datetime.date] = []
        for label, text in zip(("start", "end"), bounds, strict=True):
            value = text.strip()
            if not _DATE.match(value):
                self.error(
                    element,
                    f"<between> in <{kind}> needs {label} as a date like 2026-12-24, "
                    f"got '{_short(text)}'",
                )
                continue
            try:
                dates.append(datetime.date.fromisoformat(value))
            except ValueError:
                self.error(
                    element,
                    f"<between> in <{kind}>: {label} '{value}' is not a date in the calendar",
                )
        if len(dates) != 2:
            return None
        if dates[1] < dates[0]:
            self.error(
                element,
                f"<between> in <{kind}> ends ({dates[1].isoformat()}) before it starts "
                f"({dates[0].isoformat()})",
            )
            return None
        return DateWindow(dates[0], dates[1])

    # -- files

    def required_file(self, element: etree._Element) -> RequiredFile:
        extras = Extras()
        self.unknown_attributes(element, (), extras, "requires-file")
        self.check_text(element)
        hashes: list[Hash] = []
        sources: list[Source] = []
        seen: set[str] = set()
        for child in self.children(element):
            name = _local(child)
            if name in ("hashes", "sources"):
                if name in seen:
                    self.error(child, f"<requires-file> has at most one <{name}>")
                seen.add(name)
            if name == "hashes":
                self.hashes(child, hashes, extras)
            elif name == "sources":
                self.sources(child, sources, extras)
            else:
                self.unknown_element(element, child, extras, "requires-file")
        if "sources" not in seen:
            self.error(
                element,
                "<requires-file> needs <sources> with at least one <uri>address of the file</uri>",
            )
        return RequiredFile(sources=sources, hashes=hashes, extras=extras)

    def hashes(self, element: etree._Element, into: list[Hash], extras: Extras) -> None:
        self.unknown_attributes(element, (), extras, "hashes")
        self.check_text(element)
        for child in self.children(element):
            if _local(child) != "hash":
                self.unknown_element(element, child, extras, "hashes")
                continue
            path = f"hashes/hash[{len(into)}]"
            kind = (child.get("type") or "").strip().lower()
            digest = self.leaf_text(child).lower()
            if kind not in HASH_TYPES:
                self.error(
                    child,
                    "<hash> type must be md5, sha1 or sha256, "
                    f"got '{_short(child.get('type') or '')}'",
                )
                continue
            length = HASH_TYPES[kind]
            if not _HEX.match(digest) or len(digest) != length:
                self.error(
                    child,
                    f'<hash type="{kind}"> needs a digest of {length} hexadecimal digits, '
                    f"got '{_short(digest)}'",
                )
                continue
            self.unknown_attributes(child, ("type",), extras, path)
            into.append(Hash(kind, digest))

    def sources(self, element: etree._Element, into: list[Source], extras: Extras) -> None:
        self.unknown_attributes(element, (), extras, "sources")
        self.check_text(element)
        for child in self.children(element):
            if _local(child) != "uri":
                self.unknown_element(element, child, extras, "sources")
                continue
            path = f"sources/uri[{len(into)}]"
            uri = self.leaf_text(child)
            problem = uri_problem(uri)
            if problem:
                self.error(child, problem)
                continue
            refresh: float | None = None
            refresh_text = child.get("refresh")
            if refresh_text is not None:
                try:
                    refresh = parse_duration(refresh_text)
                except ValueError as error:
                    self.error(child, f"<uri> refresh: {error}")
                    continue
            self.unknown_attributes(child, ("refresh",), extras, path)
            into.append(Source(uri, refresh))
        if not into and not any(_local(child) == "uri" for child in self.children(element)):
            self.error(element, "<sources> needs at least one <uri>address of the file</uri>")


def schema_problems(root: etree._Element) -> list[Problem]:
    """What the RELAX NG schema finds wrong with a parsed document, in people's words."""
    validator = schema()
    if validator.validate(root):
        return []
    found: list[Problem] = []
    for entry in validator.error_log:
        line = entry.line if entry.line > 0 else None
        problem = Problem(line, None, _schema_message(entry.message))
        if problem not in found:
            found.append(problem)
    # libxml2 reports the first real fault, then every enclosing element as failing too;
    # those echoes help nobody. Keep them only when there is nothing better.
    specific = [p for p in found if not any(echo in p.message for echo in _SCHEMA_ECHOES)]
    if specific:
        return specific
    if found:
        return found[:1]
    return [Problem(_line(root), None, "the document does not follow the CDS grammar")]


_SCHEMA_ECHOES = ("holds something not allowed", "in interleave")


def uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be a source (None when it can)."""
    if not uri:
        return "<uri> is empty; write the address of the file, like https://example.org/a.html"
    if any(character.isspace() for character in uri):
        return f"<uri> '{_short(uri)}' contains a space; write spaces as %20"
    try:
        parts = urlsplit(uri)
    except ValueError:
        return f"<uri> '{_short(uri)}' is not a valid address"
    if parts.scheme.lower() not in URI_SCHEMES:
        return (
            f"<uri> '{_short(uri)}' must be an absolute http, https or file address "
            "(like https://example.org/a.html)"
        )
    if parts.scheme.lower() in ("http", "https") and not parts.netloc:
        return f"<uri> '{_short(uri)}' has no host name"
    return None


_SCHEMA_MESSAGES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"Element (\S+) has extra content: (\S+)"),
        "<{1}> is not allowed inside <{0}> here",
    ),
    (re.compile(r"Expecting an element (\S+), got nothing"), "a <{0}> element is missing here"),
    (re.compile(r"Expecting element (\S+), got (\S+)"), "expected <{0}> here, found <{1}>"),
    (re.compile(r"Did not expect element (\S+) there"), "<{0}> is not allowed here"),
    (
        re.compile(r"Invalid attribute (\S+) for element (\S+)"),
        "<{1}> has an attribute {0} that is not allowed or has a wrong value",
    ),
    (
        re.compile(r"Element (\S+) failed to validate attributes"),
        "<{0}> has an attribute that is missing, not allowed or has a wrong value",
    ),
    (re.compile(r"Type (\S+) doesn't allow value '(.*)'"), "the value '{1}' is not allowed here"),
    (re.compile(r"Datatype element (\S+) has child elements"), "<{0}> must hold only text"),
    (re.compile(r"Element (\S+) failed to validate content"), "<{0}> holds something not allowed"),
)


def _schema_message(message: str) -> str:
    for pattern, template in _SCHEMA_MESSAGES:
        found = pattern.search(message)
        if found:
            return template.format(*found.groups())
    return f"the document does not follow the CDS grammar ({message.strip()})"
