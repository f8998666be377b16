"""A video's own length from its container's header (player/medialength.py), as a synchronised
set's grid needs it: against what Debian's ffprobe says of the same files."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from player.medialength import LengthCache, media_length
from tests.support.videofiles import solid_video

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "video"


@pytest.fixture
def ffmpeg() -> str:
    """Debian's ffmpeg (and its ffprobe), which the set-up installs: not optional."""
    found = shutil.which("ffmpeg")
    assert found and shutil.which("ffprobe"), (
        "ffmpeg is missing: bash packaging/dev.sh setup installs it"
    )
    return found


def ffprobe_length(path: Path) -> float:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(out)


@pytest.mark.parametrize("name", ["red.webm", "blue.webm"])
def test_webm_length_is_read_from_its_info(name: str) -> None:
    assert media_length(FIXTURES / name) == pytest.approx(2.0, abs=0.001)


@pytest.mark.parametrize(
    ("suffix", "seconds", "extra"),
    [
        ("mp4", 7.4, []),  # the index (moov) after the media data
        ("mp4", 3.5, ["-movflags", "+faststart"]),  # the index first
        ("mov", 2.2, []),
        ("mkv", 4.2, []),
    ],
)
def test_length_matches_ffprobe(
    tmp_path: Path, ffmpeg: str, suffix: str, seconds: float, extra: list[str]
) -> None:
    made = solid_video(
        ffmpeg, tmp_path / f"v.{suffix}", (0, 0, 255), (64, 48), seconds, ("libx264", "aac")
    )
    if extra:
        moved = tmp_path / f"moved.{suffix}"
        subprocess.run([ffmpeg, "-v", "error", "-i", made, "-c", "copy", *extra, moved], check=True)
        made = moved
    assert media_length(made) == pytest.approx(ffprobe_length(made), abs=0.05)


def test_what_is_no_video_or_is_cut_short_has_no_length(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text("<!doctype html><p>hello</p>")
    cut = tmp_path / "cut.webm"
    cut.write_bytes((FIXTURES / "red.webm").read_bytes()[:30])
    assert media_length(page) is None
    assert media_length(cut) is None
    assert media_length(tmp_path / "absent.mp4") is None


def test_the_cache_reads_each_file_once_and_again_when_it_changes(tmp_path: Path) -> None:
    video = tmp_path / "v.webm"
    video.write_bytes((FIXTURES / "red.webm").read_bytes())
    lengths = LengthCache()
    assert lengths.of_url(video.as_uri()) == pytest.approx(2.0, abs=0.001)
    assert lengths.of_url("http://example.org/v.webm") is None  # only local files
    video.write_text("no longer a video")
    assert lengths.of_url(video.as_uri()) is None
