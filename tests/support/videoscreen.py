"""Reading the test WebMs back from the screen: which clip, which frame (tests and benchmark).

The clips (tests/fixtures/video, see make.sh there) are a solid colour each with a white
progress bar in the band y 300-339 that counts frames: frame N covers x < 640 * (N + 1) / 60.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtGui import QImage

from tests.support.pixels import RGB, near, rgb

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "video"
CLIP_SIZE = (640, 360)
CLIP_FRAMES = 60
CLIP_SECONDS = 2.0
CLIP_COLOURS: dict[str, RGB] = {
    "red": (220, 20, 20),
    "blue": (20, 40, 220),
    "yellow": (230, 220, 20),
}
TOLERANCE = 28  # VP8 and the YUV round trip move a flat colour by a few units


def clip_bytes(name: str) -> bytes:
    return (FIXTURES / f"{name}.webm").read_bytes()


def colour_points(image: QImage) -> list[tuple[int, int]]:
    """Points in the rows above 140/360 of the height, where a clip shows only its colour."""
    w, h = image.width(), image.height()
    return [(x * w // 640, y * h // 360) for x, y in ((8, 8), (631, 8), (320, 70), (8, 130))]


def which_clip(image: QImage) -> str | None:
    """The clip whose colour the screen shows at every colour point, or None."""
    points = [rgb(image, x, y) for x, y in colour_points(image)]
    for name, colour in CLIP_COLOURS.items():
        if all(near(point, colour, TOLERANCE) for point in points):
            return name
    return None


def blend_of(points: list[RGB], first: RGB, second: RGB) -> bool:
    """Whether every point is ``first`` and ``second`` mixed in one same proportion (a
    crossfade between two clips: never darker than either, never a third colour)."""
    axis = [b - a for a, b in zip(first, second, strict=True)]
    length = sum(v * v for v in axis)
    shares = []
    for point in points:
        share = sum((p - a) * v for p, a, v in zip(point, first, axis, strict=True)) / length
        if not -0.05 <= share <= 1.05:
            return False
        mixed = tuple(round(a + share * v) for a, v in zip(first, axis, strict=True))
        if not near(point, mixed, TOLERANCE):  # type: ignore[arg-type]
            return False
        shares.append(share)
    return max(shares) - min(shares) < 0.1


def clip_frame(image: QImage) -> int:
    """The frame number the progress bar shows (-1: no bar, so not a frame of a clip)."""
    w, h = image.width(), image.height()
    y = 320 * h // 360
    white = 0
    for x in range(0, w, 2):
        if min(rgb(image, x, y)) > 200:
            white += 2
        else:
            break
    if white == 0:
        return -1
    return max(0, round(white * CLIP_FRAMES / w) - 1)


@dataclass
class Sample:
    at: float  # time.monotonic()
    clip: str | None
    frame: int
    points: list[RGB]


@dataclass
class ScreenRecorder:
    """Grabs the window on a timer (in the GUI thread) and records clip and frame per grab."""

    grab: object  # () -> QImage
    interval_ms: int = 10
    samples: list[Sample] = field(default_factory=list)
    _timer: QTimer | None = None

    def start(self) -> None:
        self._timer = QTimer()
        self._timer.setTimerType(self._timer.timerType().PreciseTimer)
        self._timer.setInterval(self.interval_ms)
        self._timer.timeout.connect(self.sample)
        self._timer.start()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def sample(self) -> Sample:
        image: QImage = self.grab()  # type: ignore[operator]
        taken = Sample(
            time.monotonic(),
            which_clip(image),
            clip_frame(image),
            [rgb(image, x, y) for x, y in colour_points(image)],
        )
        self.samples.append(taken)
        return taken
