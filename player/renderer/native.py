"""The kiosk's native layers: pictures (``imagelayer.py``) and videos (``videolayer.py``),
the items that need no web view. A mix-in of ``KioskRenderer``, whose state it reads and
whose swap it uses (declared here).

Both layers work alike: an item is prepared on the layer's back item (decoded, or paused on
its first frame), shown by raising that item once it is ready (``presenting``: the kiosk
swaps it in, fading it over the outgoing layer) and reported shown once frames of the scene
have been swapped with it in front (``painted``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtQuick import QQuickItem

from player.playitem import PlayItem, RendererListener
from player.renderer.content import Kind, is_live, local_path
from player.renderer.duegate import due_timestamp
from player.renderer.imagelayer import ImageLayer
from player.renderer.layers import Layer
from player.renderer.videolayer import VideoLayer
from player.renderer.webslot import WebSlot

log = logging.getLogger("pdn.renderer")


@dataclass
class Pending:
    """The item the renderer is bringing on screen."""

    item: PlayItem
    kind: Kind
    slot: WebSlot | None = None  # where web content loads
    serial: int = 0  # of a native layer's show()
    report: bool = True  # False when re-showing after a crash (already reported shown)


class NativeMedia:
    """Pictures and videos for the kiosk renderer."""

    image_layer: ImageLayer
    video_layer: VideoLayer
    _pending: Pending | None
    _front: Layer | None
    _current: PlayItem | None
    _listener: RendererListener | None
    _prepared_native: dict[str, PlayItem]
    _serial: int
    _later: Callable[[int, Callable[[], None]], None]
    _when_covered: Callable[[QQuickItem, int, Callable[[], None]], None]

    def _swap_to(self, layer: Layer, due: float | None = None, cut: bool = False) -> None:
        raise NotImplementedError

    def _now_showing(self, pending: Pending, natural: float | None) -> None:
        raise NotImplementedError

    def _report_failed(self, item: PlayItem, reason: str) -> None:
        raise NotImplementedError

    def _remember_failure(self, item: PlayItem, reason: str) -> None:
        raise NotImplementedError

    def _show_cover(self) -> None:
        raise NotImplementedError

    @property
    def _holding_still(self) -> bool:
        raise NotImplementedError

    def _hold_still_over(self, source: QQuickItem) -> None:
        raise NotImplementedError

    def _connect_native(self) -> None:
        self.image_layer.presenting.connect(self._native_presenting)
        self.image_layer.painted.connect(self._native_painted)
        self.image_layer.failed.connect(self._native_failed)
        self.video_layer.presenting.connect(self._native_presenting)
        self.video_layer.painted.connect(self._native_painted)
        self.video_layer.failed.connect(self._native_failed)
        self.video_layer.ended.connect(self._video_ended)

    def _layer_of(self, kind: Kind) -> ImageLayer | VideoLayer:
        return self.video_layer if kind is Kind.VIDEO else self.image_layer

    def _prepare_native(self, item: PlayItem, kind: Kind) -> None:
        self._prepared_native[item.url] = item
        if kind is Kind.VIDEO:
            self.video_layer.prepare(item.url, live=is_live(item))
        else:
            self.image_layer.decode(item.url, Path(local_path(item.url)))

    def _show_native(self, item: PlayItem, kind: Kind) -> None:
        self._prepared_native.pop(item.url, None)
        self._serial += 1
        live = kind is Kind.VIDEO and is_live(item)
        if live and self._front is self.video_layer and self.video_layer.plays_live(item.url):
            # The live stream on screen is its own next item: it plays on, nothing reopened.
            self._now_showing(Pending(item, kind, serial=self._serial), None)
            return
        self._pending = Pending(item, kind, serial=self._serial)
        if kind is Kind.VIDEO:
            held = False
            if self.video_layer.must_free_decoder(item.url) and self._front is self.video_layer:
                # One decoder ([screen] video-decoders = 1): the video on screen stands still
                # on a copy of its last frame while its decoder moves to the next one.
                self._hold_still_over(self.video_layer.front_item())
                held = True
            self.video_layer.show(
                item.url, self._serial, held_on_still=held, due=due_timestamp(item), live=live
            )
        else:
            self.image_layer.show(item.url, Path(local_path(item.url)), self._serial)

    def _native_pending(self, serial: int) -> Pending | None:
        pending = self._pending
        if pending is None or pending.kind not in (Kind.NATIVE_IMAGE, Kind.VIDEO):
            return None
        return pending if pending.serial == serial else None

    def _native_presenting(self, serial: int) -> None:
        pending = self._native_pending(serial)
        if pending is not None:
            self._swap_to(
                self._layer_of(pending.kind), due_timestamp(pending.item), pending.item.cut
            )

    def _native_painted(self, serial: int) -> None:
        pending = self._native_pending(serial)
        if pending is None:
            return
        self._pending = None
        natural = None
        if (
            pending.kind is Kind.VIDEO
            and pending.item.duration is None
            and not is_live(pending.item)
        ):
            natural = self.video_layer.front_player().duration()  # it plays to its own end
        self._now_showing(pending, natural)

    def _native_failed(self, url: str, reason: str) -> None:
        pending = self._pending
        log.warning("cannot show %s: %s", url, reason)
        native = pending is not None and pending.kind in (Kind.NATIVE_IMAGE, Kind.VIDEO)
        if pending is not None and native and pending.item.url == url:
            self._pending = None
            self._report_failed(pending.item, reason)
            if self._front is None or self._holding_still:
                self._show_cover()
            return
        current = self._current
        if self._front is self.video_layer and current is not None and current.url == url:
            # It broke on screen: never a frozen or black frame for long, the cover instead.
            self._show_cover()
            self._current = None
            self._report_failed(current, reason)
            return
        prepared = self._prepared_native.pop(url, None)
        if prepared is not None:
            self._remember_failure(prepared, reason)
            self._report_failed(prepared, reason)

    def _video_ended(self, serial: int) -> None:
        current, listener = self._current, self._listener
        if self._front is self.video_layer and current is not None and listener is not None:
            listener.item_ended(current.token)

    def _after_native(
        self, old: Layer | None, new: Layer, delay_ms: int, covering: QQuickItem | None = None
    ) -> None:
        """Release what a native layer that was in front holds once ``new`` covers it (once
        ``covering``, fading in over it, is opaque)."""
        if not isinstance(old, ImageLayer | VideoLayer):
            return
        if new is not old:
            clear = self._clear_pictures if old is self.image_layer else self._clear_videos
        else:
            # Not if another item of the layer comes in front by then: the back item is then
            # the outgoing one of that newer fade, still on screen.
            presents = old.presents

            def clear() -> None:
                old.clear_back(presents)

        if covering is None:
            self._later(delay_ms, clear)
        else:
            self._when_covered(covering, delay_ms, clear)

    def _clear_pictures(self) -> None:
        if self._front is not self.image_layer:
            self.image_layer.clear()

    def _clear_videos(self) -> None:
        if self._front is not self.video_layer:
            self.video_layer.clear()
