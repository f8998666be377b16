"""What will play where: a video's codec, size and frame rate checked against the decoders of
the three kinds of display (docs/video.md, "What plays where"; docs/media.md, "What will play
where"). The table is here and only here; the upload answer and the item carry its warnings.

Each kind of display lists, per codec, the largest picture and frame rate it decodes without
dropping frames, and whether that is a hardware decoder:

- a PC: the wheel's FFmpeg decodes H.264, HEVC, VP8, VP9 and AV1 in software (VA-API when
  there is one); past 4096x2304 or 60 frames a second it is not promised;
- a Raspberry Pi 4 (Raspberry Pi OS Trixie, GStreamer): H.264 up to 1080p60 and HEVC up to
  2160p60 in hardware (V4L2); H.264 past 1080p, 10-bit or 4:2:2/4:4:4 H.264, VP8, VP9 and AV1
  fall to software, where only up to 720p30 keeps up;
- a Raspberry Pi 5: HEVC up to 2160p60 in hardware; H.264 in software (the board has no H.264
  decoder), which keeps up to 1080p60; VP8, VP9 and AV1 in software up to 1080p30.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["DISPLAY_KINDS", "EVERYWHERE", "Decoder", "warnings_for"]


@dataclass(frozen=True)
class Decoder:
    """A codec a kind of display decodes: up to ``width`` x ``height`` at ``fps``."""

    width: int
    height: int
    fps: float
    hardware: bool
    #: Profiles (lower-case substrings of PyAV's profile name) it does not take.
    refuses: tuple[str, ...] = ()


_SOFT_PI4 = Decoder(1280, 720, 30, hardware=False)
_SOFT_PI5 = Decoder(1920, 1080, 30, hardware=False)
_PC = Decoder(4096, 2304, 60, hardware=False)

#: Kind of display -> (its name in a warning, codec -> decoder). A codec not listed has none.
DISPLAY_KINDS: dict[str, tuple[str, dict[str, Decoder]]] = {
    "pc": ("PC", {codec: _PC for codec in ("h264", "hevc", "vp8", "vp9", "av1")}),
    "pi4": (
        "Pi 4",
        {
            "h264": Decoder(1920, 1080, 60, hardware=True, refuses=("10", "4:2:2", "4:4:4")),
            "hevc": Decoder(4096, 2160, 60, hardware=True),
            "vp8": _SOFT_PI4,
            "vp9": _SOFT_PI4,
            "av1": _SOFT_PI4,
        },
    ),
    "pi5": (
        "Pi 5",
        {
            "h264": Decoder(1920, 1080, 60, hardware=False),
            "hevc": Decoder(4096, 2160, 60, hardware=True),
            "vp8": _SOFT_PI5,
            "vp9": _SOFT_PI5,
            "av1": _SOFT_PI5,
        },
    ),
}

#: What every kind plays: said after any warning.
EVERYWHERE = "H.264 1080p30 plays everywhere"

_NAMES = {"h264": "H.264", "hevc": "HEVC", "vp8": "VP8", "vp9": "VP9", "av1": "AV1"}


def _label(codec: str, height: int, fps: float | None) -> str:
    rate = f"{round(fps)}" if fps else ""
    return f"{_NAMES.get(codec, codec)} {height}p{rate}"


def _fits(decoder: Decoder, width: int, height: int, fps: float | None) -> bool:
    big, small = max(width, height), min(width, height)  # portrait videos too
    return (
        big <= max(decoder.width, decoder.height)
        and small <= min(decoder.width, decoder.height) + 8  # 1088: coded in 16-pixel blocks
        and (fps is None or fps <= decoder.fps + 0.5)
    )


def warnings_for(
    codec: str | None,
    profile: str | None,
    width: int | None,
    height: int | None,
    fps: float | None,
    kinds: Iterable[str] = DISPLAY_KINDS,
) -> list[str]:
    """The warnings for a video on the displays of ``kinds`` (keys of :data:`DISPLAY_KINDS`):
    empty when every one of them plays it without dropping frames."""
    if not codec or not width or not height:
        return []
    label = _label(codec, height, fps)
    found: list[str] = []
    for kind in kinds:
        if kind not in DISPLAY_KINDS:
            continue
        name, decoders = DISPLAY_KINDS[kind]
        decoder = decoders.get(codec)
        lowered = (profile or "").lower()
        if decoder is None:
            found.append(f"{label} has no decoder on a {name}: it will not play there")
        elif any(part in lowered for part in decoder.refuses):
            found.append(
                f"{label} ({profile}) has no hardware decoder on a {name} in this OS:"
                " expect dropped frames"
            )
        elif not _fits(decoder, width, height, fps):
            limit = f"{decoder.height}p{round(decoder.fps)}"
            found.append(
                f"{label} has no hardware decoder on a {name} in this OS (it stops at {limit}):"
                " expect dropped frames"
                if decoder.hardware
                else f"{label} is decoded in software on a {name}, which keeps up to {limit}:"
                " expect dropped frames"
            )
    return [f"{warning}; {EVERYWHERE}." for warning in found]
