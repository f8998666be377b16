"""Still pictures drawn natively: no browser round-trip for a cached picture.

A picture is decoded (EXIF orientation applied) and scaled to fit the stage (on a video wall,
the wall) once, on a worker
thread, when it is prepared or shown; the scene then shows it from the renderer's image
provider (``image://pdn/...``) in a ``Picture`` item, whose texture Qt Quick uploads on its
render thread. Two items take turns, so one picture can cross-fade into the next. The layer
reports a picture painted once frames of the scene have been swapped with it in front.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from PySide6.QtCore import QObject, QSize, Qt, Signal
from PySide6.QtGui import QImage, QImageReader
from PySide6.QtQuick import QQuickImageProvider, QQuickItem

from player.renderer.stage import Stage, region_layer

log = logging.getLogger("pdn.renderer")

# Formats the native path shows. Animated GIF and SVG go through the browser, which animates
# and scales them properly.
NATIVE_FORMATS = frozenset({"png", "jpg", "jpeg", "bmp", "webp", "tif", "tiff"})
PROVIDER = "pdn"  # the main zone's image provider's id; another zone's adds "-" and its name
# Frames swapped with a picture in front before it counts as painted (see webslot.py).
CONFIRM_FRAMES = 2


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


class _Pictures(QQuickImageProvider):
    """Hands the scene the decoded pictures by key (called on Qt Quick's threads)."""

    def __init__(self) -> None:
        super().__init__(QQuickImageProvider.ImageType.Image)
        self._lock = threading.Lock()
        self._by_key: dict[str, QImage] = {}

    def put(self, key: str, image: QImage) -> None:
        with self._lock:
            self._by_key[key] = image

    def forget(self, key: str) -> None:
        with self._lock:
            self._by_key.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._by_key.clear()

    def requestImage(self, key: str, size: QSize, requested: QSize) -> QImage:  # noqa: N802
        with self._lock:
            image = self._by_key.get(key)
        return image if image is not None else QImage()


class ImageLayer(QObject):
    """Pictures on the stage: decoded off the GUI thread, kept for reuse (at most
    ``keep`` decoded), shown in front by :meth:`show`."""

    #: The picture of this serial (given to :meth:`show`) is decoded and in the back item:
    #: the kiosk raises it now.
    presenting = Signal(int)
    #: The serial given to :meth:`show`, once that picture has been painted.
    painted = Signal(int)
    #: A picture could not be decoded: (url, reason).
    failed = Signal(str, str)
    #: A decode finished on the worker thread: (url, image or None, reason).
    _decoded = Signal(str, object, str)

    def __init__(self, stage: Stage, region: QQuickItem, keep: int, zone: str = "main") -> None:
        super().__init__()  # no Qt parent: Python owns it (see Stage.create)
        self._stage = stage
        self._keep = max(1, keep)
        self._images: OrderedDict[str, QImage] = OrderedDict()
        self._decoding: dict[str, Future[None]] = {}
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pdn-decode")
        # One provider per zone, made once and kept by the stage (the engine owns it): one
        # of an id already given would replace, and delete, the one there.
        self._provider_id = PROVIDER if zone == "main" else f"{PROVIDER}-{zone}"
        provider = stage.image_providers.get(zone)
        if not isinstance(provider, _Pictures):
            provider = _Pictures()
            stage.view.engine().addImageProvider(self._provider_id, provider)
            stage.image_providers[zone] = provider
        self._provider = provider
        self._region = region
        self._items = [region_layer(region, "pictureA"), region_layer(region, "pictureB")]
        self._front = 0  # index of the item in front (when a picture is)
        self._wanted: tuple[str, int] | None = None  # (url, serial) to show once decoded
        self._confirming: tuple[int, int] | None = None  # (serial, frames still to swap)
        self._keys = 0
        self.presents = 0  # pictures brought in front so far
        self._decoded.connect(self._on_decoded, Qt.ConnectionType.QueuedConnection)

    # -- decoding -------------------------------------------------------------------------

    def decoded_urls(self) -> list[str]:
        """The pictures kept decoded, oldest first."""
        return list(self._images)

    def decode(self, url: str, path: Path) -> None:
        """Start decoding ``url`` (a local file at ``path``) unless it is kept or under way."""
        if url in self._images or url in self._decoding:
            return
        fit = self._fit()
        self._decoding[url] = self._worker.submit(self._decode, url, path, fit)

    def _fit(self) -> QSize:
        """The size pictures are decoded at: the region's (a video wall's part on a wall), or
        the stage's before the region is laid out."""
        width, height = round(self._region.width()), round(self._region.height())
        if width > 0 and height > 0:
            return QSize(width, height)
        return self._stage.layout_size()

    def _decode(self, url: str, path: Path, fit: QSize) -> None:
        try:
            image = decode_image(path, fit)
        except ImageError as error:
            self._decoded.emit(url, None, str(error))
            return
        except Exception as error:  # a broken file must never kill the worker silently
            self._decoded.emit(url, None, f"cannot decode {path.name}: {error}")
            return
        self._decoded.emit(url, image, "")

    def _on_decoded(self, url: str, image: object, reason: str) -> None:
        self._decoding.pop(url, None)
        if not isinstance(image, QImage):
            if self._wanted is not None and self._wanted[0] == url:
                self._wanted = None
            self.failed.emit(url, reason)
            return
        self._images[url] = image
        self._images.move_to_end(url)
        if self._wanted is not None and self._wanted[0] == url:
            _, serial = self._wanted
            self._wanted = None
            self._present(url, serial)
        self._trim()

    def _trim(self) -> None:
        """Keep the newest ``keep`` decoded pictures (the one just shown or prepared is the
        newest; a picture still on screen keeps its own copy in the provider)."""
        while len(self._images) > self._keep:
            self._images.popitem(last=False)

    # -- showing --------------------------------------------------------------------------

    def show(self, url: str, path: Path, serial: int) -> None:
        """Bring ``url`` in front (decoding it first if needed); ``painted(serial)`` follows,
        or ``failed(url, reason)``."""
        self._confirming = None
        if url in self._images:
            self._images.move_to_end(url)
            self._present(url, serial)
            return
        self._wanted = (url, serial)
        self.decode(url, path)

    def cancel(self) -> None:
        """The picture on its way is no longer wanted."""
        self._wanted = None
        self._confirming = None

    def _present(self, url: str, serial: int) -> None:
        back = 1 - self._front
        item = self._items[back]
        self._keys += 1
        key = f"{self._keys}"
        old_key = item.property("pdnKey")
        self._provider.put(key, self._images[url])
        item.setProperty("pdnUrl", url)
        item.setProperty("pdnKey", key)
        item.setProperty("source", f"image://{self._provider_id}/{key}")
        if isinstance(old_key, str):
            self._provider.forget(old_key)
        item.setOpacity(0.0)  # shown by the kiosk's swap (raised, faded in or not)
        item.setVisible(True)
        self._front = back
        self.presents += 1
        self._confirming = (serial, CONFIRM_FRAMES)
        self._trim()
        self.presenting.emit(serial)
        self._stage.request_frame()

    def front_item(self) -> QQuickItem:
        return self._items[self._front]

    def frame_swapped(self) -> None:
        if self._confirming is None:
            return
        serial, frames = self._confirming
        if frames > 1:
            self._confirming = (serial, frames - 1)
            self._stage.request_frame()
            return
        self._confirming = None
        self.painted.emit(serial)

    def clear_back(self, presents: int) -> None:
        """Hide the picture that is not in front (it has been covered), unless another
        picture has come in front since ``presents``: the back item is then the outgoing one
        of that newer fade, still on screen (the newer swap clears it in its turn)."""
        if presents == self.presents:
            self._clear(1 - self._front)

    def clear(self) -> None:
        """Hide both pictures (another layer is in front)."""
        self._clear(0)
        self._clear(1)
        self._confirming = None

    def _clear(self, index: int) -> None:
        item = self._items[index]
        item.setVisible(False)
        item.setProperty("source", "")
        key = item.property("pdnKey")
        if isinstance(key, str):
            self._provider.forget(key)
        item.setProperty("pdnKey", None)
        item.setProperty("pdnUrl", None)

    def close(self) -> None:
        self._wanted = None
        self._confirming = None
        self._worker.shutdown(wait=True, cancel_futures=True)
        self._provider.clear()  # the zone's next region starts with none
        self._decoded.disconnect(self._on_decoded)
