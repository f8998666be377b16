"""Files for the media library's tests: pictures made with Pillow, videos made with Debian's
ffmpeg (``tests.support.videofiles``), once per test session."""

from __future__ import annotations

import io
import shutil
import subprocess

import pytest
from PIL import Image

from tests.support.videofiles import solid_video


def picture(size: tuple[int, int], colour: tuple[int, int, int], fmt: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, fmt)
    return out.getvalue()


@pytest.fixture(scope="session")
def ffmpeg() -> str:
    found = shutil.which("ffmpeg")
    assert found, "Debian's ffmpeg is needed to make test videos"
    return found


@pytest.fixture(scope="session")
def media_files(tmp_path_factory: pytest.TempPathFactory, ffmpeg: str) -> dict[str, bytes]:
    """Named test files: ``png``, ``jpeg``, ``mp4`` (H.264, 320x240, 1 s), ``mkv`` (H.264 in
    Matroska), ``audio-mp4`` (AAC only)."""
    folder = tmp_path_factory.mktemp("media")
    mp4 = solid_video(ffmpeg, folder / "blue.mp4", (0, 0, 255), (320, 240), 1, ("libx264", "aac"))
    mkv = solid_video(ffmpeg, folder / "red.mkv", (255, 0, 0), (320, 240), 1, ("libx264", "aac"))
    audio = folder / "tone.mp4"
    subprocess.run(
        [ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=1",
         "-c:a", "aac", str(audio)],
        check=True,
        timeout=60,
    )  # fmt: skip
    return {
        "png": picture((640, 360), (200, 10, 10), "PNG"),
        "jpeg": picture((1920, 1080), (10, 200, 10), "JPEG"),
        "mp4": mp4.read_bytes(),
        "mkv": mkv.read_bytes(),
        "audio-mp4": audio.read_bytes(),
    }
