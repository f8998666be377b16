"""Which decoder plays videos on this machine: QtMultimedia's backend and what hardware it can
use, decided before Qt starts (``QT_MEDIA_BACKEND`` is read once) and said by
``pdn display --check-config``.

- **FFmpeg** (PySide6's own build, every wheel from 6.11): software decoders for H.264, HEVC,
  VP8, VP9 and AV1; hardware decoding through VA-API where libva, a VA driver and a GPU render
  node exist (Intel or AMD kiosk PCs). It has no V4L2 decoders, so on a Pi it decodes in
  software.
- **GStreamer** (the system's, which the wheel's plugin links): on a Raspberry Pi its V4L2
  decoders use the board's hardware (H.264 on a Pi 4, HEVC on a Pi 5).

``auto`` (the default of ``[screen] video-backend``) takes GStreamer on a Raspberry Pi when it
is installed, FFmpeg elsewhere. No Qt is imported here.
"""

from __future__ import annotations

import ctypes.util
import glob
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

BACKENDS = ("auto", "ffmpeg", "gstreamer")
DEVICE_MODEL = Path("/proc/device-tree/model")
# A Pi's stateful (H.264) and stateless (HEVC) V4L2 decoders.
PI_DECODER_NODES = ("/dev/video10", "/dev/video19")


@dataclass(frozen=True)
class VideoPlan:
    backend: str  # what QT_MEDIA_BACKEND is set to
    hardware: str  # the hardware path the backend can use, or "none"
    why: str  # how the choice was made, for --check-config and the log

    def describe(self) -> str:
        return f"{self.backend}, hardware decoding: {self.hardware} ({self.why})"


def qt_media_plugins() -> set[str]:
    """The QtMultimedia backends the installed PySide6 has: {"ffmpeg", "gstreamer"}."""
    spec = importlib.util.find_spec("PySide6")
    found: set[str] = set()
    for location in (spec.submodule_search_locations or []) if spec else []:
        for plugin in Path(location, "Qt", "plugins", "multimedia").glob("lib*mediaplugin.so"):
            found.add(plugin.name.removeprefix("lib").removesuffix("mediaplugin.so"))
    return found


def raspberry_pi_model() -> str | None:
    try:
        model = DEVICE_MODEL.read_bytes().rstrip(b"\0").decode(errors="replace")
    except OSError:
        return None
    return model if "Raspberry Pi" in model else None


def vaapi() -> str | None:
    """What VA-API decoding would use here (libva, a driver and a GPU render node), or None."""
    if ctypes.util.find_library("va") is None:
        return None
    drivers = sorted(
        Path(path).name.removesuffix("_drv_video.so")
        for path in glob.glob("/usr/lib/*/dri/*_drv_video.so")
    )
    nodes = glob.glob("/dev/dri/renderD*")
    if not drivers or not nodes:
        return None
    return f"VA-API on {nodes[0]} (drivers: {', '.join(drivers)})"


def gstreamer_v4l2() -> str | None:
    """The Pi's V4L2 decoders, when GStreamer has its plugins for them and the nodes exist."""
    # video4linux2 (gst-plugins-good): the stateful H.264 decoder; v4l2codecs (bad): HEVC.
    plugins = [
        *glob.glob("/usr/lib/*/gstreamer-1.0/libgstvideo4linux2.so"),
        *glob.glob("/usr/lib/*/gstreamer-1.0/libgstv4l2codecs.so"),
    ]
    nodes = [node for node in PI_DECODER_NODES if os.path.exists(node)]
    if not plugins or not nodes:
        return None
    return f"V4L2 ({', '.join(nodes)})"


def plan(configured: str = "auto") -> VideoPlan:
    """The backend for ``[screen] video-backend`` on this machine."""
    plugins = qt_media_plugins()
    pi = raspberry_pi_model()
    if configured == "auto":
        if pi and "gstreamer" in plugins and gstreamer_v4l2():
            backend, why = "gstreamer", f"auto: {pi}, the board's decoders through GStreamer"
        elif "ffmpeg" in plugins or not plugins:
            backend, why = "ffmpeg", "auto: the wheel's FFmpeg"
        else:
            backend, why = sorted(plugins)[0], "auto: the only backend this Qt has"
    else:
        backend, why = configured, "[screen] video-backend"
        if plugins and configured not in plugins:
            why += f" (this Qt has no {configured} plugin: videos will not play)"
    if backend == "gstreamer":
        hardware = gstreamer_v4l2() or "none (software)"
    else:
        hardware = vaapi() or "none (software)"
    return VideoPlan(backend, hardware, why)


def apply(configured: str = "auto") -> VideoPlan:
    """Choose before QtMultimedia loads; an operator's ``QT_MEDIA_BACKEND`` wins."""
    forced = os.environ.get("QT_MEDIA_BACKEND", "").strip()
    if forced:
        return VideoPlan(forced, plan(forced).hardware, "QT_MEDIA_BACKEND in the environment")
    chosen = plan(configured)
    os.environ["QT_MEDIA_BACKEND"] = chosen.backend
    return chosen
