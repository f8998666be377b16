"""The ``[screen]`` section of the display's configuration: which screen, how it is turned,
how items change on it, the video decoders and memory it may use, its tile of a video wall,
and the keys the service's start wrapper reads (``platform``: packaging/pdn-display-start).
``player.config`` reads the file; the renderer uses what is parsed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from player.memory import parse_budget, parse_low_memory
from player.videodecode import BACKENDS, raspberry_pi_model
from player.wall import Wall, parse_wall

__all__ = ["SCREEN_KEYS", "SCREEN_PLATFORMS", "ScreenConfig", "parse_screen"]

# [screen] keys read by the service's start wrapper (packaging/pdn-display-start).
SCREEN_PLATFORMS = ("auto", "eglfs", "cage", "xcb", "wayland", "offscreen")
PLATFORM_KEYS = {
    "platform",
    "x_display",
    "wayland_display",
    "eglfs_kms_config",
    "chromium_sandbox",
}


SCREEN_KEYS = {
    "index",
    "rotation",
    "crossfade",
    "compositor_check",
    "timeout_factor",
    "audio",
    "video_backend",
    "video_decoders",
    "video_zones",
    "ticker_speed",
    "memory_budget",
    "low_memory",
    "wall",
    *PLATFORM_KEYS,
}


@dataclass(frozen=True)
class ScreenConfig:
    index: int = 0
    rotation: int = 0
    crossfade: float = 0.3
    compositor_check: float = 30.0  # seconds; 0: off (player.renderer.compositor)
    # Multiplies the times a page has to paint (15 s), to answer (10 s) and a wrong screen to
    # be put right (20 s): 1 on real boards, more under emulation (fresh-root.sh --arch arm64).
    timeout_factor: float = 1.0
    audio: bool = True  # videos' sound
    video_backend: str = "auto"  # player.videodecode.BACKENDS
    video_decoders: int = 2  # videos open at once: the next one prepared (2), or not (1)
    # A zone's ticker: px/s for a bar 108 px high, in proportion for others (zoneitems.py).
    ticker_speed: float = 120.0
    memory_budget_mb: int | None = None  # None: auto, from the board's RAM (player.memory)
    low_memory: str = "auto"  # auto, on, off
    wall: Wall | None = None  # this display's tile of a video wall (player.wall)
    # Zones of a layout that may play videos at once (cds.layouts.video_zones); None: auto.
    video_zones: int | None = None

    def video_zone_limit(self) -> int:
        """``video-zones`` as set, or auto: 1 on a Raspberry Pi (its one hardware decoder),
        2 elsewhere."""
        if self.video_zones is not None:
            return self.video_zones
        return 1 if raspberry_pi_model() else 2


def parse_screen(key: str, table: dict[str, Any]) -> tuple[ScreenConfig | None, list[str]]:
    """The ``[screen]`` section (``table``: its keys with ``_`` for ``-``; unknown keys are the
    caller's to report): the config, or None and every problem found, each naming its key."""
    problems: list[str] = []
    if table.get("platform", "auto") not in SCREEN_PLATFORMS:
        problems.append(f"'{key}.platform' must be one of {', '.join(SCREEN_PLATFORMS)}")
    for name in ("x_display", "wayland_display", "eglfs_kms_config"):
        given = table.get(name, "-")
        if not isinstance(given, str) or not given.strip():
            problems.append(f"'{key}.{name}' must be a non-empty string")
    if not isinstance(table.get("chromium_sandbox", False), bool):
        problems.append(f"'{key}.chromium_sandbox' must be true or false")
    index = table.get("index", 0)
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        problems.append(f"'{key}.index' must be a screen number (0, 1, ...)")
    rotation = table.get("rotation", 0)
    if rotation not in (0, 90, 180, 270) or isinstance(rotation, bool):
        problems.append(f"'{key}.rotation' must be 0, 90, 180 or 270")
    crossfade = table.get("crossfade", 0.3)
    if (
        isinstance(crossfade, bool)
        or not isinstance(crossfade, int | float)
        or not 0 <= crossfade <= 10
    ):
        problems.append(f"'{key}.crossfade' must be seconds from 0 to 10")
    compositor_check = table.get("compositor_check", 30)
    if (
        isinstance(compositor_check, bool)
        or not isinstance(compositor_check, int | float)
        or not (compositor_check == 0 or 1 <= compositor_check <= 3600)
    ):
        problems.append(f"'{key}.compositor-check' must be 0 (off) or seconds from 1 to 3600")
    timeout_factor = table.get("timeout_factor", 1)
    if (
        isinstance(timeout_factor, bool)
        or not isinstance(timeout_factor, int | float)
        or not 1 <= timeout_factor <= 100
    ):
        problems.append(f"'{key}.timeout-factor' must be a number from 1 to 100")
    audio = table.get("audio", "on")
    audio = {"on": True, "off": False}.get(audio, audio) if isinstance(audio, str) else audio
    if not isinstance(audio, bool):
        problems.append(f'\'{key}.audio\' must be "on" or "off"')
    video_backend = table.get("video_backend", "auto")
    if video_backend not in BACKENDS:
        problems.append(f"'{key}.video-backend' must be one of {', '.join(BACKENDS)}")
    video_decoders = table.get("video_decoders", 2)
    if video_decoders not in (1, 2) or isinstance(video_decoders, bool):
        problems.append(f"'{key}.video-decoders' must be 1 or 2")
    video_zones = table.get("video_zones", "auto")
    if video_zones != "auto" and (
        isinstance(video_zones, bool)
        or not isinstance(video_zones, int)
        or not 1 <= video_zones <= 8
    ):
        problems.append(f"'{key}.video-zones' must be a number from 1 to 8, or \"auto\"")
    ticker_speed = table.get("ticker_speed", 120)
    if (
        isinstance(ticker_speed, bool)
        or not isinstance(ticker_speed, int | float)
        or not 10 <= ticker_speed <= 1000
    ):
        problems.append(f"'{key}.ticker-speed' must be pixels a second from 10 to 1000")
    budget: int | None = None
    low_memory = "auto"
    try:
        budget = parse_budget(table.get("memory_budget", "auto"))
    except ValueError as error:
        problems.append(f"'{key}.memory-budget': {error}")
    try:
        low_memory = parse_low_memory(table.get("low_memory", "auto"))
    except ValueError as error:
        problems.append(f"'{key}.low-memory': {error}")
    wall: Wall | None = None
    if "wall" in table:
        given = table["wall"]
        if isinstance(given, dict):
            wall, wall_problems = parse_wall(f"{key}.wall", given)
            problems.extend(wall_problems)
        else:
            problems.append(
                f"'{key}.wall' must be a table like "
                "{columns = 2, rows = 2, column = 0, row = 1, bezel = 0.02}"
            )
    if problems:
        return None, problems
    screen = ScreenConfig(
        index=index,
        rotation=rotation,
        crossfade=float(crossfade),
        compositor_check=float(compositor_check),
        timeout_factor=float(timeout_factor),
        audio=audio is not False,
        video_backend=str(video_backend),
        video_decoders=int(video_decoders),
        ticker_speed=float(ticker_speed),
        memory_budget_mb=budget,
        low_memory=low_memory,
        wall=wall,
        video_zones=None if video_zones == "auto" else int(video_zones),
    )
    return screen, []
