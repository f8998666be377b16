"""A region's ticker or clock (``zoneitems.py``) as a layer: the third kind beside the web slots
and the pictures and videos. :func:`make_zone_item` makes the object an item asks for;
:class:`ZoneItemLayer` holds it with its QML item (``Region.qml`` makes ``Ticker.qml`` or
``Clock.qml`` when the region's stack asks, as it makes web views) until it is cleared: the
object closed (its feed reader or timer stops) and the QML item destroyed. ``native.py``'s
:class:`~player.renderer.native.ZoneItems` shows them through the region's stack.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtQuick import QQuickItem

from cds.layouts import clock_format
from player.feeds import FeedSpec, refresh_seconds
from player.playitem import PlayItem
from player.renderer.content import Kind
from player.renderer.options import RendererOptions
from player.renderer.zoneitems import Clock, Ticker, ZoneItem

ZONE_ITEMS = (Kind.TICKER, Kind.CLOCK)


def identity(item: PlayItem) -> tuple[str, str | None, float | None]:
    return item.source_url, item.content_type, item.refresh


class ZoneItemLayer:
    """One ticker or clock on its way to the front, or in front: its object and QML item."""

    def __init__(
        self, item: PlayItem, thing: ZoneItem, view: QQuickItem, drop: Callable[[QQuickItem], None]
    ) -> None:
        self._drop = drop
        self.item = item
        self.thing = thing
        self.view: QQuickItem | None = view
        self.identity = identity(item)

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
            self._drop(view)
        self.thing.deleteLater()


def make_zone_item(item: PlayItem, kind: Kind, options: RendererOptions) -> ZoneItem:
    """The ticker or clock ``item`` asks for (ValueError or FeedError when it cannot be)."""
    if kind is Kind.CLOCK:
        return Clock(clock_format(item.url), options.time_zone)
    ticker = Ticker(speed=options.ticker_speed)
    refresh = refresh_seconds(item.refresh)
    ticker.follow(FeedSpec(item.url, item.content_type, refresh), options.data_dir)
    return ticker
