"""A region's layers in depth: which one is in front, which item is on its way there, the fades
(``qml/Fade.qml``, opacity on the render thread) and the clears of what the front covers.

One stack per region (``qml/Region.qml``, :class:`player.renderer.region.RegionPlayer`). A layer
comes in front by :meth:`LayerStack.swap_to`: raised over every other, faded in over the one it
covers (which stays live under it), or cut in at once; what it covered is cleared once the fade
over it is over, also when the render thread runs late. The cover (:meth:`show_cover`) and the
still of a web view (:meth:`hold_still_over`) come in front the same way.

QML draws what the stack decides: :attr:`LayerStack.order` (the layers from the back to the
front) is a Qt property that each layer of ``Region.qml`` binds its ``z`` to, and
:attr:`LayerStack.front` (the item in front) is one with its notify signal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import shiboken6
from PySide6.QtCore import Property, QObject, QTimer, Signal, Slot
from PySide6.QtQuick import QQuickItem

from player.playitem import PlayItem
from player.renderer.content import IDLE_TOKEN, Kind
from player.renderer.duegate import SwitchTrace
from player.renderer.imagelayer import ImageLayer
from player.renderer.layers import Cover, Layer, Still
from player.renderer.stage import Stage, StageError
from player.renderer.videolayer import VideoLayer
from player.renderer.webslot import WebSlot
from player.renderer.zonelayer import ZoneItemLayer

CLEAR_DELAY_MS = 250  # the old layer is cleared this long after the swap (the new one is up)
COVER_POLL_MS = 50  # how often a layer waiting to be cleared asks whether the fade over it ended


@dataclass
class Pending:
    """The item the region is bringing on screen."""

    item: PlayItem
    kind: Kind
    slot: WebSlot | None = None  # where web content loads
    serial: int = 0  # of a native layer's show()
    report: bool = True  # False when re-showing after a crash (already reported shown)


class LayerStack(QObject):
    """The depth order, the front, the pending item, the fades and the clears of one region's
    layers. GUI thread only."""

    frontChanged = Signal()  # noqa: N815  (a Qt notify signal, as QML names it)
    orderChanged = Signal()  # noqa: N815
    #: Region.qml makes a web view with these properties (over this panel's tile alone if
    #: the flag is set) and hands it to :meth:`adopt`.
    viewWanted = Signal(dict, bool)  # noqa: N815  (a QML signal handler's name)
    #: Region.qml destroys this web view (deferred: it may be handling one of its signals).
    viewDropped = Signal(QQuickItem)  # noqa: N815
    #: Region.qml makes a ticker or a clock (kind "ticker" or "clock", zonelayer.py) with
    #: these properties and hands it to :meth:`adopt`.
    zoneItemWanted = Signal(str, dict)  # noqa: N815

    def __init__(
        self,
        stage: Stage,
        layers: tuple[Cover, Still, ImageLayer, VideoLayer],
        crossfade_ms: int,
        switch_trace: SwitchTrace,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._stage = stage
        self.cover, self.still, self.pictures, self.videos = layers
        self._crossfade_ms = crossfade_ms
        self._switch_trace = switch_trace
        self._order: list[QQuickItem] = []  # raised so far, the last raised last (in front)
        self._front_item: QQuickItem | None = None
        self._adopted: QObject | None = None
        self._closed = False
        #: The layer in front (None before the first).
        self.layer: Layer | None = None
        #: The item on its way to the front.
        self.pending: Pending | None = None
        #: The slot fading out under the one fading in: it stays live until it is cleared.
        self.outgoing: WebSlot | None = None
        self.still_source: object = None  # the view the still copied (one web view)
        self.fading_until = 0.0  # time.monotonic() the last fade ends: frames are due till then
        self.last_frame: float | None = None  # time.monotonic() of a frame known painted
        #: The first item fades in too (a zone that appears with a layout; the main zone's
        #: first item comes in at once over the black of the start).
        self.fade_first = False

    # -- what QML binds to ----------------------------------------------------------------

    def _get_front(self) -> QQuickItem | None:
        return self._front_item

    #: The item brought in front last (None before the first).
    front = Property(QObject, _get_front, notify=frontChanged)

    def _get_order(self) -> list[QQuickItem]:
        return [item for item in self._order if shiboken6.isValid(item)]

    #: The layers raised so far, from the back to the front: each layer's ``z`` is its place
    #: here (-1, behind every one of them, for a layer never raised).
    order = Property("QVariantList", _get_order, notify=orderChanged)  # type: ignore[arg-type]

    # -- the web views, made at run time -------------------------------------------------

    def create_view(self, properties: dict[str, object], own: bool = False) -> QQuickItem:
        """A new web view in the region, behind, not drawn until raised; with ``own``, over
        this panel's tile rather than across a video wall (the idle page).

        Qt owns it (``Region.qml`` makes it when asked and hands it to :meth:`adopt`): Python
        holds references, never the object, so no wrapper can outlive what it wraps;
        :meth:`drop` destroys it."""
        self._adopted = None
        self.viewWanted.emit(properties, own)
        made, self._adopted = self._adopted, None
        if not isinstance(made, QQuickItem):
            raise StageError("cannot create a web view (see the log for QML's reason)")
        return made

    def create_zone_item(self, kind: str, properties: dict[str, object]) -> QQuickItem:
        """A new ticker or clock (``kind``) in the region, behind, not drawn until raised; Qt
        owns it, as a web view (:meth:`create_view`), and :meth:`drop` destroys it."""
        self._adopted = None
        self.zoneItemWanted.emit(kind, properties)
        made, self._adopted = self._adopted, None
        if not isinstance(made, QQuickItem):
            raise StageError(f"cannot create a {kind} (see the log for QML's reason)")
        return made

    @Slot(QObject)
    def adopt(self, item: QObject | None) -> None:
        """Region.qml hands over the view, ticker or clock it has just made."""
        self._adopted = item

    def drop(self, item: QQuickItem) -> None:
        """Take a web view off the screen now; QML destroys it on the next turn of the event
        loop (it may be the very item whose signal is being handled)."""
        item.setVisible(False)
        if item in self._order:
            self._order.remove(item)
            self.orderChanged.emit()
        self.viewDropped.emit(item)

    # -- depth and fades ------------------------------------------------------------------

    def bring_in(self, item: QQuickItem, fade_ms: int, cut: bool = False) -> bool:
        """Show ``item`` in front of every other layer: faded in over ``fade_ms`` on the render
        thread, or at once when ``fade_ms`` is 0 or ``cut`` is set (a change without a fade).
        Returns whether a fade runs."""
        item.setVisible(True)
        self.raise_item(item)
        ms = 0 if cut else fade_ms
        self.fade(item, 0.0, 1.0, ms)
        return ms > 0

    def raise_item(self, item: QQuickItem) -> None:
        """Put ``item`` in front of every other layer."""
        self._order = [i for i in self._order if i is not item and shiboken6.isValid(i)]
        self._order.append(item)
        self.orderChanged.emit()  # QML's bindings set each layer's z now
        if item is not self._front_item:
            self._front_item = item
            self.frontChanged.emit()

    def fade(self, item: QQuickItem, begin: float, end: float, ms: int) -> QObject | None:
        """Animate ``item``'s opacity on the render thread; returns its animator (whose
        ``finished`` signal says when it is over), or None when ``ms`` is 0 (set at once)."""
        animator = _fade_of(item)
        if animator is not None:
            animator.stop()  # type: ignore[attr-defined]  # Fade.qml's
        if ms <= 0 or animator is None:
            item.setOpacity(end)
            return None
        item.setOpacity(begin)
        animator.play(begin, end, ms)  # type: ignore[attr-defined]
        return animator

    @staticmethod
    def fading(item: QQuickItem) -> bool:
        """True while ``item``'s fade runs on the render thread (an item Qt has since
        destroyed is not fading)."""
        if not shiboken6.isValid(item):
            return False
        animator = _fade_of(item)
        return animator is not None and bool(animator.property("running"))

    def stop_fade(self, item: QQuickItem, opacity: float) -> None:
        """End a fade of ``item`` now, at ``opacity``."""
        animator = _fade_of(item)
        if animator is not None and animator.property("running"):
            # complete(), not stop(): a stopped animator writes back the value it had reached
            # on the render thread, after ours.
            animator.complete()  # type: ignore[attr-defined]
        item.setOpacity(opacity)

    # -- the front ------------------------------------------------------------------------

    @property
    def holding_still(self) -> bool:
        return self.layer is self.still

    def front_slot(self) -> WebSlot | None:
        return self.layer if isinstance(self.layer, WebSlot) else None

    def swap_to(self, layer: Layer, due: float | None = None, cut: bool = False) -> None:
        """Bring ``layer`` in front: raised, faded in over the outgoing layer (which stays
        live under it), or at once with ``cut``, and the outgoing layer cleared once covered.
        ``due``: the instant the item was due (a synchronised set's), for the switch trace."""
        old = self.layer
        item = layer.front_item()
        if item is None:
            return
        on_the_instant = self._switch_trace.switching(due)
        fade_ms = self._crossfade_ms if old is not None or self.fade_first else 0
        if cut or (old is layer and layer not in (self.pictures, self.videos)):
            fade_ms = 0
        if self.bring_in(item, fade_ms):
            self.fading_until = time.monotonic() + fade_ms / 1000
        self.layer = layer
        self.last_frame = time.monotonic()
        if on_the_instant:
            # Drawn now, not after what this thread does next (the engine's bookkeeping of
            # the item shown, the next item's preparation): Stage.draw_now.
            self._stage.draw_now()
        else:
            self._stage.request_frame()
        delay = CLEAR_DELAY_MS + fade_ms
        if isinstance(old, WebSlot) and old is not layer:
            self.outgoing = old if fade_ms else None
            self.schedule_clear(old, item)
        elif old in (self.pictures, self.videos):
            self._after_native(old, layer, delay, item)
        elif old is self.cover and layer is not self.cover:
            self._when_covered(item, delay, self._clear_cover)
        elif old is self.still and layer is not self.still:
            self._release_still_after(delay, item)
        elif old is not layer:
            self._after_native(old, layer, delay, item)

    def show_cover(self) -> None:
        """The native idle facts over everything, at once: never a crashed view or an error
        page."""
        old = self.layer
        if old is self.cover:
            return
        self.cover.bring_up()
        self.bring_in(self.cover.front_item(), 0, cut=True)
        self.layer = self.cover
        self.last_frame = time.monotonic()
        self._stage.request_frame()
        if old is self.still:
            self._release_still_after(CLEAR_DELAY_MS)
        else:
            self._after_native(old, self.cover, CLEAR_DELAY_MS)

    def empty(self) -> None:
        """Nothing in front: the layer in front fades out (at once without a cross-fade) and
        is cleared once it has."""
        old = self.layer
        if old is None:
            return
        self.layer = None
        item = old.front_item()
        if item is not None:
            self.fade(item, item.opacity(), 0.0, self._crossfade_ms)
            self._stage.request_frame()
        delay = CLEAR_DELAY_MS + self._crossfade_ms
        if isinstance(old, WebSlot):
            self.schedule_clear(old)
        elif old is self.cover:
            self._later(delay, self._clear_cover)
        elif old is self.still:
            self._release_still_after(delay)
        else:
            self._after_native(old, None, delay)

    def hold_still_over(self, source: QQuickItem) -> None:
        """Put a still of ``source`` (a view, or a video whose decoder must go) in front."""
        # An item still fading in would be copied half transparent: the engine has moved on,
        # so its fade ends here.
        self.stop_fade(source, 1.0)
        self.stop_fade(self.still.item, 1.0)
        self.still.hold(source, time.monotonic())
        self.raise_item(self.still.item)
        self.still_source = source
        self.layer = self.still

    def abandon_pending(self) -> None:
        """A new show supersedes the one on its way (the engine has moved on)."""
        pending = self.pending
        self.pending = None
        if pending is None:
            return
        if pending.kind is Kind.NATIVE_IMAGE:
            self.pictures.cancel()
        elif pending.kind is Kind.VIDEO:
            self.videos.cancel()
        if pending.slot is not None and pending.item.token == IDLE_TOKEN:
            self.schedule_clear(pending.slot)

    # -- the clears -----------------------------------------------------------------------

    def schedule_clear(self, slot: WebSlot, covering: QQuickItem | None = None) -> None:
        """Clear ``slot`` once the item fading in over it (``covering``) is opaque."""
        generation = slot.generation

        def clear() -> None:
            pending_slot = self.pending.slot if self.pending is not None else None
            mine = slot.generation == generation
            if mine and slot is not self.layer and slot is not pending_slot:
                slot.clear()

        delay = CLEAR_DELAY_MS + self._crossfade_ms
        if covering is None:
            self._later(delay, clear)
        else:
            self._when_covered(covering, delay, clear)

    def _clear_cover(self) -> None:
        if self.layer is not self.cover:
            self.cover.clear()

    def _release_still_after(self, delay_ms: int, covering: QQuickItem | None = None) -> None:
        holds = self.still.holds
        if covering is None:
            self._later(delay_ms, lambda: self._release_still(holds))
        else:
            self._when_covered(covering, delay_ms, lambda: self._release_still(holds))

    def _release_still(self, holds: int) -> None:
        """Let the still go once covered, unless it holds again since (a newer item with one
        web view: the release of the older one would hide it under the newer fade)."""
        if self.layer is not self.still and self.still.holds == holds:
            self.stop_fade(self.still.item, 1.0)
            self.still.release()
            self.still_source = None

    def _after_native(
        self,
        old: Layer | None,
        new: Layer | None,
        delay_ms: int,
        covering: QQuickItem | None = None,
    ) -> None:
        """Release what a native layer that was in front holds once ``new`` covers it (once
        ``covering``, fading in over it, is opaque)."""
        if not isinstance(old, ImageLayer | VideoLayer):
            if isinstance(old, ZoneItemLayer) and new is not old:
                zone_item = old  # a ticker or a clock: closed and destroyed once covered

                def close() -> None:
                    if self.layer is not zone_item:
                        zone_item.clear()

                if covering is None:
                    self._later(delay_ms, close)
                else:
                    self._when_covered(covering, delay_ms, close)
            return
        if new is not old:
            native = old

            def clear() -> None:
                if self.layer is not native:
                    native.clear()
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

    def _later(self, delay_ms: int, callback: Callable[[], None]) -> None:
        """``callback`` after ``delay_ms``, unless the stack is closed by then: the timer has
        the stack as its context, so it cannot outlive it."""

        def fire() -> None:
            if not self._closed:
                callback()

        QTimer.singleShot(delay_ms, self, fire)

    def _when_covered(self, item: QQuickItem, delay_ms: int, callback: Callable[[], None]) -> None:
        """``callback`` after ``delay_ms`` and once ``item``'s fade in is over: the fade runs
        on the render thread, whose time falls behind the GUI thread's clock when frames come
        late (a loaded board), and what it fades in over must stay until it is opaque."""

        def check() -> None:
            if self.fading(item):
                self._later(COVER_POLL_MS, check)
            else:
                callback()

        self._later(delay_ms, check)

    def close(self) -> None:
        """No clear is made from now on (the scene is going)."""
        self._closed = True


def _fade_of(item: QQuickItem) -> QObject | None:
    """A layer's fade, as its QML file declares it (``property QtObject fade``)."""
    animator = item.property("fade")
    return animator if isinstance(animator, QObject) else None
