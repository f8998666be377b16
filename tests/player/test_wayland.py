"""The real ``pdn display`` under a real Wayland compositor (headless sway,
tests/support/compositor.py),
its screen read back from the compositor with ``grim`` (wlr-screencopy), never from Qt.

One compositor and one display for the module (each takes seconds to start): the idle page,
a scheduled page, cross-fades with no black frame, screen power through ``wlr-randr``, the
watchdog catching the compositor showing black; the rotation test adds a second display on a
workspace of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from player.commands import run_command
from player.power import WaylandOutputPower
from player.renderer.compositor import ppm_frame_class
from tests.support.compositor import CompositorDisplay, Sway, ppm_pixel, ppm_size, sway
from tests.support.pages import PageServer, Reply, Request
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.qt, pytest.mark.slow]

WIDTH, HEIGHT = 640, 360  # small: every grim copies the whole output
COLOURS = {"red": (255, 0, 0), "blue": (0, 0, 255), "green": (0, 160, 0)}
MARKER = (
    b"<!doctype html><body style='margin:0;background:#ff0000'>"
    b"<div style='width:50vw;height:50vh;background:#0000ff'></div></body>"
)


def colour_page(request: Request) -> Reply:
    """Colour pages (/red, /blue, /green) and a corner marker (/marker)."""
    name = request.route.strip("/")
    if name == "marker":
        return Reply(200, MARKER)
    r, g, b = COLOURS.get(name, (0, 0, 0))
    return Reply(200, f"<!doctype html><body style='background:rgb({r},{g},{b})'>".encode())


def near(a: tuple[int, int, int], b: tuple[int, int, int], tolerance: int = 12) -> bool:
    return all(abs(p - q) <= tolerance for p, q in zip(a, b, strict=True))


def points(data: bytes) -> list[tuple[int, int, int]]:
    """The centre and four points near the corners of the compositor's output."""
    w, h = ppm_size(data)
    return [ppm_pixel(data, x, y) for x, y in ((w // 2, h // 2), (4, 4), (w - 5, 4),
                                               (4, h - 5), (w - 5, h - 5))]  # fmt: skip


def shows(compositor: Sway, colour: tuple[int, int, int]) -> bool:
    return all(near(p, colour) for p in points(compositor.grim()))


@pytest.fixture(scope="module")
def compositor() -> Iterator[Sway]:
    with sway(WIDTH, HEIGHT) as running:
        yield running


@pytest.fixture(scope="module")
def pages() -> Iterator[PageServer]:
    with PageServer() as served:
        served.handle(colour_page)
        yield served


@pytest.fixture(scope="module")
def display(compositor: Sway) -> Iterator[CompositorDisplay]:
    with tempfile.TemporaryDirectory(prefix="pdn-wayland-") as folder:
        running = CompositorDisplay(compositor, Path(folder))
        yield running
        running.stop()


def test_the_idle_page_reaches_the_compositor(compositor: Sway, display: CompositorDisplay) -> None:
    def idle_on_screen() -> bool:
        screen = display.screen()
        return screen.get("showing") == "the idle page" and screen.get("right") is True

    wait_until(idle_on_screen, 30, lambda: f"{display.screen()}\n{display.text()}")
    wait_until(
        lambda: ppm_frame_class(compositor.grim()) == "content",
        15,
        lambda: f"the compositor shows black for the idle page: {display.screen()}",
    )
    # What the compositor shows is the display's own picture of the idle page.
    shot = requests.get(display.url + "/x/screenshot", timeout=10)
    assert shot.status_code == 200
    wait_until(
        lambda: display.screen()["compositor"].get("frame") == "content",
        10,
        lambda: f"the watchdog never saw the compositor's frame: {display.screen()}",
    )
    assert display.screen()["compositor"]["reads"] == "grim (wlr-screencopy)"


def test_scheduled_pages_cross_fade_with_no_black_frame(
    compositor: Sway, display: CompositorDisplay, pages: PageServer
) -> None:
    wait_until(lambda: display.screen().get("right") is True, 30, display.text)
    names = ("red", "blue", "green")
    for name in names:
        display.show(f"{pages.url}/{name}", 2)  # one after the other, each cross-fading in
    samples: list[str] = []
    seen: list[str] = []

    def sampled_until_green() -> bool:
        frame = compositor.grim()
        samples.append(ppm_frame_class(frame))
        colour = next((n for n in names if all(near(p, COLOURS[n]) for p in points(frame))), None)
        if colour is not None and colour not in seen:
            seen.append(colour)
        return seen[-1:] == ["green"]

    wait_until(sampled_until_green, 40, lambda: f"only {seen} reached the compositor", step=0)
    assert seen == list(names)
    assert len(samples) > 10
    assert "black" not in samples, samples


def test_screen_power_says_when_the_compositor_refuses(
    compositor: Sway, display: CompositorDisplay
) -> None:
    """The display's Wayland power method (``wlopm``, else ``wlr-randr``) against a real
    compositor. Measured on Debian bookworm: wlopm is not packaged, cage 0.1.4 has no output
    management at all, and sway refuses to switch its headless output off through it. What
    matters is that a refusal comes back as a failure with the compositor's reason (the power
    schedule then logs it and tries its other methods), not as a screen believed dark."""
    wait_until(lambda: ppm_frame_class(compositor.grim()) == "content", 30, display.text)
    power = WaylandOutputPower(run_command, shutil.which, str(compositor.socket))
    assert power.available()
    result = power.set_power(False)
    if result.ok:  # a compositor that can: the output really goes dark, and comes back
        listing = subprocess.run(
            ["wlr-randr"],
            env=compositor.env(),
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        assert "Enabled: no" in listing.stdout, listing.stdout
        assert power.set_power(True).ok
    else:
        assert result.stderr.strip(), result
    wait_until(lambda: ppm_frame_class(compositor.grim()) == "content", 15, display.text)
    wait_until(lambda: display.screen().get("right") is True, 15, lambda: str(display.screen()))


def test_the_watchdog_catches_the_compositor_showing_black(
    compositor: Sway, display: CompositorDisplay
) -> None:
    wait_until(lambda: ppm_frame_class(compositor.grim()) == "content", 30, display.text)
    wait_until(lambda: display.screen().get("right") is True, 30, lambda: str(display.screen()))
    # Another client's black fullscreen window over the display's: the compositor shows
    # black, the display's own window is still there and painting.
    cover = subprocess.Popen(
        [sys.executable, "-m", "tests.player.black_window"],
        env=compositor.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert cover.stdout is not None and cover.stdout.readline().strip() == "SHOWN"
        wait_until(lambda: ppm_frame_class(compositor.grim()) == "black", 10, lambda: "not black")
        wait_until(
            lambda: display.screen().get("right") is False,
            15,
            lambda: f"the watchdog did not see the black screen: {display.screen()}",
        )
        screen = display.screen()
        assert "the compositor shows a black screen" in screen["problem"], screen
        assert screen["compositor"]["frame"] == "black"
    finally:
        assert cover.stdin is not None and cover.stdout is not None
        cover.stdin.close()
        cover.wait(15)
        cover.stdout.close()
    # Recovered like any wrong screen: the display goes on, right again.
    wait_until(lambda: display.screen().get("right") is True, 30, lambda: str(display.screen()))
    assert ppm_frame_class(compositor.grim()) == "content"
    assert display.running


def test_rotation_turns_the_picture_on_the_compositor(
    compositor: Sway, display: CompositorDisplay, pages: PageServer
) -> None:
    compositor.swaymsg("workspace", "3")  # a workspace of its own for the second display
    try:
        with tempfile.TemporaryDirectory(prefix="pdn-wayland-") as folder:
            turned = CompositorDisplay(compositor, Path(folder), "rotation = 90\n")
            try:
                turned.show(f"{pages.url}/marker")
                # At 90 degrees the page's top-left quarter (blue) is at the top right.
                corners = {
                    "top-right": ((WIDTH - 3, 2), COLOURS["blue"]),
                    "top-left": ((2, 2), COLOURS["red"]),
                    "bottom-left": ((2, HEIGHT - 3), COLOURS["red"]),
                    "bottom-right": ((WIDTH - 3, HEIGHT - 3), COLOURS["red"]),
                }

                def turned_on_screen() -> bool:
                    frame = compositor.grim()
                    return all(
                        near(ppm_pixel(frame, x, y), colour) for (x, y), colour in corners.values()
                    )

                wait_until(turned_on_screen, 30, turned.text)
            finally:
                turned.stop()
    finally:
        compositor.swaymsg("workspace", "1")
    assert os.path.exists(compositor.socket)
