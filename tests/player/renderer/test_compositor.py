"""The watchdog's look at the compositor (player/renderer/compositor.py): how each platform is
read, and what a read-back says. Under a real compositor: tests/player/test_wayland.py."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QObject

from player.renderer.compositor import CompositorView, ppm_frame_class
from player.renderer.options import RendererOptions
from player.renderer.watchdog import VisualWatchdog

pytestmark = pytest.mark.qt


def ppm(width: int, height: int, colour: bytes, header: bytes = b"") -> bytes:
    return b"P6\n" + header + f"{width} {height}\n255\n".encode() + colour * (width * height)


def test_a_ppm_is_black_or_content_from_its_samples() -> None:
    assert ppm_frame_class(ppm(64, 36, b"\x00\x00\x00")) == "black"
    assert ppm_frame_class(ppm(64, 36, b"\x0f\x0f\x0f")) == "black"
    assert ppm_frame_class(ppm(64, 36, b"\x00\x10\x00")) == "content"
    assert ppm_frame_class(ppm(64, 36, b"\x00\x00\x00", b"# grim\n")) == "black"
    # One bright sample point is enough to be content (the centre).
    picture = bytearray(ppm(64, 36, b"\x00\x00\x00"))
    centre = len(picture) - 64 * 36 * 3 + (18 * 64 + 32) * 3
    picture[centre] = 200
    assert ppm_frame_class(bytes(picture)) == "content"


@pytest.mark.parametrize(
    "data", [b"", b"P5\n4 4\n255\n" + b"\0" * 16, ppm(64, 36, b"\xff\xff\xff")[:-10], b"P6\n"]
)
def test_a_broken_read_back_is_empty(data: bytes) -> None:
    assert ppm_frame_class(data) == "empty"


@pytest.mark.parametrize(
    ("platform", "grim", "method", "note"),
    [
        ("wayland", "/usr/bin/grim", "wlr-screencopy", "grim (wlr-screencopy)"),
        ("wayland", None, None, "not checked: grim is not installed"),
        ("wayland-egl", "/usr/bin/grim", "wlr-screencopy", "grim (wlr-screencopy)"),
        ("xcb", None, "x-root", "the X server's root window"),
        ("eglfs", None, None, "the display is the compositor (eglfs)"),
        ("offscreen", None, None, "not checked: no compositor"),
    ],
)
def test_each_platform_says_how_its_screen_is_read(
    qapp: object, platform: str, grim: str | None, method: str | None, note: str
) -> None:
    owner = QObject()
    view = CompositorView(owner, 30.0, platform, which=lambda name: grim)
    assert view.method == method
    assert str(view.describe(time.monotonic())["reads"]).startswith(note)
    assert view.due(time.monotonic()) is (method is not None)
    view.close()


def test_the_x_root_window_is_read_from_the_x_server(qapp: object) -> None:
    """The run's Xvfb (tests/conftest.py) has no window on it: its root window is black."""
    owner = QObject()
    view = CompositorView(owner, 30.0, "xcb")
    now = time.monotonic()
    view.look(now)
    assert (view.frame, view.at, view.checks) == ("black", now, 1)
    assert not view.due(now + 1)  # black: looked at again within seconds, not half a minute
    assert view.due(now + 2)
    view.suspended = lambda: True  # the power schedule switched the screen off
    assert not view.due(now + 60)
    assert view.frame is None


def test_a_wayland_window_not_fullscreen_is_not_looked_at(qapp: object) -> None:
    view = CompositorView(QObject(), 30.0, "wayland", which=lambda name: name, fullscreen=False)
    assert view.method is None and not view.due(time.monotonic())


def test_on_x_the_display_window_is_read_where_it_is(qapp: object) -> None:
    """A window on the run's Xvfb: the X server's pixels where the window is, not the black
    rest of the screen."""
    from PySide6.QtGui import QColor
    from PySide6.QtQuick import QQuickView

    from tests.support.pixels import process_for, wait_until

    window = QQuickView()
    window.setColor(QColor(0, 160, 0))
    window.setGeometry(40, 30, 200, 120)
    window.show()
    swapped: list[bool] = []
    window.frameSwapped.connect(lambda: swapped.append(True))
    try:
        assert wait_until(lambda: bool(swapped), 10)
        process_for(0.2)
        view = CompositorView(QObject(), 30.0, "xcb", window=window)
        view.look(time.monotonic())
        assert view.frame == "content"
        whole = CompositorView(QObject(), 30.0, "xcb")
        whole.look(time.monotonic())
        assert whole.frame == "black"  # its 13 samples miss the small window
    finally:
        window.close()
        window.deleteLater()
        process_for(0.1)  # gone before the run's X server is


def test_off_means_no_look(qapp: object) -> None:
    view = CompositorView(QObject(), 0.0, "xcb")
    assert view.method is None and not view.due(time.monotonic())
    assert view.describe(time.monotonic()) == {"reads": "off ([screen] compositor-check = 0)"}


class FakeStage:
    def __init__(self) -> None:
        self.frames = 0
        self.requests = 0

    def request_frame(self) -> None:
        self.requests += 1


class Judge(VisualWatchdog):
    """The watchdog's verdict on a compositor answer, with a stage that counts frames and a
    display whose own look always finds content (it renders its scene afresh)."""

    def __init__(self, view: CompositorView) -> None:
        self.compositor = view
        self.fake = FakeStage()
        options = RendererOptions(compositor_settle=5.0)
        # No region: the verdict on a compositor answer reads none.
        super().__init__(options, self.fake, None, view, lambda: False)  # type: ignore[arg-type]

    def _look_at_the_screen(self, now: float) -> None:
        self.frame_class, self._frame_class_at = "content", now

    def showing(self) -> str:
        return "the idle page"

    def answer(self, frame: str, now: float) -> str | None:
        """The compositor answers ``frame`` to a look begun now; the verdict at once."""
        self.compositor.look(now, self.fake.frames)  # no method: records the frames only
        self.compositor.frame, self.compositor.at = frame, now
        self.compositor.frames_at_look = self.fake.frames
        return self._compositor_black(now)


def test_black_just_after_the_content_changed_is_not_a_wrong_screen(qapp: object) -> None:
    """The arm64 run: the X root window read black the moment the idle page took over from the
    cover (its first frame not yet on the screen), while the display's own look, which renders
    the scene afresh, found content. Suspect only; the next look, after frames were swapped,
    reads content: health never said wrong."""
    judge = Judge(CompositorView(QObject(), 0.0, "xcb"))
    assert judge.answer("black", 100.0) is None
    assert judge.fake.requests == 1  # a frame asked for, for the next look to see
    judge.fake.frames += 3
    assert judge.answer("content", 102.0) is None
    assert judge._black_suspect is None
    # ... and with the watchdog's ticks 14 s apart (emulation), the same.
    assert judge.answer("black", 200.0) is None
    judge.fake.frames += 1
    assert judge.answer("content", 214.0) is None


def test_black_after_frames_of_content_were_swapped_is_a_wrong_screen(qapp: object) -> None:
    judge = Judge(CompositorView(QObject(), 0.0, "xcb"))
    assert judge.answer("black", 100.0) is None
    judge.fake.frames += 1  # one frame may have been on its way already: not proof yet
    assert judge.answer("black", 101.0) is None
    judge.fake.frames += 1
    problem = judge.answer("black", 102.0)
    assert problem is not None and problem.startswith("the compositor shows a black screen")


def test_black_without_new_frames_is_wrong_after_the_settle_time(qapp: object) -> None:
    """A window the compositor covers may be sent no frame callbacks, so it swaps none: black
    then counts after compositor_settle (5 s, times [screen] timeout-factor)."""
    judge = Judge(CompositorView(QObject(), 0.0, "xcb"))
    assert judge.answer("black", 100.0) is None
    assert judge.answer("black", 102.0) is None
    assert judge.answer("black", 104.9) is None
    assert judge.answer("black", 105.0) is not None
    assert RendererOptions.from_config(None, "").compositor_settle == 5.0
