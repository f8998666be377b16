"""How the kiosk renderer is set up, and what the process needs before Qt starts."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from player.memory import fix_mmap_threshold
from player.wall import Wall

log = logging.getLogger("pdn.renderer")

ROTATIONS = (0, 90, 180, 270)

# Chromium throttles timers, rendering and media of views it believes are in the background.
# Our incoming view is covered, not hidden, but say it anyway: a stale or frozen preloaded
# page is what made other players give up on preloading.
CHROMIUM_FLAGS = (
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    "--autoplay-policy=no-user-gesture-required",
    # Loopback and intranet content must not be slowed by pings and updates we never use.
    "--disable-background-networking",
    "--disable-component-update",
)
# ``gc()`` in every page. Slots do not need it (each item gets a fresh page, whose render
# process ends when it is dropped: webslot.py); kept for pages and tools that call it, at no
# cost to those that do not. Chromium keeps only the last --js-flags.
JS_FLAGS = "--js-flags=--expose-gc"
# Chromium's "paint holding" keeps a same-origin page's first frames back for up to 500 ms
# (until a contentful paint): a page that is only a colour would be reported painted long
# before its pixels exist.
DISABLED_FEATURES = ("PaintHolding",)
# Private Network Access: a public page reaches no loopback or private address, and a private
# page no loopback address, even by a name or a redirect that leads to one (the guard's
# interceptor decides what the URL alone tells: guard.py). An insecure page's request to such an
# address is refused outright, a secure page's only after a preflight the target server answers
# yes to; navigations and workers too.
ENABLED_FEATURES = (
    "BlockInsecurePrivateNetworkRequests",
    "BlockInsecurePrivateNetworkRequestsFromPrivate",
    "PrivateNetworkAccessSendPreflights",
    "PrivateNetworkAccessRespectPreflightResults",
    "PrivateNetworkAccessForNavigations",
    "PrivateNetworkAccessForWorkers",
)
# The low-memory profile (1 GB boards, player.memory): only flags measured to cut the display
# tree's memory without breaking playback. None is, on this project's measurements (docs/memory.md):
# --enable-low-end-device-mode, --num-raster-threads=1, --process-per-site and
# --disable-site-isolation-trials left the tree's anonymous memory unchanged, and
# --renderer-process-limit=1 made it worse), so the profile adds none; a flag to try on a board
# goes in QTWEBENGINE_CHROMIUM_FLAGS, which is kept.
LOW_MEMORY_FLAGS: tuple[str, ...] = ()


def add_chromium_flags(low_memory: bool = False) -> None:
    """Add ours to QTWEBENGINE_CHROMIUM_FLAGS (read once, when Qt WebEngine starts); with
    ``low_memory``, the low-memory profile's too. Flags already there are kept, so calling it
    again (``prepare_process``) adds nothing and removes nothing."""
    flags = os.environ.get("QTWEBENGINE_CHROMIUM_FLAGS", "").split()
    wanted = CHROMIUM_FLAGS + (LOW_MEMORY_FLAGS if low_memory else ())
    flags += [flag for flag in wanted if flag not in flags]
    js_flags = [flag for flag in flags if flag.startswith("--js-flags=")]
    if not js_flags:
        flags.append(JS_FLAGS)
    elif not any("--expose-gc" in flag for flag in js_flags):
        log.warning(
            "QTWEBENGINE_CHROMIUM_FLAGS sets %s without --expose-gc: render processes will "
            "not be collected between items and grow with every page load",
            js_flags[-1],
        )
    flags = _merged(flags, "--disable-features=", DISABLED_FEATURES)
    flags = _merged(flags, "--enable-features=", ENABLED_FEATURES)
    os.environ["QTWEBENGINE_CHROMIUM_FLAGS"] = " ".join(flags)


def _merged(flags: list[str], prefix: str, ours: tuple[str, ...]) -> list[str]:
    """One ``prefix`` flag listing every feature given and ours (Chromium keeps the last)."""
    features: list[str] = []
    for flag in flags:
        if flag.startswith(prefix):
            features += [name for name in flag[len(prefix) :].split(",") if name]
    features += [name for name in ours if name not in features]
    return [flag for flag in flags if not flag.startswith(prefix)] + [prefix + ",".join(features)]


@dataclass(frozen=True)
class RendererOptions:
    """Everything the kiosk renderer needs to know about its screen and content.

    ``rotation`` is the clockwise angle the content is turned by on the panel (90: a landscape
    panel mounted portrait with its top edge on the right). ``window_size`` is used only when
    ``fullscreen`` is off (tests, development). ``data_dir`` holds Chromium's profile (cookies,
    local storage, a bounded HTTP cache); ``None`` keeps everything in memory.
    """

    screen: int = 0
    rotation: int = 0
    fullscreen: bool = True
    window_size: tuple[int, int] = (1280, 720)
    crossfade_ms: int = 0
    # Videos' sound ([screen] audio): to PulseAudio or PipeWire where one runs, dropped
    # where none does; off: no audio output, the track is not even decoded.
    audio: bool = True
    # Videos open at once ([screen] video-decoders): 2, the next one waits paused on its
    # first frame while one plays; 1 (a hardware decoder that takes one stream at a time),
    # the last frame is held on a still while the decoder moves to the next video.
    video_decoders: int = 2
    # Zones of a layout that may play videos at once ([screen] video-zones): each zone's
    # region has its own decoders, so a video in one zone more is refused.
    video_zones: int = 2
    page_load_timeout: float = 15.0
    display_name: str = ""
    api_url: str = ""
    # The display API's listen address and port: no page may reach them (guard.py).
    api_host: str = ""
    api_port: int = 0
    data_dir: Path | None = None
    http_cache_mb: int = 32
    # A render process that crashes this many times in a row on one item: the item is skipped.
    max_crash_retries: int = 2
    # A page whose render process answers no liveness probe for this long is killed (and so
    # reloaded): an endless loop in a page must not freeze the screen for ever.
    hang_timeout: float = 10.0
    # A screen still wrong this long after the visual watchdog saw it wrong (reloads having
    # failed): the renderer gives up and the display exits for its service manager to restart
    # it. Under the unit's WatchdogSec (30 s), so the exit is ours, not a SIGABRT.
    recover_within: float = 20.0
    # A video file (or one downloaded whole) that decodes no frame this long is not playable
    # here; a video on screen that shows no new frame this long has stalled.
    video_first_frame: float = 3.0
    video_stalled_after: float = 5.0
    keep_screen_on: bool = True
    # Seconds between the watchdog's looks at what the compositor or X server shows
    # (player.renderer.compositor); 0: never.
    compositor_check: float = 30.0
    # The compositor showing black while the display paints content is a wrong screen once a
    # look taken after two more frames were swapped still shows black, or after this long
    # without such frames (a window the compositor covers may be sent no frame callbacks):
    # until then the content may not have reached the screen yet.
    compositor_settle: float = 5.0
    # Decoded pictures kept ready for the native image layer (8 MiB each at 1080p): a playlist
    # that comes back to them is not decoded again. The low-memory profile keeps one.
    decoded_images: int = 3
    # Web views on the stage. Two: the next item loads, and plays from its first frame, under
    # the one on screen. One (the low-memory profile): the next item loads in place of the one
    # on screen, behind a still of its last frame, so one render process exists at a time; the
    # outgoing item stands still while the next loads (docs/memory.md: ~0.5 s for a
    # signage page on the development machine).
    views: int = 2
    # This display's tile of a video wall ([screen] wall): items laid out at the wall's size.
    wall: Wall | None = None
    # A zone's ticker ([screen] ticker-speed): px/s for a bar 108 px high (zoneitems.py).
    ticker_speed: float = 120.0
    # A zone's clock shows the time in this IANA time zone (the display's ``timezone``).
    time_zone: str = "UTC"

    def __post_init__(self) -> None:
        if self.rotation not in ROTATIONS:
            raise ValueError(f"rotation must be one of {ROTATIONS}, not {self.rotation!r}")
        if self.page_load_timeout <= 0:
            raise ValueError("page_load_timeout must be positive")
        if self.crossfade_ms < 0:
            raise ValueError("crossfade_ms must not be negative")
        if self.video_decoders not in (1, 2):
            raise ValueError(f"video_decoders must be 1 or 2, not {self.video_decoders!r}")
        if self.video_zones < 1:
            raise ValueError(f"video_zones must be 1 or more, not {self.video_zones!r}")
        if self.views not in (1, 2):
            raise ValueError(f"views must be 1 or 2, not {self.views!r}")

    @classmethod
    def from_config(
        cls,
        config: Any,
        api_url: str,
        *,
        low_memory: bool = False,
        listen: tuple[str, int] | None = None,
    ) -> RendererOptions:
        """Options from ``player.config.DisplayConfig`` (duck-typed: the renderer does not
        depend on the configuration loader)."""
        screen = getattr(config, "screen", None)
        factor = float(getattr(screen, "timeout_factor", 1.0))
        return cls(
            screen=int(getattr(screen, "index", 0)),
            rotation=int(getattr(screen, "rotation", 0)),
            crossfade_ms=round(float(getattr(screen, "crossfade", 0.0)) * 1000),
            compositor_check=float(getattr(screen, "compositor_check", 30.0)),
            compositor_settle=cls.compositor_settle * factor,
            page_load_timeout=cls.page_load_timeout * factor,
            hang_timeout=cls.hang_timeout * factor,
            recover_within=cls.recover_within * factor,
            video_first_frame=cls.video_first_frame * factor,
            video_stalled_after=cls.video_stalled_after * factor,
            audio=bool(getattr(screen, "audio", True)),
            video_decoders=int(getattr(screen, "video_decoders", 2)),
            video_zones=_video_zones(screen),
            display_name=str(getattr(config, "name", None) or ""),
            api_url=api_url,
            api_host=listen[0] if listen else str(getattr(config, "host", "")),
            api_port=listen[1] if listen else int(getattr(config, "port", 0) or 0),
            data_dir=getattr(config, "data_dir", None),
            decoded_images=1 if low_memory else 3,
            views=1 if low_memory else 2,
            wall=getattr(screen, "wall", None),
            ticker_speed=float(getattr(screen, "ticker_speed", 120.0)),
            time_zone=str(getattr(config, "timezone", None) or "UTC"),
        )


def _video_zones(screen: Any) -> int:
    limit = getattr(screen, "video_zone_limit", None)
    return int(limit()) if callable(limit) else 2


def prepare_process() -> None:
    """Call before the application exists: Chromium reads its flags once, at start-up, and
    Qt WebEngine must be initialised for Qt Quick (shared graphics contexts) before it."""
    from PySide6.QtCore import QCoreApplication, Qt
    from PySide6.QtWebEngineQuick import QtWebEngineQuick

    from player.renderer.guard import register_schemes

    if os.geteuid() == 0:
        os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")
    # Before Qt allocates its first frame: frame-sized blocks must not pile up in the heap.
    if not fix_mmap_threshold():
        log.debug("malloc's mmap threshold left as it is")
    add_chromium_flags()
    if QCoreApplication.instance() is None:
        register_schemes()
        QCoreApplication.setAttribute(Qt.ApplicationAttribute.AA_ShareOpenGLContexts)
        QtWebEngineQuick.initialize()
    else:
        log.debug("prepare_process called after the application was made")
