"""The typed model of a Content Descriptor Set (docs/cds.md, "The grammar").

Plain dataclasses: the parser builds them, the serialiser writes them back, the evaluator
reads them. Equality is structural, so ``parse(to_xml(x)) == x`` can be checked directly.

Unknown elements and attributes are kept in :class:`Extras` on the nearest model object,
addressed by a small path relative to that object's element (``""`` is the element itself,
``"time/between[1]"`` the second ``between`` of its time windows), so they land in the same
place when the document is written again.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, TypeAlias

from cds.errors import Problem

__all__ = [
    "DAY_NAMES",
    "DEFAULT_PRIORITY",
    "HASH_TYPES",
    "MAIN_ZONE",
    "PRIORITY_NAMES",
    "Constraints",
    "ContentItem",
    "ContentSet",
    "DateWindow",
    "DayWindow",
    "Document",
    "Extras",
    "Hash",
    "Layout",
    "Node",
    "PlaybackOrder",
    "PlaybackSync",
    "PlaybackTransition",
    "RequiredFile",
    "SetType",
    "Source",
    "TimeWindow",
    "Zone",
]

PlaybackOrder: TypeAlias = Literal["inorder", "reverseorder", "random"]
#: ``<playback sync="wall-clock">``: the set's items play on a grid fixed to wall-clock time
#: (an extension of ours: docs/cds.md, "Screens that change together"; :mod:`cds.syncgrid`).
PlaybackSync: TypeAlias = Literal["wall-clock"]
#: ``<playback transition="...">``: how the screen changes to an item (an extension of ours:
#: docs/cds.md, "Transitions"): a cross-fade, or a cut.
PlaybackTransition: TypeAlias = Literal["crossfade", "cut"]
SetType: TypeAlias = Literal["inline", "remote"]

#: Priority levels, lowest first; the index is the numeric level (0..4).
PRIORITY_NAMES: tuple[str, ...] = ("lowest", "low", "medium", "high", "highest")
DEFAULT_PRIORITY = 2
#: Day names, Monday first; the index is ``datetime.date.weekday()``.
DAY_NAMES: tuple[str, ...] = (
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
)
#: Hash types a ``requires-file`` may list, with the length of their hex digest. Ordered
#: strongest first: the content cache names a file by the first of them it lists.
HASH_TYPES: dict[str, int] = {"sha256": 64, "sha1": 40, "md5": 32}
#: The zone of every layout that takes JSON requests and full-screen documents.
MAIN_ZONE = "main"


@dataclass
class Extras:
    """Unknown attributes and elements, kept so they survive a round trip.

    ``attributes`` maps (path, attribute name) to its value; ``elements`` maps a path to the
    unknown child elements found there, each as canonical XML text (whitespace-only text
    removed), in document order.
    """

    attributes: dict[tuple[str, str], str] = field(default_factory=dict)
    elements: dict[str, list[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.attributes or self.elements)

    def add_attribute(self, path: str, name: str, value: str) -> None:
        self.attributes[(path, name)] = value

    def add_element(self, path: str, xml: str) -> None:
        self.elements.setdefault(path, []).append(xml)


@dataclass
class TimeWindow:
    """Time of day from ``start`` (inclusive) to ``end`` (exclusive).

    ``end`` before ``start`` crosses midnight; ``end == start`` is the whole day.
    """

    start: datetime.time
    end: datetime.time

    def contains(self, moment: datetime.time) -> bool:
        moment = moment.replace(tzinfo=None, fold=0)
        if self.start < self.end:
            return self.start <= moment < self.end
        if self.start > self.end:
            return moment >= self.start or moment < self.end
        return True

    def __str__(self) -> str:
        return f"{_clock(self.start)}-{_clock(self.end)}"


@dataclass
class DayWindow:
    """Days of the week, inclusive, Monday = 0; wraps past Sunday (friday..monday)."""

    start: int
    end: int

    def contains(self, weekday: int) -> bool:
        if self.start <= self.end:
            return self.start <= weekday <= self.end
        return weekday >= self.start or weekday <= self.end

    def __str__(self) -> str:
        return f"{DAY_NAMES[self.start]}-{DAY_NAMES[self.end]}"


@dataclass
class DateWindow:
    """Calendar dates, both inclusive."""

    start: datetime.date
    end: datetime.date

    def contains(self, day: datetime.date) -> bool:
        return self.start <= day <= self.end

    def __str__(self) -> str:
        if self.start == self.end:
            return self.start.isoformat()
        return f"{self.start.isoformat()} to {self.end.isoformat()}"


@dataclass
class Constraints:
    """``constraints > scheduling-constraints`` of a set or an item.

    None / empty means "not given here" (inherited from above, or the default).
    Several windows of one kind mean any of them.
    """

    order: PlaybackOrder | None = None
    avoid_context_switch: bool | None = None
    sync: PlaybackSync | None = None
    transition: PlaybackTransition | None = None
    times: list[TimeWindow] = field(default_factory=list)
    days: list[DayWindow] = field(default_factory=list)
    dates: list[DateWindow] = field(default_factory=list)
    priority: int | None = None
    preferred_duration: float | None = None
    extras: Extras = field(default_factory=Extras)

    def is_empty(self) -> bool:
        return (
            self.order is None
            and self.avoid_context_switch is None
            and self.sync is None
            and self.transition is None
            and not self.times
            and not self.days
            and not self.dates
            and self.priority is None
            and self.preferred_duration is None
            and not self.extras
        )

    def count(self) -> int:
        """How many constraints are given here (for summaries)."""
        return (
            (self.order is not None)
            + (self.avoid_context_switch is not None)
            + (self.sync is not None)
            + (self.transition is not None)
            + bool(self.times)
            + bool(self.days)
            + bool(self.dates)
            + (self.priority is not None)
            + (self.preferred_duration is not None)
        )


class Hash(NamedTuple):
    """A digest the file must match; ``type`` is md5, sha1 or sha256, ``digest`` lower-case hex."""

    type: str
    digest: str


class Source(NamedTuple):
    """Where to fetch a file; ``refresh`` in seconds (remote sets) or None."""

    uri: str
    refresh: float | None = None


@dataclass
class RequiredFile:
    """``requires-file``: the hashes a file must match and where to fetch it, in order."""

    sources: list[Source]
    hashes: list[Hash] = field(default_factory=list)
    extras: Extras = field(default_factory=Extras)


@dataclass
class ContentItem:
    """One thing to show: its first ``requires-file`` is the item's file."""

    files: list[RequiredFile]
    content_type: str | None = None
    size: int | None = None
    constraints: Constraints = field(default_factory=Constraints)
    extras: Extras = field(default_factory=Extras)

    @property
    def url(self) -> str:
        """The item's URL: the first source of its first file."""
        return self.files[0].sources[0].uri


@dataclass
class ContentSet:
    """A set of items and sets (inline), or a pointer to another CDS (remote).

    ``auth`` and ``feedback`` are kept as XML text: accepted, not interpreted.
    """

    name: str | None = None
    type: SetType = "inline"
    constraints: Constraints = field(default_factory=Constraints)
    children: list[Node] = field(default_factory=list)
    requires_file: RequiredFile | None = None
    auth: str | None = None
    feedback: str | None = None
    extras: Extras = field(default_factory=Extras)
    #: the screen split into zones (a document's root set only), or None: full screen
    layout: Layout | None = None

    def walk_items(self) -> list[ContentItem]:
        """Every item in this set and the sets below it, in document order."""
        found: list[ContentItem] = []
        for child in self.children:
            if isinstance(child, ContentItem):
                found.append(child)
            else:
                found.extend(child.walk_items())
        return found

    def walk_sets(self) -> list[ContentSet]:
        """This set and every set below it, in document order."""
        found: list[ContentSet] = [self]
        for child in self.children:
            if isinstance(child, ContentSet):
                found.extend(child.walk_sets())
        return found


Node: TypeAlias = ContentSet | ContentItem


@dataclass
class Zone:
    """``<zone>`` of a ``<layout>`` (an extension of ours: docs/cds.md, "Zones"): a region
    of the screen that plays the child set named ``set_name``. The box (fractions of the
    screen) and ``z`` are None where the zone leaves them to its layout's template."""

    name: str
    set_name: str
    x: float | None = None
    y: float | None = None
    width: float | None = None
    height: float | None = None
    z: int | None = None
    extras: Extras = field(default_factory=Extras)


@dataclass
class Layout:
    """``<layout>`` of a document's root set: the screen split into zones, each playing one
    of the set's child sets (:mod:`cds.layouts` has the templates and the boxes)."""

    zones: list[Zone]
    template: str | None = None
    extras: Extras = field(default_factory=Extras)


@dataclass
class Document:
    """A parsed CDS: its root set, the ``uri`` of a subscription-update wrapper if it had one,
    and the warnings found while parsing (not part of equality)."""

    root: ContentSet
    wrapper_uri: str | None = None
    warnings: list[Problem] = field(default_factory=list, compare=False)


def _clock(moment: datetime.time) -> str:
    return moment.strftime("%H:%M:%S" if moment.second else "%H:%M")
