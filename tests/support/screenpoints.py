"""Points of an X screen in every frame, read back by ``ffmpeg -f x11grab`` while a display
process of its own draws there (the zone tests of a real ``pdn display``).

:class:`PointGrab` records the whole screen at ``fps`` into a pipe, keeps the colour of each
named group of points in every frame with the wall-clock time it was read, and drops the
rest of the frame. Pixels are read exactly (no scaling).
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from dataclasses import dataclass

from tests.support.tickerscreen import ffmpeg

RGB = tuple[int, int, int]
Point = tuple[int, int]


@dataclass(frozen=True)
class PointFrame:
    at: float  # time.time() when the frame was read
    groups: dict[str, list[RGB]]


class PointGrab:
    """The points of ``groups`` (by name) on ``x_display`` (``size`` = the screen's), in every
    frame recorded at ``fps`` until :meth:`stop`."""

    def __init__(
        self, x_display: str, size: tuple[int, int], groups: dict[str, list[Point]], fps: int = 30
    ) -> None:
        self.width, self.height = size
        self.groups = groups
        self.frames: list[PointFrame] = []
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            [ffmpeg(), "-v", "error", "-f", "x11grab", "-framerate", str(fps),
             "-video_size", f"{self.width}x{self.height}", "-draw_mouse", "0",
             "-i", f"{x_display}.0+0,0", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, name="point-grab", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        size = self.width * self.height * 3
        stream = self.process.stdout
        assert stream is not None
        while True:
            frame = stream.read(size)
            if len(frame) < size:
                return
            at = time.time()
            groups = {
                name: [self._pixel(frame, x, y) for x, y in points]
                for name, points in self.groups.items()
            }
            with self._lock:
                self.frames.append(PointFrame(at, groups))

    def _pixel(self, frame: bytes, x: int, y: int) -> RGB:
        at = (y * self.width + x) * 3
        return frame[at], frame[at + 1], frame[at + 2]

    def taken(self) -> list[PointFrame]:
        with self._lock:
            return list(self.frames)

    def stop(self) -> list[PointFrame]:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        return self.taken()
