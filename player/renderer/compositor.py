"""What the compositor or the X server actually shows, read back from it, not from Qt.

The display's own grab (:meth:`Stage.grab`) renders the scene again: it shows what Qt drew, not
what reached the screen. A compositor that shows black while Qt paints (a buffer it cannot
show, a window covering ours, a stalled output) is invisible to it. So now and then
(``[screen] compositor-check`` seconds) the visual watchdog asks the one that composes the
screen:

- Wayland: ``grim`` (wlr-screencopy, wlroots compositors such as cage and sway), run as a child
  process without blocking the GUI thread; its PPM output is sampled at 13 points.
- X11: the root window, read from the X server (``QScreen.grabWindow(0)``).
- eglfs (and linuxfb): the display is the compositor; its frames go to the screen as they are,
  so its own grab is what the screen shows, and there is nothing else to ask.

Costs are measured by ``tests/bench/bench_compositor_check.py`` (docs/screen.md).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QProcess
from PySide6.QtGui import QGuiApplication, QImage, QWindow

from player.framepoints import DARK, sample_points
from player.renderer.webslot import classify_frame

log = logging.getLogger("pdn.renderer")

WAYLAND_PLATFORMS = ("wayland", "wayland-egl", "wayland-brcm")
OWN_SCREEN_PLATFORMS = ("eglfs", "linuxfb", "vkkhrdisplay")
GRIM_TIMEOUT = 5.0  # seconds a grim may take before it is killed (and counted as a failure)
BLACK_RECHECK = 2.0  # seconds between looks while the compositor shows black


def ppm_frame_class(data: bytes) -> str:
    """The class of a binary PPM (P6, 8 bits), "black" or "content", sampled at the
    points of classify_frame; "empty" for anything else. No QImage: samples are read in place."""
    fields: list[bytes] = []
    pos = 0
    while len(fields) < 4 and pos < len(data):
        while pos < len(data) and data[pos : pos + 1].isspace():
            pos += 1
        if data[pos : pos + 1] == b"#":  # a comment line in the header
            pos = data.find(b"\n", pos) + 1 or len(data)
            continue
        start = pos
        while pos < len(data) and not data[pos : pos + 1].isspace():
            pos += 1
        fields.append(data[start:pos])
    if len(fields) < 4 or fields[0] != b"P6" or fields[3] != b"255":
        return "empty"
    width, height = int(fields[1]), int(fields[2])
    pixels = pos + 1  # one white-space byte ends the header
    if width < 2 or height < 2 or len(data) < pixels + width * height * 3:
        return "empty"
    for x, y in sample_points(width, height):
        at = pixels + (y * width + x) * 3
        if max(data[at : at + 3]) >= DARK:
            return "content"
    return "black"


class CompositorView(QObject):
    """The watchdog's look at what the compositor shows: :meth:`look` when :meth:`due`;
    :attr:`frame` is the last answer ("black", "content"), :attr:`error` the last failure."""

    def __init__(
        self,
        parent: QObject,
        every: float,
        platform: str | None = None,
        which: Callable[[str], str | None] = shutil.which,
        window: QWindow | None = None,
        fullscreen: bool = True,
    ) -> None:
        """``window``: the display's, whose rectangle of the X screen is read (None: the whole
        screen). ``fullscreen`` off: a Wayland client does not know where its window is on the
        screen, so the compositor is not asked there."""
        super().__init__(parent)
        self.every = every
        self._window = window
        self.platform = platform if platform is not None else QGuiApplication.platformName()
        self.method: str | None = None  # "wlr-screencopy" or "x-root"
        self.frame: str | None = None
        self.at: float | None = None  # time.monotonic() of the last answer
        self.error: str | None = None
        self.checks = 0
        # The display's frames swapped when the look that gave :attr:`frame` began (the caller's
        # count, :meth:`look`): what the display had put out by then, to tell a frame still on
        # its way from a compositor that shows black.
        self.frames_at_look = 0
        self._look_frames = 0
        self._started: float | None = None  # of the grim now running
        self._process: QProcess | None = None
        self._closed = False
        # True while the screen is dark on purpose (the power schedule switched it off).
        self.suspended: Callable[[], bool] = lambda: False
        if every <= 0:
            self.note = "off ([screen] compositor-check = 0)"
        elif self.platform in WAYLAND_PLATFORMS:
            if not fullscreen:
                self.note = "not checked: a window, not the whole screen (fullscreen off)"
            elif which("grim"):
                self.method = "wlr-screencopy"
                self.note = "grim (wlr-screencopy)"
            else:
                self.note = "not checked: grim is not installed (wlr-screencopy)"
        elif self.platform == "xcb":
            self.method = "x-root"
            self.note = "the X server's root window"
        elif self.platform in OWN_SCREEN_PLATFORMS:
            self.note = (
                f"the display is the compositor ({self.platform}): what it paints is what the "
                "screen shows"
            )
        else:
            self.note = f"not checked: no compositor to ask ({self.platform})"

    def due(self, now: float) -> bool:
        if self.method is None or self._closed:
            return False
        if self.suspended():
            self.frame = None  # a dark screen now says nothing about the screen later
            return False
        if self._process is not None:
            if self._started is not None and now - self._started > GRIM_TIMEOUT:
                self._fail(f"grim did not answer within {GRIM_TIMEOUT:g} s")
            return False
        if self.at is None:
            return True
        wait = BLACK_RECHECK if self.frame == "black" else self.every
        return now - self.at >= wait

    def look(self, now: float, frames: int = 0) -> None:
        """Ask the compositor (grim: the answer comes later, on the GUI thread); ``frames``:
        how many frames the display has swapped so far (:attr:`frames_at_look`)."""
        self._look_frames = frames
        if self.method == "x-root":
            self._answer(classify_frame(self._x_root()), now)
        elif self.method == "wlr-screencopy":
            process = QProcess(self)
            process.setProgram("grim")
            process.setArguments(["-t", "ppm", "-"])
            process.finished.connect(self._grim_finished)
            self._process = process
            self._started = now
            process.start()

    def _x_root(self) -> QImage:
        """The display window's rectangle of the X server's root window (all of it without a
        window): what the X server shows there, whatever Qt believes it drew."""
        window = self._window
        screen = window.screen() if window is not None else QGuiApplication.primaryScreen()
        if screen is None:
            return QImage()
        if window is None:
            return screen.grabWindow(0).toImage()
        area = window.geometry().translated(-screen.geometry().topLeft())
        return screen.grabWindow(0, area.x(), area.y(), area.width(), area.height()).toImage()

    def describe(self, now: float) -> dict[str, object]:
        """For health: how the compositor is read, and what it showed last."""
        state: dict[str, object] = {"reads": self.note}
        if self.method is not None:
            state["frame"] = self.frame
            state["age"] = round(now - self.at, 1) if self.at is not None else None
            if self.error is not None:
                state["error"] = self.error
        return state

    def close(self) -> None:
        self._closed = True
        if self._process is not None:
            self._process.finished.disconnect(self._grim_finished)
            self._process.kill()
            self._process.waitForFinished(1000)
            self._process = None

    def _grim_finished(self, code: int, _status: QProcess.ExitStatus) -> None:
        process = self._process
        if process is None:
            return
        self._process = None
        data = bytes(process.readAllStandardOutput().data())
        error = bytes(process.readAllStandardError().data()).decode(errors="replace").strip()
        process.deleteLater()
        if code != 0:
            self._fail(f"grim exited {code}: {error[:200]}")
            return
        self._answer(ppm_frame_class(data), time.monotonic())

    def _answer(self, frame: str, now: float) -> None:
        self.checks += 1
        if frame == "empty":
            self._fail("the compositor returned no image")
            return
        if frame != self.frame:
            log.debug("the compositor shows %s", frame)
        self.frame, self.at, self.error = frame, now, None
        self.frames_at_look = self._look_frames

    def _fail(self, error: str) -> None:
        if error != self.error:
            log.info("cannot read what the compositor shows: %s", error)
        self.error = error
        self.frame, self.at = None, time.monotonic()
        if self._process is not None:
            self._process.finished.disconnect(self._grim_finished)
            self._process.kill()
            self._process.waitForFinished(1000)
            self._process.deleteLater()
            self._process = None
