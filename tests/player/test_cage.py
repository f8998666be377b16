"""The real ``pdn display`` under Debian's cage (the kiosk PC's compositor), headless, read back
with ``grim``: whatever cage shows, the display's health agrees with it.

Measured here (docs/screen.md, "What reaches the screen"): cage 0.1.4's headless output often
keeps showing the first frame the display committed, which is black, while the display paints
its idle page. Before the watchdog looked at the compositor, health said "right" all along.
Now a black cage makes the screen wrong within seconds, and the display recovers it as any
wrong screen (fresh views, then an exit for its service manager). On the runs where cage does
show the frames, health is right and so is the screen: both are accepted, a screen that is
black while health says right for longer than the watchdog needs to look is not.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path

import pytest
import requests

from player.renderer.compositor import ppm_frame_class
from tests.support.compositor import CompositorDisplay, cage

pytestmark = [pytest.mark.qt, pytest.mark.slow]

WATCH = 15.0  # seconds of side-by-side samples
# compositor-check = 1 s, an answer within a second, the watchdog's next tick: 3 s when the
# machine is idle; more when it is busy (two cores shared with other test runs).
NOTICED_WITHIN = 8.0


def test_health_never_says_right_while_cage_shows_black() -> None:
    with cage() as compositor, tempfile.TemporaryDirectory(prefix="pdn-cage-") as folder:
        display = CompositorDisplay(compositor, Path(folder))
        try:
            blind_since: float | None = None
            longest = 0.0
            seen: list[tuple[str, bool | None]] = []
            deadline = time.monotonic() + WATCH
            while time.monotonic() < deadline and display.running:
                frame = ppm_frame_class(compositor.grim())
                right, painting = None, False
                with contextlib.suppress(requests.ConnectionError):
                    screen = display.screen()
                    right, painting = screen.get("right"), screen.get("showing") != "nothing"
                now = time.monotonic()
                if frame == "black" and right is True and painting:
                    blind_since = blind_since if blind_since is not None else now
                    longest = max(longest, now - blind_since)
                else:
                    blind_since = None
                if not seen or seen[-1] != (frame, right):
                    seen.append((frame, right))
                time.sleep(0.2)
            assert longest < NOTICED_WITHIN, (longest, seen, display.text()[-3000:])
            # The display either went on or gave up for its service manager (exit 3).
            assert display.returncode in (None, 3), display.text()[-3000:]
        finally:
            display.stop()
