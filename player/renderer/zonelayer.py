"""A region's ticker or clock (``zoneitems.py``): the third kind of layer beside the web slots
and the native media. Each show of a new one makes its object and asks the region's stack for
its QML item (``Region.qml`` makes ``Ticker.qml`` or ``Clock.qml`` when asked, as it makes web
views); once the object says a frame with its text has reached the window (``painted``), the
stack brings the item in front and the region reports it shown. What it covers is cleared as
any layer is; a ticker or clock that is covered, or superseded before it was shown, is
closed (its feed reader or timer stops) and its QML item destroyed.

A show of the ticker or clock already in front (the same address, type and refresh: the
zone's set of one item turns round) keeps it as it is, scrolling on, and reports the new
play shown at once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject
from PySide6.QtQuick import QQuickItem

from cds.layouts import clock_format
from player.feeds import FeedError, FeedSpec, refresh_seconds
from player.playitem import PlayItem
from player.renderer.content import Kind
from player.renderer.options import RendererOptions
from player.renderer.zoneitems import Clock, Ticker, ZoneItem

if TYPE_CHECKING:
    from player.renderer.layerstack import LayerStack, Pending

log = logging.getLogger("pdn.renderer")

ZONE_ITEMS = (Kind.TICKER, Kind.CLOCK)


class ZoneItemReports(Protocol):
    """What a region's ticker or clock tells the region (its :class:`RegionPlayer`)."""

    def now_showing(self, pending: Pending, natural: float | None) -> None: ...
    def failed(self, item: PlayItem, reason: str, on_screen: bool = False) -> None: ...


def _identity(item: PlayItem) -> tuple[str, str | None, float | None]:
    return item.source_url, item.content_type, item.refresh


class ZoneItemLayer:
    """One ticker or clock on its way to the front, or in front: its object and QML item."""

    def __init__(self, stack: LayerStack, item: PlayItem, thing: ZoneItem, view: QQuickItem):
        self._stack = stack
        self.item = item
        self.thing = thing
        self.view: QQuickItem | None = view
        self.identity = _identity(item)

    def front_item(self) -> QQuickItem | None:
        return self.view

    def isVisible(self) -> bool:  # noqa: N802  (as a Qt item says it)
        return self.view is not None and self.view.isVisible()

    def describe(self) -> str:
        kind = "ticker" if isinstance(self.thing, Ticker) else "clock"
        return f"{kind} {self.item.source_url}"

    def clear(self) -> None:
        """Stop what the object owns and destroy the QML item (idempotent)."""
        self.thing.close()
        view, self.view = self.view, None
        if view is not None:
            self._stack.drop(view)
        self.thing.deleteLater()


class ZoneItems(QObject):
    """The tickers and clocks of one region, shown through its :class:`LayerStack`."""

    def __init__(
        self,
        stack: LayerStack,
        options: RendererOptions,
        reports: ZoneItemReports,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._stack = stack
        self._options = options
        self._reports = reports
        self._loading: ZoneItemLayer | None = None
        self._serial = 0

    def show(self, item: PlayItem, kind: Kind) -> None:
        """Bring ``item`` (a ticker or a clock) on its way to the front."""
        from player.renderer.layerstack import Pending

        self.abandon()
        front = self._stack.layer
        if isinstance(front, ZoneItemLayer) and front.identity == _identity(item):
            front.item = item  # the same ticker or clock goes on: this play is on screen now
            self._reports.now_showing(Pending(item, kind), None)
            return
        try:
            thing = self._make(item, kind)
        except (ValueError, FeedError) as error:
            self._reports.failed(item, str(error))
            return
        properties: dict[str, object] = {"ticker" if kind is Kind.TICKER else "clock": thing}
        try:
            view = self._stack.create_zone_item(kind.value, properties)
        except Exception as error:  # QML could not make it (the log says why)
            thing.close()
            self._reports.failed(item, str(error))
            return
        self._serial += 1
        serial = self._serial
        layer = ZoneItemLayer(self._stack, item, thing, view)
        self._loading = layer
        self._stack.pending = Pending(item, kind, serial=serial)
        thing.painted.connect(lambda: self._painted(layer, serial))
        if thing.is_painted:
            self._painted(layer, serial)

    def _make(self, item: PlayItem, kind: Kind) -> ZoneItem:
        if kind is Kind.CLOCK:
            return Clock(clock_format(item.url), self._options.time_zone)
        ticker = Ticker(speed=self._options.ticker_speed)
        refresh = refresh_seconds(item.refresh)
        ticker.follow(FeedSpec(item.url, item.content_type, refresh), self._options.data_dir)
        return ticker

    def _painted(self, layer: ZoneItemLayer, serial: int) -> None:
        pending = self._stack.pending
        if layer is not self._loading or pending is None or pending.serial != serial:
            return
        if pending.kind not in ZONE_ITEMS:
            return
        self._loading = None
        self._stack.pending = None
        self._stack.swap_to(layer, None, layer.item.cut)
        self._reports.now_showing(pending, None)

    def abandon(self) -> None:
        """A ticker or clock on its way that another show supersedes is closed."""
        loading, self._loading = self._loading, None
        if loading is not None and loading is not self._stack.layer:
            loading.clear()

    def close(self) -> None:
        self.abandon()
        front = self._stack.layer
        if isinstance(front, ZoneItemLayer):
            front.clear()
