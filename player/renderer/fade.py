"""The crossfade overlay: a still of the outgoing item over the incoming one, fading out."""

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
