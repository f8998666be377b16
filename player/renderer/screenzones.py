"""The screen split into zones: a layout's boxes on the stage, and a renderer per zone.

A layout (``cds.layouts``: each zone's name, its box as fractions of the screen as people see
it, and its z) splits the screen: ``qml/Stage.qml`` lays the main zone's region out in its box
(the region is declared once and keeps playing through every change of layout) and makes one
more region per other zone, by a Repeater over the zones Python sets (:class:`ZoneRegions`),
each handed back to Python as it is made. Each region has its own
:class:`~player.renderer.region.RegionPlayer`: its own layer stack, pending item, cross-fades,
and web views made only when it shows a page. The old layout's other zones go and the new
one's come in the same turn of the GUI thread, so the screen changes between two frames.

The zone engine (``player.zones``) drives a :class:`ZoneScreen`: it splits the screen and
talks to each zone through its own :class:`player.playitem.Renderer` (:class:`ZoneRenderer`),
whose listener is that zone's engine. The tokens of the items are unique on the whole screen;
each report goes to the listener of the zone whose region showed (or could not show) the item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from PySide6.QtCore import QObject, QRect, QRectF, Slot
from PySide6.QtQuick import QQuickItem

from cds.model import MAIN_ZONE
from player.playitem import PlayItem, RendererListener
from player.renderer.stage import Stage, StageError


class Box(Protocol):
    """A zone's place on the screen (``cds.layouts.ZoneBox`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def x(self) -> float: ...
    @property
    def y(self) -> float: ...
    @property
    def width(self) -> float: ...
    @property
    def height(self) -> float: ...
    @property
    def z(self) -> int: ...


class Layout(Protocol):
    """A layout set's name and its zones' boxes (``player.zones.ScreenLayout`` is one)."""

    @property
    def name(self) -> str | None: ...
    @property
    def zones(self) -> Sequence[Box]: ...


@dataclass(frozen=True)
class ZoneBox:
    """A zone's box, checked: fractions of the screen within it, a zone of its own name."""

    name: str
    x: float
    y: float
    width: float
    height: float
    z: int

    @classmethod
    def of(cls, box: Box) -> ZoneBox:
        x, y, width, height = (float(v) for v in (box.x, box.y, box.width, box.height))
        inside = 0 <= x < 1 and 0 <= y < 1 and width > 0 and height > 0
        if not inside or x + width > 1 + 1e-9 or y + height > 1 + 1e-9:
            raise ValueError(f"zone {box.name!r}: its box is not within the screen")
        return cls(str(box.name), x, y, width, height, int(box.z))

    def as_qml(self) -> dict[str, object]:
        return {
            "name": self.name,
            "x": self.x,
            "y": self.y,
            "width": self.width,
            "height": self.height,
            "z": self.z,
        }


FULL_SCREEN = ZoneBox(MAIN_ZONE, 0.0, 0.0, 1.0, 1.0, 0)


def checked_boxes(zones: Sequence[Box] | None) -> tuple[ZoneBox, list[ZoneBox]]:
    """The main zone's box and the others', checked (None or no zones: full screen)."""
    if not zones:
        return FULL_SCREEN, []
    boxes = [ZoneBox.of(zone) for zone in zones]
    names = [box.name for box in boxes]
    if len(set(names)) != len(names):
        raise ValueError(f"a layout names a zone twice: {names}")
    main = next((box for box in boxes if box.name == MAIN_ZONE), None)
    if main is None:
        raise ValueError(f"a layout has no zone {MAIN_ZONE!r}: {names}")
    return main, [box for box in boxes if box is not main]


class ZoneRegions(QObject):
    """The stage's side of a layout: sets the boxes ``Stage.qml`` lays its regions out by, and
    takes the regions its Repeater makes for the other zones. GUI thread only."""

    def __init__(self, stage: Stage) -> None:
        super().__init__(stage)
        self._root = stage.root
        self._made: dict[str, QQuickItem] = {}
        self._root.setProperty("zoneHost", self)

    @Slot(str, QObject)
    def adoptRegion(self, name: str, item: QObject | None) -> None:  # noqa: N802  (QML calls it)
        """Stage.qml hands over the region it has just made for zone ``name``."""
        if isinstance(item, QQuickItem):
            self._made[name] = item

    def lay_out(self, main: ZoneBox, others: list[ZoneBox]) -> dict[str, QQuickItem]:
        """Put the main zone's region in ``main`` and make a region for each of ``others``
        (those of the layout before go): the regions made, by zone name."""
        self._made = {}
        root = self._root
        root.setProperty("mainBox", QRectF(main.x, main.y, main.width, main.height))
        root.setProperty("mainZ", main.z)
        root.setProperty("zones", [box.as_qml() for box in others])
        made, self._made = self._made, {}
        missing = [box.name for box in others if box.name not in made]
        if missing:
            raise StageError(f"Stage.qml made no region for the zones {missing}")
        return made

    def close(self) -> None:
        self._root.setProperty("zoneHost", None)


def item_rect(item: QQuickItem) -> QRect:
    """``item``'s rectangle in the window's pixels (rotation included), as a grab shows it."""
    scene = item.mapRectToScene(QRectF(0, 0, item.width(), item.height()))
    return scene.toAlignedRect()


class ZoneHost(Protocol):
    """What the zones' renderers and reports talk to (the kiosk)."""

    def set_zone_listener(self, zone: str, listener: RendererListener) -> None: ...
    def prepare_in(self, zone: str, item: PlayItem) -> None: ...
    def show_in(self, zone: str, item: PlayItem) -> None: ...
    def show_nothing(self, zone: str) -> None: ...
    def zone_item_shown(self, zone: str, item: PlayItem, natural: float | None) -> None: ...
    def zone_idle_shown(self, zone: str) -> None: ...
    def zone_item_failed(self, zone: str, item: PlayItem, reason: str) -> None: ...
    def zone_item_ended(self, zone: str, item: PlayItem) -> None: ...
    def render_crashed(self, description: str) -> bool: ...


class ZoneRenderer:
    """The :class:`player.playitem.Renderer` of one zone other than main: what its engine asks
    goes to the kiosk with the zone named, and what its region reports comes back to its
    engine (:meth:`set_listener`)."""

    def __init__(self, kiosk: ZoneHost, zone: str) -> None:
        self._kiosk = kiosk
        self.zone = zone

    def set_listener(self, listener: RendererListener) -> None:
        self._kiosk.set_zone_listener(self.zone, listener)

    def prepare(self, item: PlayItem) -> None:
        self._kiosk.prepare_in(self.zone, item)

    def show(self, item: PlayItem) -> None:
        self._kiosk.show_in(self.zone, item)

    def show_idle(self) -> None:
        """Nothing to show in this zone: its region shows nothing."""
        self._kiosk.show_nothing(self.zone)


class ZoneReports:
    """What the region of a zone other than main reports (``region.RegionReports``), passed to
    that zone's listener."""

    def __init__(self, kiosk: ZoneHost, zone: str) -> None:
        self._kiosk = kiosk
        self.zone = zone

    def item_shown(self, item: PlayItem, natural: float | None) -> None:
        self._kiosk.zone_item_shown(self.zone, item, natural)

    def idle_shown(self) -> None:
        self._kiosk.zone_idle_shown(self.zone)

    def item_failed(self, item: PlayItem, reason: str) -> None:
        self._kiosk.zone_item_failed(self.zone, item, reason)

    def item_ended(self, item: PlayItem) -> None:
        self._kiosk.zone_item_ended(self.zone, item)

    def render_crashed(self, description: str) -> bool:
        return self._kiosk.render_crashed(description)

    def idle_wanted(self) -> None:
        self._kiosk.show_nothing(self.zone)
