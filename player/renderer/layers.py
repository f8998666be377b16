"""A region's native layers besides pictures, videos, tickers and clocks: the idle cover and
the still of a web view; and :data:`Layer`, what can be in front of a region."""

from __future__ import annotations

from PySide6.QtQuick import QQuickItem

from player.renderer.idle import addresses
from player.renderer.imagelayer import ImageLayer
from player.renderer.stage import Stage, region_layer
from player.renderer.videolayer import VideoLayer
from player.renderer.webslot import WebSlot
from player.renderer.zonelayer import ZoneItemLayer


class Cover:
    """The idle facts drawn by Qt Quick (``qml/Cover.qml``): shown when no web view can be
    (a render process crash, a failed item with nothing behind it)."""

    def __init__(self, region: QQuickItem, name: str, api_url: str) -> None:
        # Over this panel's own tile, also on a video wall.
        self.item = region_layer(region, "cover")
        self.item.setProperty("name", name or "pdn display")
        self.item.setProperty("apiUrl", api_url or "not configured")

    def front_item(self) -> QQuickItem:
        return self.item

    def bring_up(self) -> None:
        """Make it ready to be raised, with the addresses of now."""
        self.item.setProperty("addresses", ", ".join(addresses()) or "no network")
        self.item.setVisible(True)

    def isVisible(self) -> bool:  # noqa: N802  (as a Qt item says it)
        return self.item.isVisible()

    def clear(self) -> None:
        self.item.setVisible(False)


class Still:
    """The last frame of a web view held on the GPU (``qml/Still.qml``, a texture copy) while
    the next item loads in its place: the low-memory profile's one view."""

    def __init__(self, stage: Stage, region: QQuickItem) -> None:
        self._stage = stage
        self.item = region_layer(region, "still")
        self.since = 0.0  # time.monotonic() the still began to hold
        self.holds = 0  # holds so far: a release meant for an earlier one is not for this one
        self._copying = False  # the view is copied; its copy is to be kept at the next frame

    def front_item(self) -> QQuickItem:
        return self.item

    def hold(self, source: QQuickItem, since: float) -> None:
        """Copy ``source``'s current frame (at the next frame of the scene) and show it, fully
        opaque, until :meth:`release` (the region's stack raises it in front)."""
        self.holds += 1
        item = self.item
        item.setProperty("sourceItem", source)
        item.captureView()  # type: ignore[attr-defined]  # QML
        item.setVisible(True)
        self._copying = True
        self._stage.request_frame()
        self.since = since

    def frame_swapped(self) -> None:
        """The view was copied in the frame just swapped: keep the copy in the next one (the
        view must outlive both: ``webslot.RETIRE_FRAMES``)."""
        if self._copying:
            self._copying = False
            self.item.keepCopy()  # type: ignore[attr-defined]  # QML
            self._stage.request_frame()

    def isVisible(self) -> bool:  # noqa: N802  (as a Qt item says it)
        return self.item.isVisible()

    def release(self) -> None:
        """Let go of the still (the next item is in front of it or the fade is over)."""
        self._copying = False
        self.item.setVisible(False)
        self.item.setProperty("sourceItem", None)


# What can be in front of the stage.
Layer = WebSlot | ImageLayer | VideoLayer | Cover | Still | ZoneItemLayer
