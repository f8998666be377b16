"""The screen as the display's API sees it (:class:`player.display.ScreenAccess`).

The API runs on waitress's threads; the renderer lives on the GUI thread. Every call here
crosses over through the :class:`player.qtloop.GuiBridge`, with a time-out, so a frozen GUI
thread shows up in health as "not answering" instead of hanging the API.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from player.qtloop import GuiBridge
from player.renderer import KioskRenderer

HEALTH_TIMEOUT = 2.0  # seconds for the GUI thread to answer a health probe


class QtScreen:
    """Screenshots, liveness and sensor context of the kiosk renderer, from any thread."""

    def __init__(self, bridge: GuiBridge, renderer: KioskRenderer) -> None:
        self._bridge = bridge
        self._renderer = renderer

    def grab_png(self, timeout: float) -> bytes:
        png = self._bridge.invoke(self._renderer.grab_png, timeout)
        if not png:
            raise RuntimeError("the renderer returned no image")
        return png

    def status(self) -> dict[str, Any]:
        """Asked on the GUI thread (with a timeout), which also proves that thread answers."""

        def probe() -> tuple[bool, float | None, dict[str, object]]:
            renderer = self._renderer
            return renderer.alive, renderer.last_frame_time(), renderer.screen_state()

        started = time.monotonic()
        try:
            renderer_alive, last_frame, screen = self._bridge.invoke(probe, HEALTH_TIMEOUT)
        except TimeoutError:
            return {
                "alive": False,
                "gui-lag": round(time.monotonic() - self._bridge.beat, 3),
                "last-frame": None,
                "renderer": type(self._renderer).__name__,
                "problem": f"the GUI thread did not answer within {HEALTH_TIMEOUT:g} s",
            }
        lag = time.monotonic() - started
        frame = None
        if last_frame is not None:
            # last_frame_time() is time.monotonic(); report it on the wall clock.
            frame = datetime.fromtimestamp(time.time() - (time.monotonic() - last_frame), UTC)
        status: dict[str, Any] = {
            # Alive only when the screen shows what it should (the visual watchdog's verdict).
            "alive": renderer_alive and bool(screen.get("right")),
            "gui-lag": round(lag, 3),
            "last-frame": frame.isoformat() if frame else None,
            "renderer": type(self._renderer).__name__,
            "screen": screen,
        }
        if screen.get("problem"):
            status["problem"] = screen["problem"]
        elif not renderer_alive:
            status["problem"] = "the page on screen does not answer"
        return status

    def set_context(self, readings: dict[str, Any]) -> None:
        self._bridge.post(lambda: self._renderer.set_context(readings))
