"""Test videos made by Debian's ffmpeg: one flat colour (so the screen read back says which
video is on it) with a sine tone as its sound track."""

from __future__ import annotations

import subprocess
from pathlib import Path


def solid_video(
    ffmpeg: str,
    path: Path,
    colour: tuple[int, int, int],
    size: tuple[int, int],
    seconds: float,
    codecs: tuple[str, str],
    fps: int = 30,
) -> Path:
    """Write ``path`` (its container from the suffix) with ``codecs`` = (video, audio)."""
    r, g, b = colour
    video, audio = codecs
    subprocess.run(
        [ffmpeg, "-v", "error", "-y",
         "-f", "lavfi", "-i", f"color=c=0x{r:02x}{g:02x}{b:02x}:size={size[0]}x{size[1]}"
         f":rate={fps}:duration={seconds:g}",
         "-f", "lavfi", "-i", f"sine=frequency=440:duration={seconds:g}",
         "-c:v", video, "-pix_fmt", "yuv420p", "-c:a", audio, "-shortest",
         *(["-x265-params", "log-level=error"] if video == "libx265" else []),
         str(path)],
        check=True,
        timeout=300,
    )  # fmt: skip
    return path
