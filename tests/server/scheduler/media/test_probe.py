"""What the media probe makes of files straight from disk: a video cut short after its index
(``+faststart``: the index is at the front, so the file still opens), WebM's codecs, and what
it reads from a good video."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from server.scheduler.media.probe import RefusedError, probe


def test_a_video_cut_short_after_its_index_is_corrupt(ffmpeg: str, tmp_path: Path) -> None:
    whole = tmp_path / "whole.mp4"
    subprocess.run(
        [ffmpeg, "-v", "error", "-y",
         "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30:duration=2",
         "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart", str(whole)],
        check=True,
        timeout=60,
    )  # fmt: skip
    good = probe(whole, "whole.mp4")
    assert (good.kind, good.codec, good.width, good.height) == ("video", "h264", 320, 240)
    assert good.duration == pytest.approx(2.0, abs=0.1)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size * 2 // 3])
    with pytest.raises(RefusedError) as refused:
        probe(cut, "cut.mp4")
    assert refused.value.error == "corrupt"


def test_a_webm_holds_vp8_vp9_or_av1(media_files: dict[str, bytes], tmp_path: Path) -> None:
    h264 = tmp_path / "h264.webm"
    h264.write_bytes(media_files["mkv"])
    with pytest.raises(RefusedError) as refused:
        probe(h264, "h264.webm")
    assert refused.value.error == "type-mismatch" and "mkv" in refused.value.message
    assert probe(h264, "h264.mkv").mime == "video/x-matroska"
