"""A screenshot read at five points (the centre and halfway to each corner) with ffmpeg: what
the smoke checks compare. Only Python's standard library, since ``pi_checks`` runs it with the
system's Python outside the emulated Pi, where this project has no venv."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

RGB = tuple[int, int, int]
TOLERANCE = 24  # a flat colour through YUV 4:2:0, scaling and a PNG
BLACK = 16  # every channel under this at the five points read: a black screen


def read_points(png: Path) -> list[RGB]:
    """The colours at the centre and halfway to each corner, read with ffmpeg."""
    ffmpeg = shutil.which("ffmpeg") or "ffmpeg"
    raw = subprocess.run(
        [ffmpeg, "-v", "error", "-i", str(png), "-vf", "scale=4:4:flags=neighbor",
         "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
        capture_output=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    pixels = [(raw[i], raw[i + 1], raw[i + 2]) for i in range(0, len(raw), 3)]
    return [pixels[i] for i in (0, 3, 5, 12, 15)]


def near(a: RGB, b: RGB) -> bool:
    return all(abs(x - y) <= TOLERANCE for x, y in zip(a, b, strict=True))
