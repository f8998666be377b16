"""The screen split into zones: a layout's boxes on the stage, and a renderer per zone.

A layout (``cds.layouts``: each zone's name, its box as fractions of the screen as people see
it, and its z) splits the screen: ``qml/Stage.qml`` lays the main zone's region out in its box
(the region is declared once and keeps playing through every change of layout) and makes one
more region per other zone, by a Repeater over the zones Python sets (:class:`ZoneRegions`),
each handed back to Python as it is made. Each region has its own
:class:`~player.renderer.region.RegionPlayer`: its own layer stack, pending item, cross-fades,
and web views made only when it shows a page. The old layout's other zones go and the new
one's come in the same turn of the GUI thread, so the screen changes between two frames.

The zone engine (``player.zones``) drives the kiosk as its ``ZoneScreen``: it splits the
screen and talks to each zone through its own :class:`player.playitem.Renderer` (the kiosk for
main, a :class:`ZoneRenderer` for the others), whose listener is that zone's engine.
:class:`ScreenZones` holds the regions by zone, each zone's due gate and listener, and routes
between them: an item to the region of its zone, a report back to the listener of the zone
whose region showed (or could not show) it. The tokens of the items are unique on the whole
screen.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, QRect, QRectF, Slot
from PySide6.QtQuick import QQuickItem

from cds.model import MAIN_ZONE
from player.playitem import PlayItem, Renderer, RendererListener
from player.renderer.content import IDLE_TOKEN, Kind, classify
from player.renderer.duegate import DueGate, SwitchTrace
from player.renderer.stage import Stage, StageError

if TYPE_CHECKING:
    from player.renderer.region import RegionPlayer, RegionReports

log = logging.getLogger("pdn.renderer")


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


class KioskSide(Protocol):
    """What the zones ask of the whole screen (the kiosk)."""

    def show_idle(self) -> None: ...
    def render_crashed(self, description: str) -> bool: ...


#: Makes the region of a zone in its Region.qml item, reporting to ``reports``.
MakeRegion = Callable[[str, QQuickItem, "RegionReports"], "RegionPlayer"]


class ScreenZones(QObject):
    """The regions of the screen by zone (``main`` always one), each zone's due gate and
    listener; a :class:`ZoneHost` for the zones' renderers and reports. GUI thread only."""

    def __init__(
        self,
        stage: Stage,
        main: RegionPlayer,
        make_region: MakeRegion,
        switch_trace: SwitchTrace,
        video_zones: int,
        kiosk: KioskSide,
        parent: QObject,
    ) -> None:
        super().__init__(parent)
        self._stage = stage
        self._make_region = make_region
        self._switch_trace = switch_trace
        self._video_zones = video_zones
        self._kiosk = kiosk
        self._closed = False
        self.regions: dict[str, RegionPlayer] = {MAIN_ZONE: main}
        self.dues: dict[str, DueGate] = {MAIN_ZONE: self._gate(MAIN_ZONE)}
        self._listeners: dict[str, RendererListener] = {}
        self._stage_side = ZoneRegions(stage)
        self._laid_out: tuple[ZoneBox, ...] = (FULL_SCREEN,)
        self._renderers: dict[str, ZoneRenderer] = {}
        #: The layout set splitting the screen (None: the main zone fills it).
        self.layout_name: str | None = None

    @property
    def split(self) -> bool:
        """Whether a layout splits the screen (the main zone is in a box of its own)."""
        return self._laid_out != (FULL_SCREEN,)

    def set_layout(self, name: str | None, zones: Sequence[Box] | None) -> None:
        """See :meth:`player.renderer.kiosk.KioskRenderer.set_layout`."""
        main, others = checked_boxes(zones)
        if self._closed:
            return
        boxes = (main, *others)
        self.layout_name = name if boxes != (FULL_SCREEN,) else None
        if boxes == self._laid_out:
            return
        for zone in [z for z in self.regions if z != MAIN_ZONE]:
            self._drop_zone(zone)
        made = self._stage_side.lay_out(main, others)
        for box in others:
            region = self._make_region(box.name, made[box.name], ZoneReports(self, box.name))
            self.regions[box.name] = region
            self.dues[box.name] = self._gate(box.name)
            region.start()
        self._laid_out = boxes
        log.info(
            "screen: %s",
            f"layout {name!r}: {', '.join(b.name for b in boxes)}" if others else "full screen",
        )
        self._stage.request_frame()

    def renderer(self, zone: str) -> Renderer:
        """The renderer of a zone other than main."""
        return self._renderers.setdefault(zone, ZoneRenderer(self, zone))

    # -- ZoneHost ---------------------------------------------------------------------------

    def set_zone_listener(self, zone: str, listener: RendererListener) -> None:
        self._listeners[zone] = listener

    def prepare_in(self, zone: str, item: PlayItem) -> None:
        region = self.regions.get(zone)
        if not self._closed and region is not None and self._video_refused(region, item) is None:
            region.prepare(item)

    def show_in(self, zone: str, item: PlayItem) -> None:
        """Show ``item`` in ``zone``'s region (reported failed if the screen has no such zone
        now, or if its video would open more video zones than ``[screen] video-zones``)."""
        if self._closed:
            return
        region = self.regions.get(zone)
        reason = (
            f"the screen has no zone {zone!r} now"
            if region is None
            else self._video_refused(region, item)
        )
        if region is None or reason is not None:
            log.warning("cannot show %s in zone %s: %s", item.url, zone, reason)
            self.zone_item_failed(zone, item, reason or "")
            return
        gate = self.dues[zone]
        gate.cancel()
        if gate.hold(item):  # released on its instant to _show_due
            region.prepare(item)  # prepared already, as a rule: then this does nothing
            return
        region.show(item)

    def show_nothing(self, zone: str) -> None:
        """Nothing to show in ``zone`` (the idle page, for the main zone)."""
        region = self.regions.get(zone)
        if zone == MAIN_ZONE:
            self._kiosk.show_idle()
        elif region is not None and not self._closed:
            self.dues[zone].cancel()
            region.show_nothing()
            self.zone_idle_shown(zone)

    def zone_item_shown(self, zone: str, item: PlayItem, natural: float | None) -> None:
        listener = self._listeners.get(zone)
        if listener is not None:
            listener.item_shown(item.token, datetime.now(UTC), natural)

    def zone_idle_shown(self, zone: str) -> None:
        listener = self._listeners.get(zone)
        if listener is not None:
            listener.idle_shown(datetime.now(UTC))

    def zone_item_failed(self, zone: str, item: PlayItem, reason: str) -> None:
        listener = self._listeners.get(zone)
        if item.token != IDLE_TOKEN and listener is not None:
            listener.item_failed(item.token, reason)

    def zone_item_ended(self, zone: str, item: PlayItem) -> None:
        listener = self._listeners.get(zone)
        if listener is not None:
            listener.item_ended(item.token)

    def render_crashed(self, description: str) -> bool:
        return self._kiosk.render_crashed(description)

    # -- for the kiosk and its watchdog -----------------------------------------------------

    def watched(self) -> list[tuple[str, RegionPlayer, QRect]]:
        """Each zone other than main, its region and its rectangle on the window."""
        return [
            (zone, region, item_rect(region.item))
            for zone, region in self.regions.items()
            if zone != MAIN_ZONE
        ]

    def main_rect(self) -> QRect | None:
        """The main zone's rectangle while a layout splits the screen (None: all of it)."""
        return item_rect(self.regions[MAIN_ZONE].item) if self.split else None

    def recover(self, zone: str, problem: str) -> None:
        region = self.regions.get(zone)
        if region is not None:
            region.recover(problem)

    def switch_imminent(self) -> bool:
        return any(gate.held is not None for gate in self.dues.values())

    def close(self) -> None:
        """Every zone's gate and region stops (the main zone's region too)."""
        self._closed = True
        for gate in self.dues.values():
            gate.cancel()
        for region in self.regions.values():
            region.close()
        self._stage_side.close()

    def _show_due(self, zone: str, item: PlayItem) -> None:
        region = self.regions.get(zone)
        if not self._closed and region is not None:
            region.show(item)

    def _gate(self, zone: str) -> DueGate:
        return DueGate(
            self, lambda item: self._show_due(zone, item), self._switch_trace.gate_opened
        )

    def _drop_zone(self, zone: str) -> None:
        """The region of a zone of the layout before goes (with every timer of it)."""
        gate = self.dues.pop(zone)
        gate.cancel()
        gate.deleteLater()
        region = self.regions.pop(zone)
        region.close()
        region.deleteLater()

    def _video_refused(self, region: RegionPlayer, item: PlayItem) -> str | None:
        """Why ``item`` may not play in ``region``: a video while ``[screen] video-zones``
        other zones play one (each zone's region has decoders of its own)."""
        if classify(item) is not Kind.VIDEO:
            return None
        playing = [z for z, r in self.regions.items() if r is not region and r.plays_video()]
        if len(playing) < self._video_zones:
            return None
        return (
            f"[screen] video-zones is {self._video_zones} and zones "
            f"{', '.join(playing)} play videos"
        )
