"""Which video backend a machine gets (player.videodecode), from facts faked in a temporary
root only where a real one cannot be had here (a Pi's device tree and V4L2 nodes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from player import videodecode


def test_this_machine_decodes_with_the_wheels_ffmpeg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QT_MEDIA_BACKEND", "")  # restored afterwards, whatever apply() sets
    monkeypatch.delenv("QT_MEDIA_BACKEND")
    assert "ffmpeg" in videodecode.qt_media_plugins()
    chosen = videodecode.apply("auto")
    assert chosen.backend == "ffmpeg"
    assert os.environ["QT_MEDIA_BACKEND"] == "ffmpeg"
    # No GPU render node here: VA-API cannot be used, whatever libraries are installed.
    if not list(Path("/dev/dri").glob("renderD*")):
        assert chosen.hardware.startswith("none")


def test_an_operators_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QT_MEDIA_BACKEND", "gstreamer")
    chosen = videodecode.apply("ffmpeg")
    assert chosen.backend == "gstreamer" and "environment" in chosen.why


def test_a_pi_with_gstreamers_v4l2_decoders_takes_gstreamer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = tmp_path / "model"
    model.write_bytes(b"Raspberry Pi 4 Model B Rev 1.5\0")
    monkeypatch.setattr(videodecode, "DEVICE_MODEL", model)
    monkeypatch.setattr(videodecode, "qt_media_plugins", lambda: {"ffmpeg", "gstreamer"})
    monkeypatch.setattr(videodecode, "gstreamer_v4l2", lambda: "V4L2 (/dev/video10)")
    chosen = videodecode.plan("auto")
    assert (chosen.backend, chosen.hardware) == ("gstreamer", "V4L2 (/dev/video10)")
    assert "Raspberry Pi 4" in chosen.why
    # Without GStreamer's V4L2 plugin the wheel's FFmpeg decodes, in software.
    monkeypatch.setattr(videodecode, "gstreamer_v4l2", lambda: None)
    assert videodecode.plan("auto").backend == "ffmpeg"


def test_a_backend_this_qt_lacks_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(videodecode, "qt_media_plugins", lambda: {"ffmpeg"})
    assert "no gstreamer plugin" in videodecode.plan("gstreamer").why
