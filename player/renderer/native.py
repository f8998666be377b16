"""A region's native media: pictures (``imagelayer.py``) and videos (``videolayer.py``), the
items that need no web view; and a zone's tickers and clocks (``zonelayer.py``,
:class:`ZoneItems`).

Both layers work alike: an item is prepared on the layer's back item (decoded, or paused on
its first frame), shown by raising that item once it is ready (``presenting``: the region's
stack swaps it in, fading it over the outgoing layer) and reported shown once frames of the
scene have been swapped with it in front (``painted``). What is shown, failed or ended goes to
the region through :class:`MediaReports`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject

from player.feeds import FeedError
from player.playitem import PlayItem
from player.renderer.content import Kind, is_live, local_path
from player.renderer.duegate import due_timestamp
from player.renderer.imagelayer import ImageLayer
from player.renderer.layerstack import LayerStack, Pending
from player.renderer.options import RendererOptions
from player.renderer.videolayer import VideoLayer
from player.renderer.zonelayer import ZONE_ITEMS, ZoneItemLayer, identity, make_zone_item

log = logging.getLogger("pdn.renderer")

NATIVE = (Kind.NATIVE_IMAGE, Kind.VIDEO)


class MediaReports(Protocol):
    """What the native media tell their region."""

    @property
    def current(self) -> PlayItem | None:
        """The item on screen, reported shown."""

    def now_showing(self, pending: Pending, natural: float | None) -> None:
        """``pending`` is on screen (``natural``: a video's own length, when it has none)."""

    def failed(self, item: PlayItem, reason: str, on_screen: bool = False) -> None:
        """``item`` cannot be shown (``on_screen``: it broke while in front)."""

    def prepared_failed(self, item: PlayItem, reason: str) -> None:
        """``item``, prepared and not yet shown, cannot be: remembered for its show."""

    def ended(self, item: PlayItem) -> None:
        """The video on screen reached its end."""


class NativeMedia(QObject):
    """Pictures and videos of one region, shown through its :class:`LayerStack`."""

    def __init__(
        self,
        stack: LayerStack,
        pictures: ImageLayer,
        videos: VideoLayer,
        reports: MediaReports,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._stack = stack
        self.pictures = pictures
        self.videos = videos
        self._reports = reports
        self._prepared: dict[str, PlayItem] = {}  # by URL
        self._serial = 0  # of the layers' shows
        for layer in (pictures, videos):
            layer.presenting.connect(self._presenting)
            layer.painted.connect(self._painted)
            layer.failed.connect(self._failed)
        videos.ended.connect(self._ended)

    def _layer_of(self, kind: Kind) -> ImageLayer | VideoLayer:
        return self.videos if kind is Kind.VIDEO else self.pictures

    def prepare(self, item: PlayItem, kind: Kind) -> None:
        self._prepared[item.url] = item
        if kind is Kind.VIDEO:
            self.videos.prepare(item.url, live=is_live(item))
        else:
            self.pictures.decode(item.url, Path(local_path(item.url)))

    def show(self, item: PlayItem, kind: Kind) -> None:
        """Bring ``item`` on its way to the front: the stack's pending item from now."""
        self._prepared.pop(item.url, None)
        self._serial += 1
        live = kind is Kind.VIDEO and is_live(item)
        if live and self._stack.layer is self.videos and self.videos.plays_live(item.url):
            # The live stream on screen is its own next item: it plays on, nothing reopened.
            self._reports.now_showing(Pending(item, kind, serial=self._serial), None)
            return
        self._stack.pending = Pending(item, kind, serial=self._serial)
        if kind is Kind.VIDEO:
            held = False
            if self.videos.must_free_decoder(item.url) and self._stack.layer is self.videos:
                # One decoder ([screen] video-decoders = 1): the video on screen stands still
                # on a copy of its last frame while its decoder moves to the next one.
                self._stack.hold_still_over(self.videos.front_item())
                held = True
            self.videos.show(
                item.url, self._serial, held_on_still=held, due=due_timestamp(item), live=live
            )
        else:
            self.pictures.show(item.url, Path(local_path(item.url)), self._serial)

    def _pending(self, serial: int) -> Pending | None:
        pending = self._stack.pending
        if pending is None or pending.kind not in NATIVE:
            return None
        return pending if pending.serial == serial else None

    def _presenting(self, serial: int) -> None:
        pending = self._pending(serial)
        if pending is not None:
            layer = self._layer_of(pending.kind)
            self._stack.swap_to(layer, due_timestamp(pending.item), pending.item.cut)

    def _painted(self, serial: int) -> None:
        pending = self._pending(serial)
        if pending is None:
            return
        self._stack.pending = None
        natural = None
        if (
            pending.kind is Kind.VIDEO
            and pending.item.duration is None
            and not is_live(pending.item)
        ):
            natural = self.videos.front_player().duration()  # it plays to its own end
        self._reports.now_showing(pending, natural)

    def _failed(self, url: str, reason: str) -> None:
        pending = self._stack.pending
        log.warning("cannot show %s: %s", url, reason)
        if pending is not None and pending.kind in NATIVE and pending.item.url == url:
            self._stack.pending = None
            self._reports.failed(pending.item, reason)
            return
        current = self._reports.current
        if self._stack.layer is self.videos and current is not None and current.url == url:
            # It broke on screen: never a frozen or black frame for long, the cover instead.
            self._reports.failed(current, reason, on_screen=True)
            return
        prepared = self._prepared.pop(url, None)
        if prepared is not None:
            self._reports.prepared_failed(prepared, reason)

    def _ended(self, serial: int) -> None:
        current = self._reports.current
        if self._stack.layer is self.videos and current is not None:
            self._reports.ended(current)

    def frame_swapped(self) -> None:
        self.pictures.frame_swapped()
        self.videos.frame_swapped()

    def close(self) -> None:
        self.pictures.close()
        self.videos.close()


class ZoneItemReports(Protocol):
    """What a region's ticker or clock tells the region (its :class:`RegionPlayer`)."""

    def now_showing(self, pending: Pending, natural: float | None) -> None: ...
    def failed(self, item: PlayItem, reason: str, on_screen: bool = False) -> None: ...


class ZoneItems(QObject):
    """The tickers and clocks of one region (``zonelayer.py``), shown through its
    :class:`LayerStack`: each show of a new one makes its object and QML item, brought in front
    once a frame with its text has reached the window (``painted``), and reported shown; one
    that is covered, or superseded before it was shown, is closed. A show of the ticker or
    clock already in front (the same address, type and refresh: a zone's set of one item
    turns round) keeps it scrolling on, and the new play is reported shown at once."""

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
        self.abandon()
        front = self._stack.layer
        if isinstance(front, ZoneItemLayer) and front.identity == identity(item):
            front.item = item  # the same ticker or clock goes on: this play is on screen now
            self._reports.now_showing(Pending(item, kind), None)
            return
        try:
            thing = make_zone_item(item, kind, self._options)
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
        layer = ZoneItemLayer(item, thing, view, self._stack.drop)
        self._loading = layer
        self._stack.pending = Pending(item, kind, serial=serial)
        thing.painted.connect(lambda: self._painted(layer, serial))
        if thing.is_painted:
            self._painted(layer, serial)

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
