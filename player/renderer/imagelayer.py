"""Still images drawn natively: no browser round-trip for a cached picture.

An image is decoded (EXIF orientation applied) and scaled to fit the stage once, when it is
prepared or shown; painting is then a single pixmap copy. The layer reports the first paint
of each picture, which is when the renderer counts it as on screen.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QColor, QImage, QImageReader, QPainter, QPaintEvent, QPixmap
from PySide6.QtWidgets import QWidget

log = logging.getLogger("pdn.renderer")

# Formats the native path shows. Animated GIF and SVG go through the browser, which animates
# and scales them properly.
NATIVE_FORMATS = frozenset({"png", "jpg", "jpeg", "bmp", "webp", "tif", "tiff"})


class ImageError(Exception):
    """The file cannot be decoded as an image."""


def decode_image(path: Path, fit: QSize) -> QImage:
    """The image at ``path``, turned upright and scaled to fit ``fit`` (aspect kept)."""
    reader = QImageReader(str(path))
    reader.setAutoTransform(True)
    image = reader.read()
    if image.isNull():
        raise ImageError(f"cannot decode {path.name}: {reader.errorString()}")
    if fit.width() > 0 and fit.height() > 0 and image.size() != fit:
        image = image.scaled(
            fit, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
        )
    return image


class ImageLayer(QWidget):
    """One picture, centred on black. ``painted`` carries the serial of the picture painted."""

    # The serial given to set_image, once that picture has been painted.
    painted = Signal(int)

    def __init__(self) -> None:
        super().__init__()
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
        self._pixmap: QPixmap | None = None
        self._serial = 0
        self._reported = 0

    def set_image(self, image: QImage, serial: int) -> None:
        self._pixmap = QPixmap.fromImage(image)
        self._serial = serial
        self.update()

    def clear(self) -> None:
        self._pixmap = None
        self._serial = 0
        self._reported = 0
        self.update()

    def serial(self) -> int:
        return self._serial

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor(0, 0, 0))
        pixmap = self._pixmap
        if pixmap is not None:
            x = (self.width() - pixmap.width()) // 2
            y = (self.height() - pixmap.height()) // 2
            painter.drawPixmap(x, y, pixmap)
        painter.end()
        if pixmap is not None and self._reported != self._serial:
            self._reported = self._serial
            self.painted.emit(self._serial)
