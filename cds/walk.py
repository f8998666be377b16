"""The common ground of the readers that turn XML into the model: how problems are reported
(line, element, message; errors and warnings, at most 50 of each), how elements the grammar
does not know are kept in :class:`~cds.model.Extras` (so they survive a round trip) while CDS
elements out of place are refused, and the tables of element names that decide which is which.

:class:`Walk` is the base of :class:`cds.read_constraints.ConstraintsReader`, on which the
document builder in :mod:`cds.parser` stands.
"""

from __future__ import annotations

from lxml import etree

from cds.elements import canonical_xml, line_of, local_name, short, shown_attribute, shown_name
from cds.errors import Problem
from cds.guard import MAX_UNKNOWN_ELEMENTS
from cds.model import Extras

__all__ = ["KNOWN_ELEMENTS", "LEGACY", "MAX_PROBLEMS", "WRAPPERS", "Walk"]

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
        "layout",
        "zone",
        *_CONSTRAINT_ELEMENTS,
        *_FILE_ELEMENTS,
        *WRAPPERS,
        *LEGACY,
    )
)


class Walk:
    """A walk over one document: the problems found so far, and the budget for unknowns."""

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
            line = line_of(element) if element is not None else None
            name = shown_name(element) if element is not None else None
            self.errors.append(Problem(line, name, message))

    def warn(self, element: etree._Element, message: str) -> None:
        if len(self.warnings) < MAX_PROBLEMS:
            self.warnings.append(Problem(line_of(element), shown_name(element), message))

    def unknown_element(
        self, parent: etree._Element, child: etree._Element, extras: Extras, path: str
    ) -> None:
        """Keep an element the grammar does not know; refuse CDS elements out of place."""
        name = local_name(child)
        where = shown_name(parent)
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
            elif name in ("layout", "zone"):
                hint = "; a <layout> of <zone> elements goes on the document's root <content-set>"
            else:
                hint = ""
            self.error(child, f"<{name}> does not belong inside <{where}>{hint}")
        else:
            extras.add_element(path, self.keep(child))
            self.warn(
                child,
                f"<{shown_name(child)}> inside <{where}> is not part of the CDS grammar; "
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
                f'attribute {shown_attribute(element, name)}="{short(value)}" on '
                f"<{shown_name(element)}> is not part of the CDS grammar; it is ignored "
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
                f"<{shown_name(element)}> contains the text '{short(text)}' outside any "
                "element; text belongs only in <uri>, <hash> and <preferred-duration>",
            )

    def leaf_text(self, element: etree._Element) -> str:
        """The text of an element that holds only text (uri, hash, preferred-duration)."""
        children = list(element)
        if children:
            self.error(
                children[0],
                f"<{shown_name(element)}> holds only text, not elements like "
                f"<{shown_name(children[0])}>",
            )
        return (element.text or "").strip()

    @staticmethod
    def children(element: etree._Element) -> list[etree._Element]:
        return [child for child in element if isinstance(child.tag, str)]
