"""Read ``<constraints><scheduling-constraints>`` into :class:`~cds.model.Constraints`:
playback order and sync, priority, preferred duration, and the time, day-of-week and date
windows, each value checked and each problem worded for the person who wrote it.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import TypeVar

from lxml import etree

from cds.durations import parse_duration
from cds.elements import local_name, short
from cds.model import (
    DAY_NAMES,
    PRIORITY_NAMES,
    Constraints,
    DateWindow,
    DayWindow,
    Extras,
    PlaybackOrder,
    PlaybackTransition,
    TimeWindow,
)
from cds.walk import LEGACY, Walk

__all__ = ["ConstraintsReader"]

_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
_ORDERS: tuple[PlaybackOrder, ...] = ("inorder", "reverseorder", "random")
_TRANSITIONS: tuple[PlaybackTransition, ...] = ("crossfade", "cut")
W = TypeVar("W")


class ConstraintsReader(Walk):
    """The ``<constraints>`` part of the walk; :mod:`cds.parser` builds documents on it."""

    def constraints(self, element: etree._Element, *, on_item: bool = False) -> Constraints:
        """``on_item``: the constraints of a ``<content-item>`` (no ``sync`` there)."""
        result = Constraints()
        self.unknown_attributes(element, (), result.extras, "constraints")
        self.check_text(element)
        seen = False
        for child in self.children(element):
            if local_name(child) == "scheduling-constraints":
                if seen:
                    self.error(child, "<constraints> has at most one <scheduling-constraints>")
                seen = True
                self.scheduling(child, result, on_item)
            else:
                self.unknown_element(element, child, result.extras, "constraints")
        return result

    def scheduling(self, element: etree._Element, result: Constraints, on_item: bool) -> None:
        extras = result.extras
        self.unknown_attributes(element, (), extras, "scheduling-constraints")
        self.check_text(element)
        once: set[str] = set()
        for child in self.children(element):
            name = local_name(child)
            if name in ("playback", "priority", "preferred-duration"):
                if name in once:
                    self.error(child, f"<scheduling-constraints> has at most one <{name}>")
                once.add(name)
            if name == "playback":
                self.playback(child, result, on_item)
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

    def playback(self, element: etree._Element, result: Constraints, on_item: bool) -> None:
        self.unknown_attributes(
            element,
            ("order", "avoid-context-switch", "sync", "transition"),
            result.extras,
            "playback",
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
                    f"got '{short(order)}'",
                )
        avoid = element.get("avoid-context-switch")
        if avoid is not None:
            flag = _BOOLEANS.get(avoid.strip().lower())
            if flag is None:
                self.error(
                    element,
                    f"<playback> avoid-context-switch must be true or false, got '{short(avoid)}'",
                )
            else:
                result.avoid_context_switch = flag
        transition = element.get("transition")
        if transition is not None:
            value = transition.strip().lower()
            for kind in _TRANSITIONS:
                if value == kind:
                    result.transition = kind
                    break
            else:
                self.error(
                    element,
                    f"<playback> transition must be crossfade or cut, got '{short(transition)}'",
                )
        sync = element.get("sync")
        if sync is not None:
            if sync.strip().lower() != "wall-clock":
                self.error(
                    element,
                    f"<playback> sync must be wall-clock (the only kind there is), "
                    f"got '{short(sync)}'",
                )
            elif on_item:
                self.error(
                    element,
                    '<playback sync="wall-clock"> goes on a <content-set>: it puts the '
                    "set's items on one grid; a <content-item> alone has nothing to "
                    "synchronise",
                )
            else:
                result.sync = "wall-clock"

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
                f"got '{short(level)}'",
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
            if local_name(child) in LEGACY:
                count += 1  # refused on its own; "needs a between" would only repeat it
            if local_name(child) == "between":
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
            f"<between> in <{kind}> needs {label} like 09:00 or 09:00:00, got '{short(text)}'",
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
                    f"got '{short(text)}'",
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
                    f"got '{short(text)}'",
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
