"""The crossfade overlay: a still of the outgoing item over the incoming one, fading out.

It also holds a still while the next item loads in the view the last one was in (the
low-memory profile has one web view): :meth:`hold`, then :meth:`release` once it has painted."""

from __future__ import annotations

from PySide6.QtCore import QEasingCurve, Qt, QVariantAnimation
from PySide6.QtGui import QPainter, QPaintEvent, QPixmap
from PySide6.QtWidgets import QWidget


class FadeOverlay(QWidget):
    """A still of the outgoing item, painted over the incoming one with falling opacity."""

    def __init__(self) -> None:
        super().__init__()
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self._pixmap: QPixmap | None = None
        self._opacity = 0.0
        self._animation = QVariantAnimation(self)
        self._animation.setStartValue(1.0)
        self._animation.setEndValue(0.0)
        self._animation.setEasingCurve(QEasingCurve.Type.InOutQuad)
        self._animation.valueChanged.connect(self._set_opacity)
        self._animation.finished.connect(self._done)
        self.hide()

    def fade(self, still: QPixmap, duration_ms: int) -> None:
        self._pixmap = still
        self._opacity = 1.0
        self.show()
        self.raise_()
        self._animation.stop()
        self._animation.setDuration(duration_ms)
        self._animation.start()

    def hold(self, still: QPixmap) -> None:
        """Cover the screen with ``still``, fully opaque, until :meth:`release`."""
        self._animation.stop()
        self._pixmap = still
        self._opacity = 1.0
        self.show()
        self.raise_()
        self.update()

    def release(self, duration_ms: int) -> None:
        """Take a held still away: fading out over ``duration_ms``, or at once for 0."""
        if duration_ms > 0 and self._pixmap is not None:
            self.fade(self._pixmap, duration_ms)
        else:
            self._animation.stop()
            self._done()

    def _set_opacity(self, value: object) -> None:
        self._opacity = float(value)  # type: ignore[arg-type]
        self.update()

    def _done(self) -> None:
        self.hide()
        self._pixmap = None

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802
        if self._pixmap is None:
            return
        painter = QPainter(self)
        painter.setOpacity(self._opacity)
        painter.drawPixmap(0, 0, self._pixmap)
        painter.end()
