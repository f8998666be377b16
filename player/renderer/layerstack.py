"""A region's layers in depth: which one is in front, raising one over the others, and the
fades (``qml/Fade.qml``, opacity on the render thread).

One stack per region (``qml/Region.qml``). A layer comes in front by :meth:`LayerStack.bring_in`:
raised over every other, faded in over the one it covers (which stays live under it until the
kiosk clears it), or cut in at once. :attr:`LayerStack.front` is a Qt property with its notify
signal, so QML can bind to what is in front.
"""

from __future__ import annotations

import shiboken6
from PySide6.QtCore import Property, QObject, Signal
from PySide6.QtQuick import QQuickItem


class LayerStack(QObject):
    """The depth order and the fades of one region's layers. GUI thread only."""

    frontChanged = Signal()  # noqa: N815  (a Qt notify signal, as QML names it)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._top = 0.0  # the z of the layer raised last (a new layer waits behind, at -1)
        self._front: QQuickItem | None = None

    def _get_front(self) -> QQuickItem | None:
        return self._front

    #: The layer brought in front last (None before the first).
    front = Property(QObject, _get_front, notify=frontChanged)

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
        self._top += 1
        item.setZ(self._top)
        if item is not self._front:
            self._front = item
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


def _fade_of(item: QQuickItem) -> QObject | None:
    """A layer's fade, as its QML file declares it (``property QtObject fade``)."""
    animator = item.property("fade")
    return animator if isinstance(animator, QObject) else None
