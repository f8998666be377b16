"""Read a CDS document into the model, safely, with errors a person can act on.

:func:`parse` runs the three layers in turn: :mod:`cds.guard` refuses hostile input before it
costs anything (size, depth, element counts, DTDs and entities); the walk here (on
:class:`cds.read_constraints.ConstraintsReader`) builds the model and words each problem for
a person scheduling a screen; and :mod:`cds.relaxng` checks the schema, whose verdict is used
when the walk found nothing (so the schema stays the definition of the grammar, and a gap in
either shows up).

:func:`parse` raises :class:`~cds.errors.CdsError` and nothing else, whatever the input.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator, Sized
from urllib.parse import urlsplit

from lxml import etree

from cds.durations import parse_duration
from cds.elements import local_name, short, shown_attribute, shown_name
from cds.errors import CdsError, Problem
from cds.guard import load
from cds.layouts import CLOCK_TYPE, clock_format
from cds.model import (
    HASH_TYPES,
    Constraints,
    ContentItem,
    ContentSet,
    Document,
    Extras,
    Hash,
    Layout,
    Node,
    RequiredFile,
    SetType,
    Source,
)
from cds.read_constraints import ConstraintsReader
from cds.read_layout import check_layout_sets, check_video_zones, read_layout
from cds.relaxng import schema_problems
from cds.streams import STREAM_SCHEMES, stream_uri_problem
from cds.walk import KNOWN_ELEMENTS, LEGACY, MAX_PROBLEMS, WRAPPERS

__all__ = ["parse"]

log = logging.getLogger("pdn.cds")

# Where a remote set's CDS may come from; a content item is http or https only, a live
# stream's rtsp, rtsps or srt (cds.streams), a data: image or text where the item says it is an
# image or a ticker's text, or pdn:clock where it says it is a clock: nothing a display shows
# comes from its own disk (file:), runs as an address (javascript:) or is built into it (qrc:).
URI_SCHEMES = ("http", "https", "file")
ITEM_SCHEMES = ("http", "https")
# Whether the display takes a content item's address, and if not why (its allowed origins).
UriCheck = Callable[[str], str | None]
_SIZE = re.compile(r"^(\d+)\s*(?:bytes?)?$", re.IGNORECASE)
_HEX = re.compile(r"^[0-9a-f]+$")


def parse(
    data: bytes | str | os.PathLike[str],
    *,
    filename: str | None = None,
    check_item: UriCheck | None = None,
    video_zones: int | None = None,
) -> Document:
    """Parse a CDS from bytes, text, or a file path; raise CdsError saying what is wrong.

    ``filename`` names the document in the log. Messages never repeat it: callers put it
    in front (``FILE:LINE: message``). ``check_item`` is asked about every content item's
    address; what it says is refused, at the line of that ``<uri>``. ``video_zones``: a
    ``<layout>`` whose zones could play more videos at once is refused, at its line
    (:func:`cds.layouts.video_zones`; None: not checked).
    """
    try:
        return _Builder(check_item, video_zones).document(load(data))
    except CdsError:
        raise
    except RecursionError:
        raise CdsError([Problem(None, None, "the document nests elements too deeply")]) from None
    except Exception as error:  # a bug here must not take down the caller: say so, log it
        log.exception("unexpected error while parsing the CDS %s", filename or "")
        raise CdsError(
            [Problem(None, None, f"the document could not be read ({type(error).__name__})")]
        ) from error


def _in_line_order(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda problem: problem.line or 0)


class _Builder(ConstraintsReader):
    """The walk over a whole document: the root, its sets and items, and their files."""

    def __init__(self, check_item: UriCheck | None = None, video_zones: int | None = None) -> None:
        super().__init__()
        self.check_item = check_item
        self.video_zones = video_zones
        # Each set built so far and its element, for problems found once its children are.
        self.sets: dict[int, etree._Element] = {}

    # -- document

    def document(self, root: etree._Element) -> Document:
        name = local_name(root)
        wrapper_uri: str | None = None
        set_element: etree._Element | None = None
        if name in WRAPPERS:
            wrapper_uri = self.wrapper(root)
            sets = [child for child in self.children(root) if local_name(child) == "content-set"]
            for child in self.children(root):
                child_name = local_name(child)
                if child_name == "content-set":
                    continue
                if child_name in KNOWN_ELEMENTS:
                    self.unknown_element(root, child, Extras(), "")  # says what is wrong
                else:
                    self.warn(
                        child,
                        f"<{shown_name(child)}> inside <{name}> is not part of the CDS grammar; "
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
                f"<{shown_name(root)}> is in the XML namespace '{etree.QName(root).namespace}'; "
                "CDS elements use no namespace (remove the xmlns=... attribute)",
            )
        else:
            self.error(
                root,
                f"the document's root element is <{shown_name(root)}>; a CDS starts with "
                '<content-set name="..."> (optionally inside <subscription-update>)',
            )
        content_set = self.content_set(set_element, root=True) if set_element is not None else None
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
                    f"attribute {shown_attribute(element, attribute)} on <{shown_name(element)}> "
                    "is not part of the CDS grammar; it is ignored",
                )
        uri = element.get("uri")
        if uri is None:
            self.warn(element, f"<{shown_name(element)}> has no uri attribute")
            return None
        return uri.strip()

    def validate(self, root: etree._Element) -> None:
        """The schema's verdict, for whatever the walk did not already catch."""
        for problem in schema_problems(root):
            if len(self.errors) < MAX_PROBLEMS:
                self.errors.append(problem)

    # -- sets and items

    def content_set(self, element: etree._Element, *, root: bool = False) -> ContentSet:
        """A ``<content-set>``; ``root``: the document's own, the one a ``<layout>`` may split."""
        extras = Extras()
        self.unknown_attributes(element, ("name", "type"), extras, "")
        self.check_text(element)
        constraints: Constraints | None = None
        requires: RequiredFile | None = None
        children: list[Node] = []
        child_elements: list[tuple[Node, etree._Element]] = []
        kept: dict[str, str] = {}
        layouts: list[etree._Element] = []
        for child in self.children(element):
            name = local_name(child)
            if name == "content-set":
                children.append(self.content_set(child))
                child_elements.append((children[-1], child))
            elif name == "content-item":
                children.append(self.content_item(child))
                child_elements.append((children[-1], child))
            elif name == "layout":
                layouts.append(child)
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
        content_set = ContentSet(
            name=set_name,
            type=set_type,
            constraints=constraints or Constraints(),
            children=children,
            requires_file=requires,
            auth=kept.get("auth"),
            feedback=kept.get("feedback"),
            extras=extras,
            layout=self.layout(element, layouts, child_elements, root=root),
        )
        self.sets[id(content_set)] = element
        if content_set.constraints.sync is not None:
            self.check_sync(element, content_set)
        if content_set.layout is not None and self.video_zones is not None and not self.errors:
            check_video_zones(self, layouts[0], content_set, self.video_zones)
        return content_set

    def layout(
        self,
        element: etree._Element,
        layouts: list[etree._Element],
        children: list[tuple[Node, etree._Element]],
        *,
        root: bool,
    ) -> Layout | None:
        """The set's ``<layout>`` (docs/cds.md, "Zones"): one at most, on the root set only."""
        if not layouts:
            return None
        for extra in layouts[1:]:
            self.error(extra, "a <content-set> has at most one <layout>")
        if not root:
            self.error(
                layouts[0],
                "a <layout> splits the screen for a whole schedule: it belongs on the "
                "document's root <content-set>, not on a set inside it",
            )
            return None
        layout = read_layout(self, layouts[0])
        if element.get("type", "").strip().lower() == "remote":
            self.error(
                layouts[0],
                'a <layout> needs the sets its zones play in the document: not on a type="remote" '
                "set",
            )
        check_layout_sets(self, element, layout, children)
        played = {zone.set_name for zone in layout.zones}
        for node, _ in children:
            if not isinstance(node, ContentSet) or node.name not in played:
                continue
            for inner in node.walk_sets():
                if inner.type == "remote":
                    self.error(
                        self.sets.get(id(inner), element),
                        "a zone's set cannot hold a remote <content-set>: a zone plays what "
                        "the document holds (put the remote set in a full-screen schedule)",
                    )
        return layout

    def check_sync(self, element: etree._Element, content_set: ContentSet) -> None:
        """A synchronised set's grid must be the same on every display, from the document
        alone: its items are its own, inline, and no set inside it has a grid of its own."""
        if content_set.type == "remote":
            self.error(
                element,
                '<playback sync="wall-clock"> needs the set\'s items in the document: put it '
                "on an inline set (a remote set's items are fetched later, by each display)",
            )
        for inner in content_set.walk_sets()[1:]:
            inner_element = self.sets.get(id(inner), element)
            if inner.constraints.sync is not None:
                self.error(
                    inner_element,
                    "a synchronised set cannot hold another synchronised set: the outer "
                    "set's grid already places every item below it",
                )
            elif inner.type == "remote":
                self.error(
                    inner_element,
                    "a remote <content-set> cannot be inside a set with <playback "
                    'sync="wall-clock">: every display must know the grid from the document',
                )

    def set_type(self, element: etree._Element, *, has_children: bool, has_file: bool) -> SetType:
        given = element.get("type")
        if given is None:
            # docs/cds.md, "The grammar": inline when it has children, else remote; an empty
            # set with no file is an (empty) inline set, which is how a schedule is withdrawn.
            return "remote" if has_file and not has_children else "inline"
        value = given.strip().lower()
        if value == "inline":
            return "inline"
        if value == "remote":
            return "remote"
        self.error(element, f"<content-set> type must be inline or remote, got '{short(given)}'")
        return "inline"

    def content_item(self, element: etree._Element) -> ContentItem:
        extras = Extras()
        self.unknown_attributes(element, ("content-type", "size"), extras, "")
        self.check_text(element)
        constraints: Constraints | None = None
        files: list[RequiredFile] = []
        for child in self.children(element):
            name = local_name(child)
            if name == "constraints":
                if constraints is not None:
                    self.error(child, "a <content-item> has at most one <constraints>")
                constraints = self.constraints(child, on_item=True)
            elif name == "requires-file":
                files.append(self.required_file(child, element.get("content-type") or ""))
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
                    f"got '{short(size_text)}'",
                )
        return ContentItem(
            files=files,
            content_type=content_type.strip() if content_type is not None else None,
            size=size,
            constraints=constraints or Constraints(),
            extras=extras,
        )

    # -- files

    def required_file(self, element: etree._Element, item_type: str | None = None) -> RequiredFile:
        """A ``<requires-file>``: of a content item whose content-type is ``item_type``, or
        (None) of a remote set."""
        extras = Extras()
        self.unknown_attributes(element, (), extras, "requires-file")
        self.check_text(element)
        hashes: list[Hash] = []
        sources: list[Source] = []
        seen: set[str] = set()
        for child in self.children(element):
            name = local_name(child)
            if name in ("hashes", "sources"):
                if name in seen:
                    self.error(child, f"<requires-file> has at most one <{name}>")
                seen.add(name)
            if name == "hashes":
                self.hashes(child, hashes, extras)
            elif name == "sources":
                self.sources(child, sources, extras, item_type)
            else:
                self.unknown_element(element, child, extras, "requires-file")
        if "sources" not in seen:
            self.error(
                element,
                "<requires-file> needs <sources> with at least one <uri>address of the file</uri>",
            )
        return RequiredFile(sources=sources, hashes=hashes, extras=extras)

    def entries(
        self, element: etree._Element, container: str, entry: str, into: Sized, extras: Extras
    ) -> Iterator[tuple[etree._Element, str]]:
        """The ``entry`` children of a list element (``<hashes>``, ``<sources>``), each with
        the path its unknown attributes are kept under (numbered by what ``into`` holds when
        it is reached); anything else in the list is kept or refused as unknown."""
        self.unknown_attributes(element, (), extras, container)
        self.check_text(element)
        for child in self.children(element):
            if local_name(child) != entry:
                self.unknown_element(element, child, extras, container)
                continue
            yield child, f"{container}/{entry}[{len(into)}]"

    def hashes(self, element: etree._Element, into: list[Hash], extras: Extras) -> None:
        for child, path in self.entries(element, "hashes", "hash", into, extras):
            kind = (child.get("type") or "").strip().lower()
            digest = self.leaf_text(child).lower()
            if kind not in HASH_TYPES:
                self.error(
                    child,
                    "<hash> type must be md5, sha1 or sha256, "
                    f"got '{short(child.get('type') or '')}'",
                )
                continue
            length = HASH_TYPES[kind]
            if not _HEX.match(digest) or len(digest) != length:
                self.error(
                    child,
                    f'<hash type="{kind}"> needs a digest of {length} hexadecimal digits, '
                    f"got '{short(digest)}'",
                )
                continue
            self.unknown_attributes(child, ("type",), extras, path)
            into.append(Hash(kind, digest))

    def sources(
        self,
        element: etree._Element,
        into: list[Source],
        extras: Extras,
        item_type: str | None = None,
    ) -> None:
        for child, path in self.entries(element, "sources", "uri", into, extras):
            uri = self.leaf_text(child)
            problem = uri_problem(uri) if item_type is None else item_uri_problem(uri, item_type)
            if problem is None and item_type is not None and self.check_item is not None:
                refused = self.check_item(uri)
                if refused:
                    problem = f"<uri> '{short(uri)}': {refused}"
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
        if not into and not any(local_name(child) == "uri" for child in self.children(element)):
            self.error(element, "<sources> needs at least one <uri>address of the file</uri>")


def item_uri_problem(uri: str, item_type: str) -> str | None:
    """Why ``uri`` cannot be the address of a content item whose content-type is
    ``item_type`` (None when it can): http or https, a live stream's rtsp, rtsps or srt, a
    data: image of an image item, a data:text/plain text of a text ticker, or the pdn:clock
    address of a clock."""
    scheme = uri.split(":", 1)[0].strip().lower() if ":" in uri else ""
    media = item_type.split(";", maxsplit=1)[0].strip().lower()
    if media == CLOCK_TYPE:
        try:
            clock_format(uri)
        except ValueError as error:
            return f"<uri> '{short(uri)}': {error} (like pdn:clock?format=HH:mm)"
        return None
    if scheme == "data":
        data_type = uri[5:].split(",", 1)[0].split(";", maxsplit=1)[0].strip().lower()
        if "," in uri and (
            (media.startswith("image/") and data_type.startswith("image/"))
            or (media == "text/plain" and data_type in ("text/plain", ""))
        ):
            return None
        return (
            f"<uri> '{short(uri)}': a data: address is taken only for an image, on a "
            '<content-item content-type="image/...">, or for a ticker\'s text, on a '
            '<content-item content-type="text/plain">'
        )
    if scheme in STREAM_SCHEMES:
        problem = stream_uri_problem(uri)
        return None if problem is None else f"<uri> {problem}"
    if scheme and scheme not in ITEM_SCHEMES:
        return (
            f"<uri> '{short(uri)}': a content item must be an http or https address "
            f"(like https://example.org/a.html), or a live stream's rtsp://, rtsps:// or "
            f"srt://, not {short(scheme)}:"
        )
    return uri_problem(uri)


def uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be a source (None when it can)."""
    if not uri:
        return "<uri> is empty; write the address of the file, like https://example.org/a.html"
    if any(character.isspace() for character in uri):
        return f"<uri> '{short(uri)}' contains a space; write spaces as %20"
    try:
        parts = urlsplit(uri)
    except ValueError:
        return f"<uri> '{short(uri)}' is not a valid address"
    if parts.scheme.lower() not in URI_SCHEMES:
        return (
            f"<uri> '{short(uri)}' must be an absolute http, https or file address "
            "(like https://example.org/a.html)"
        )
    if parts.scheme.lower() in ("http", "https") and not parts.netloc:
        return f"<uri> '{short(uri)}' has no host name"
    return None
