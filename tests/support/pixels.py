"""Reading the renderer's pixels back: shared by the renderer tests and the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer
from PySide6.QtGui import QColor, QImage

from player.renderer import KioskRenderer
from tests.support.waiting import poll_until

RGB = tuple[int, int, int]


def rgb(image: QImage, x: int, y: int) -> RGB:
    colour = QColor(image.pixel(x, y))
    return (colour.red(), colour.green(), colour.blue())


def near(a: RGB, b: RGB, tolerance: int = 12) -> bool:
    return all(abs(p - q) <= tolerance for p, q in zip(a, b, strict=True))


def probe_points(image: QImage) -> list[tuple[int, int]]:
    """The centre and four points near the corners (inset by 4 px)."""
    w, h = image.width(), image.height()
    return [(w // 2, h // 2), (4, 4), (w - 5, 4), (4, h - 5), (w - 5, h - 5)]


def uniform_colour(image: QImage, tolerance: int = 12) -> RGB | None:
    """The colour at every probe point, if they all agree."""
    points = [rgb(image, x, y) for x, y in probe_points(image)]
    first = points[0]
    return first if all(near(first, p, tolerance) for p in points) else None


def process_for(seconds: float) -> None:
    """Run the Qt event loop for a while (no sleep without events)."""
    loop = QEventLoop()
    QTimer.singleShot(max(0, round(seconds * 1000)), loop.quit)
    loop.exec()


def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.005) -> bool:
    """Whether ``predicate()`` came true within ``timeout`` seconds, the Qt event loop
    running between tries (the renderer paints only while it runs)."""
    assert QCoreApplication.instance() is not None
    return bool(poll_until(predicate, timeout, step, pause=process_for))


def wait_for_colour(renderer: KioskRenderer, colour: RGB, timeout: float = 10.0) -> float | None:
    """Seconds until the whole screen shows ``colour`` (None: it never did)."""
    start = time.monotonic()

    def on_screen() -> bool:
        found = uniform_colour(renderer.grab_image())
        return found is not None and near(found, colour)

    if wait_until(on_screen, timeout, step=0.002):
        return time.monotonic() - start
    return None


@dataclass
class FrameSampler:
    """Grabs the screen every ``interval_ms`` and keeps what each sample showed."""

    renderer: KioskRenderer
    allowed: Iterable[RGB]
    interval_ms: int = 4
    samples: int = 0
    bad: list[tuple[float, list[RGB]]] = field(default_factory=list)
    _timer: QTimer | None = None

    def start(self) -> None:
        self._allowed = list(self.allowed)
        self._timer = QTimer()
        self._timer.setInterval(self.interval_ms)
        self._timer.timeout.connect(self._sample)
        self._timer.start()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def _sample(self) -> None:
        image = self.renderer.grab_image()
        self.samples += 1
        points = [rgb(image, x, y) for x, y in probe_points(image)]
        if not all(any(near(p, ok) for ok in self._allowed) for p in points):
            self.bad.append((time.monotonic(), points))
