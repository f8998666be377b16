"""The kiosk renderer with real Qt WebEngine on the test run's X server: pixels read back from
the scene."""

from __future__ import annotations

import os
import signal
from dataclasses import replace
from functools import partial
from itertools import count
from pathlib import Path

import pytest

from player.playitem import PlayItem
from player.renderer import KioskRenderer, RendererOptions
from player.renderer.webslot import SlotState
from tests.player.conftest import COLOURS, LoopbackServer, write_png
from tests.support.pixels import (
    FrameSampler,
    near,
    process_for,
    rgb,
    uniform_colour,
    wait_for_colour,
    wait_until,
)
from tests.support.ports import free_port
from tests.support.reports import Reports
from tests.support.videoscreen import blend_of

pytestmark = pytest.mark.qt

SIZE = (320, 240)
_tokens = count(1)


def item(url: str, content_type: str | None = None, duration: float | None = 10.0) -> PlayItem:
    return PlayItem(
        token=next(_tokens),
        url=url,
        source_url=url,
        content_type=content_type,
        duration=duration,
        origin="request",
    )


def show_and_wait(renderer: KioskRenderer, reports: Reports, play: PlayItem) -> None:
    renderer.show(play)
    done = wait_until(
        lambda: play.token in reports.shown_tokens() or play.token in reports.failed_tokens(),
        15,
    )
    assert done, f"no report for {play.url}"
    assert play.token in reports.shown_tokens(), reports.failed


def test_idle_page_is_shown_and_not_black(make_renderer: object) -> None:
    renderer, _ = make_renderer()  # type: ignore[operator]
    assert wait_until(lambda: renderer.last_frame_time() is not None, 10)
    image = renderer.grab_image()
    assert image.width() == SIZE[0]
    assert image.height() == SIZE[1]
    dark = sum(1 for x, y in [(10, 10), (160, 200), (300, 230)] if rgb(image, x, y) == (0, 0, 0))
    assert dark == 0, "the idle page must never be black"
    # Its background is the calm blue gradient, with light text somewhere on it.
    r, _, b = rgb(image, 5, 120)
    assert b > r and b > 50
    assert any(sum(rgb(image, x, y)) > 500 for x in range(20, 300, 2) for y in range(60, 140, 2))


@pytest.mark.parametrize("views", [2, 1])
def test_pages_and_cached_images_reach_the_screen(
    make_renderer: object, http_server: LoopbackServer, tmp_path: Path, views: int
) -> None:
    renderer, reports = make_renderer(views=views)  # type: ignore[operator]
    for name in ("red", "green", "blue"):
        show_and_wait(renderer, reports, item(http_server.colour(name)))
        assert uniform_colour(renderer.grab_image()) == COLOURS[name]
    picture = write_png(tmp_path / "yellow.png", COLOURS["yellow"], size=SIZE)
    show_and_wait(renderer, reports, item(picture.as_uri(), "image/png"))
    assert (
        renderer.region.stack.layer is renderer.region.image_layer
    )  # the native path, no browser round-trip
    assert uniform_colour(renderer.grab_image()) == COLOURS["yellow"]
    # A wider picture is fitted with black bars above and below it.
    wide = write_png(tmp_path / "wide.png", COLOURS["cyan"], size=(SIZE[0], SIZE[1] // 2))
    show_and_wait(renderer, reports, item(wide.as_uri(), "image/png"))
    middle = (SIZE[0] // 2, SIZE[1] // 2)
    assert wait_until(lambda: near(rgb(renderer.grab_image(), *middle), COLOURS["cyan"]), 5)
    shown = renderer.grab_image()
    for y in (2, SIZE[1] - 3):
        assert near(rgb(shown, SIZE[0] // 2, y), (0, 0, 0)), y
    # A remote image goes through a page and is fitted on black.
    http_server.served.files["/m.png"] = (
        (write_png(tmp_path / "m.png", COLOURS["magenta"], size=(32, 24))).read_bytes(),
        "image/png",
    )
    show_and_wait(renderer, reports, item(http_server.base + "/m.png", "image/png"))
    centre = renderer.grab_image()
    assert near(rgb(centre, SIZE[0] // 2, SIZE[1] // 2), COLOURS["magenta"])
    assert reports.failed == []


def test_low_memory_profile_keeps_one_decoded_picture(
    make_renderer: object, tmp_path: Path
) -> None:
    from types import SimpleNamespace

    config = SimpleNamespace(screen=SimpleNamespace(index=0, rotation=0, crossfade=0.0))
    assert RendererOptions.from_config(config, "").decoded_images == 3
    assert RendererOptions.from_config(config, "", low_memory=True).decoded_images == 1
    assert RendererOptions.from_config(config, "").views == 2
    assert RendererOptions.from_config(config, "", low_memory=True).views == 1
    renderer, reports = make_renderer(decoded_images=1)  # type: ignore[operator]
    names = ("yellow", "cyan", "yellow")
    for n, name in enumerate(names):
        picture = write_png(tmp_path / f"{name}{n}.png", COLOURS[name], size=SIZE)
        show_and_wait(renderer, reports, item(picture.as_uri(), "image/png"))
        assert uniform_colour(renderer.grab_image()) == COLOURS[name]
        # only the one on screen
        assert renderer.region.image_layer.decoded_urls() == [picture.as_uri()]
    assert reports.failed == []


def test_png_of_the_screen(make_renderer: object, http_server: LoopbackServer) -> None:
    from PySide6.QtGui import QImage

    renderer, reports = make_renderer()  # type: ignore[operator]
    show_and_wait(renderer, reports, item(http_server.colour("cyan")))
    png = renderer.grab_png()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    image = QImage.fromData(png)
    assert uniform_colour(image) == COLOURS["cyan"]


@pytest.mark.parametrize("views", [2, 1])
def test_prepared_item_swaps_without_a_blank_frame(
    make_renderer: object, http_server: LoopbackServer, tmp_path: Path, views: int
) -> None:
    # With one view, the next page loads in the view on screen behind a still of it: the
    # samples see the last item standing still, never the view's blank page.
    renderer, reports = make_renderer(views=views)  # type: ignore[operator]
    names = ["red", "green", "blue", "yellow", "magenta", "cyan"]
    pictures = [
        write_png(tmp_path / f"{name}.png", COLOURS[name], size=SIZE).as_uri()
        for name in ("yellow", "cyan")
    ]
    show_and_wait(renderer, reports, item(http_server.colour("red")))
    sampler = FrameSampler(renderer, [COLOURS[n] for n in names])
    sampler.start()
    transitions = 0
    for round_ in range(4):
        for index, name in enumerate(names[1:] + names[:1]):
            if index % 3 == 2:
                play = item(pictures[(round_ + index) % 2], "image/png")
            else:
                play = item(http_server.colour(name))
            if index % 2 == 0:
                renderer.prepare(play)
                process_for(0.15)
            show_and_wait(renderer, reports, play)
            transitions += 1
            process_for(0.03)
    sampler.stop()
    assert transitions == 24
    assert sampler.samples > 100
    assert sampler.bad == [], f"{len(sampler.bad)} blank or foreign frames: {sampler.bad[:3]}"


@pytest.mark.parametrize(("kind", "views"), [("page", 2), ("page", 1), ("picture", 2)])
def test_crossfade_never_passes_through_black_or_white(
    make_renderer: object, http_server: LoopbackServer, tmp_path: Path, kind: str, views: int
) -> None:
    """Every frame of a cross-fade is the outgoing item, the incoming one, or the two mixed
    in one proportion: never black, white or darker than the mix (a layer whose parts fade
    each on its own dims what is under it twice)."""
    renderer, reports = make_renderer(crossfade_ms=200, views=views)  # type: ignore[operator]

    def colour_item(name: str) -> PlayItem:
        if kind == "page":
            return item(http_server.colour(name))
        picture = write_png(tmp_path / f"{name}.png", COLOURS[name], size=SIZE)
        return item(picture.as_uri(), "image/png")

    show_and_wait(renderer, reports, colour_item("red"))
    sampler = FrameSampler(renderer, [])
    blank: list[tuple[int, int, int]] = []
    off_the_mix: list[tuple[int, int, int]] = []
    mixed = 0

    def sample() -> None:
        # Every few milliseconds from before the first show to after the last fade: a fade
        # that began while show_and_wait was still polling is seen too.
        nonlocal mixed
        point = rgb(renderer.grab_image(), SIZE[0] // 2, SIZE[1] // 2)
        sampler.samples += 1
        if near(point, (0, 0, 0), 30) or near(point, (255, 255, 255), 30):
            blank.append(point)
        elif not blend_of([point], COLOURS["red"], COLOURS["green"]):
            off_the_mix.append(point)
        elif 40 < point[0] < 215 and 40 < point[1] < 215:
            mixed += 1

    from PySide6.QtCore import QTimer

    timer = QTimer()
    timer.timeout.connect(sample)
    timer.start(5)
    for name in ("green", "red", "green"):
        show_and_wait(renderer, reports, colour_item(name))
        process_for(0.3)  # the fade (200 ms) plays out before the next show
    timer.stop()
    assert blank == []
    assert off_the_mix == []
    assert mixed > 0, "a crossfade shows both items blended for a moment"
    assert uniform_colour(renderer.grab_image()) == COLOURS["green"]


@pytest.mark.parametrize("kind", ["page", "picture"])
def test_an_item_with_a_cut_changes_the_screen_with_no_fade(
    make_renderer: object, http_server: LoopbackServer, tmp_path: Path, kind: str
) -> None:
    """``<playback transition="cut">`` (PlayItem.cut): the screen goes from one item to the
    next with no frame of the two mixed, and none blank, though the display cross-fades."""
    renderer, reports = make_renderer(crossfade_ms=300)  # type: ignore[operator]

    def colour_item(name: str) -> PlayItem:
        if kind == "page":
            return replace(item(http_server.colour(name)), cut=True)
        picture = write_png(tmp_path / f"{name}.png", COLOURS[name], size=SIZE)
        return replace(item(picture.as_uri(), "image/png"), cut=True)

    show_and_wait(renderer, reports, colour_item("red"))
    seen: list[tuple[int, int, int]] = []

    def sample() -> None:
        seen.append(rgb(renderer.grab_image(), SIZE[0] // 2, SIZE[1] // 2))

    from PySide6.QtCore import QTimer

    timer = QTimer()
    timer.timeout.connect(sample)
    timer.start(5)
    for name in ("green", "red", "green"):
        show_and_wait(renderer, reports, colour_item(name))
        process_for(0.4)  # longer than the display's cross-fade
    timer.stop()
    assert len(seen) > 50
    pure = [p for p in seen if near(p, COLOURS["red"], 30) or near(p, COLOURS["green"], 30)]
    assert seen == pure, f"mixed or blank frames: {[p for p in seen if p not in pure][:5]}"
    assert uniform_colour(renderer.grab_image()) == COLOURS["green"]


def test_failed_page_never_reaches_the_screen(
    make_renderer: object, http_server: LoopbackServer
) -> None:
    renderer, reports = make_renderer()  # type: ignore[operator]
    show_and_wait(renderer, reports, item(http_server.colour("green")))
    missing = item(http_server.base + "/missing-page")
    renderer.show(missing)
    assert wait_until(lambda: missing.token in reports.failed_tokens(), 10)
    assert "404" in dict(reports.failed)[missing.token]
    # A port nobody listens on: connection refused, as for a content server that is down.
    # (Not a port Chromium blocks, such as 1: that navigation never starts and only the load
    # timeout reports it.)
    unreachable = item(f"http://127.0.0.1:{free_port()}/")
    renderer.show(unreachable)
    assert wait_until(lambda: unreachable.token in reports.failed_tokens(), 10), (
        reports,
        unreachable.token,
    )
    process_for(0.2)
    # Still the last good item, never an error page.
    assert uniform_colour(renderer.grab_image()) == COLOURS["green"]


def test_page_that_stalls_is_abandoned_after_the_timeout(
    make_renderer: object, http_server: LoopbackServer
) -> None:
    renderer, reports = make_renderer(page_load_timeout=1.0)  # type: ignore[operator]
    show_and_wait(renderer, reports, item(http_server.colour("blue")))
    # Let the start-up idle page finish loading in the other view first: a load finishing
    # after the next item was sent to the same view can still be taken for it (a known race,
    # see the renderer's notes), which is not what this test is about.
    process_for(0.6)
    http_server.served.slow_paths.add("/slow")
    stalled = item(http_server.base + "/slow")
    renderer.show(stalled)
    assert wait_until(lambda: stalled.token in reports.failed_tokens(), 5)
    assert "within 1 s" in dict(reports.failed)[stalled.token]
    assert uniform_colour(renderer.grab_image()) == COLOURS["blue"]


def test_show_idle_replaces_content(make_renderer: object, http_server: LoopbackServer) -> None:
    renderer, reports = make_renderer()  # type: ignore[operator]
    show_and_wait(renderer, reports, item(http_server.colour("red")))
    renderer.show_idle()
    assert wait_until(lambda: uniform_colour(renderer.grab_image()) != COLOURS["red"], 10)
    assert renderer.current_token is None
    r, g, b = rgb(renderer.grab_image(), 5, 120)
    assert b > r and (r, g, b) != (0, 0, 0)


def test_rotation_turns_the_pixels(make_renderer: object, http_server: LoopbackServer) -> None:
    marker = (
        "<!doctype html><body style='margin:0;background:#ff0000'>"
        "<div style='width:50vw;height:50vh;background:#0000ff'></div></body>"
    )
    http_server.served.files["/marker.html"] = (marker.encode(), "text/html")
    expected = {  # where the page's blue top-left quadrant lands on the screen
        0: (40, 40),
        90: (SIZE[0] - 40, 40),
        180: (SIZE[0] - 40, SIZE[1] - 40),
        270: (40, SIZE[1] - 40),
    }
    for rotation in (90, 180):
        renderer, reports = make_renderer(rotation=rotation)  # type: ignore[operator]
        show_and_wait(renderer, reports, item(http_server.base + "/marker.html"))
        image = renderer.grab_image()
        assert (image.width(), image.height()) == SIZE
        for angle, (x, y) in expected.items():
            colour = rgb(image, x, y)
            wanted = COLOURS["blue"] if angle == rotation else COLOURS["red"]
            assert near(colour, wanted), (rotation, angle, colour)
        renderer.close()


def test_sensor_context_reaches_the_page(
    make_renderer: object, http_server: LoopbackServer
) -> None:
    page = """<!doctype html><body style='margin:0;background:#000000'><script>
    window.pdn.onSensor((sensors) => {
      if (sensors.colour) document.body.style.background = sensors.colour;
    });
    window.addEventListener('pdn-sensors', (event) => {
      if (event.detail.event) document.body.style.background = event.detail.event;
    });
    </script></body>"""
    http_server.served.files["/context.html"] = (page.encode(), "text/html")
    renderer, reports = make_renderer()  # type: ignore[operator]
    renderer.set_context({"colour": "#00ff00"})
    show_and_wait(renderer, reports, item(http_server.base + "/context.html"))
    assert wait_for_colour(renderer, COLOURS["green"], 5) is not None
    renderer.set_context({"colour": "#0000ff"})
    assert wait_for_colour(renderer, COLOURS["blue"], 5) is not None
    renderer.set_context({"event": "#ff00ff"})
    assert wait_for_colour(renderer, COLOURS["magenta"], 5) is not None


@pytest.mark.parametrize("views", [2, 1])
def test_killed_render_process_recovers(
    make_renderer: object, http_server: LoopbackServer, views: int
) -> None:
    renderer, reports = make_renderer(views=views)  # type: ignore[operator]
    play = item(http_server.colour("green"))
    show_and_wait(renderer, reports, play)
    slot = renderer.region.stack.front_slot()
    assert slot is not None
    pid = slot.render_pid()
    os.kill(pid, signal.SIGKILL)
    # The crashed view is covered at once, then the item comes back.
    assert wait_until(lambda: renderer.region.stack.layer is renderer.region.cover, 5)
    cover = rgb(renderer.grab_image(), 5, 120)
    assert cover != (0, 0, 0)
    assert wait_for_colour(renderer, COLOURS["green"], 10) is not None
    assert slot.render_pid() != pid
    assert renderer.current_token == play.token
    assert reports.failed == []


def test_hung_page_is_killed_and_reloaded(
    make_renderer: object, http_server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    hang = """<!doctype html><body style='margin:0;background:#00ffff'><script>
    if (!sessionStorage.getItem('hung')) {
      sessionStorage.setItem('hung', '1');
      setTimeout(() => { for (;;) {} }, 300);
    }
    </script></body>"""
    http_server.served.files["/hang.html"] = (hang.encode(), "text/html")
    renderer, reports = make_renderer(hang_timeout=2.0)  # type: ignore[operator]
    show_and_wait(renderer, reports, item(http_server.base + "/hang.html"))
    slot = renderer.region.stack.front_slot()
    assert slot is not None
    pid = slot.render_pid()
    # The "not alive" moment can be shorter than a poll: judge by the kill and the new process.
    assert wait_until(lambda: slot.render_pid() not in (0, pid), 12)
    assert any("hangs: killing it" in record.getMessage() for record in caplog.records)
    assert wait_for_colour(renderer, COLOURS["cyan"], 10) is not None
    assert wait_until(lambda: renderer.alive, 5)


@pytest.mark.parametrize("views", [2, 1])
def test_webm_video_plays_reports_its_length_and_its_end(
    make_renderer: object, http_server: LoopbackServer, views: int
) -> None:
    """A real VP8 WebM (2 s of green, made with ffmpeg): the kind PyPI's Qt WebEngine decodes."""
    clip_bytes = (Path(__file__).parent / "data" / "green-2s.webm").read_bytes()
    http_server.served.files["/clip.webm"] = (clip_bytes, "video/webm")
    renderer, reports = make_renderer(views=views)  # type: ignore[operator]
    show_and_wait(renderer, reports, item(http_server.colour("red")))
    clip = item(http_server.base + "/clip.webm", "video/webm", duration=None)
    show_and_wait(renderer, reports, clip)
    natural = dict((token, length) for token, _, length in reports.shown)[clip.token]
    assert natural == pytest.approx(2.0, abs=0.15)
    image = renderer.grab_image()
    centre = rgb(image, image.width() // 2, image.height() // 2)
    assert centre[1] > 180 and centre[0] < 80 and centre[2] < 80, centre  # green, not black
    assert wait_until(lambda: clip.token in reports.ended, 10)


def test_undecodable_video_is_refused_with_a_reason(
    make_renderer: object, http_server: LoopbackServer
) -> None:
    http_server.served.files["/clip.mp4"] = (b"\x00\x00\x00\x18ftypmp42" + bytes(64), "video/mp4")
    renderer, reports = make_renderer()  # type: ignore[operator]
    show_and_wait(renderer, reports, item(http_server.colour("red")))
    clip = item(http_server.base + "/clip.mp4", "video/mp4; codecs=avc1.42E01E", duration=None)
    renderer.show(clip)
    assert wait_until(lambda: clip.token in reports.failed_tokens(), 10)
    reason = dict(reports.failed)[clip.token]
    assert "decode" in reason or "play" in reason
    assert uniform_colour(renderer.grab_image()) == COLOURS["red"]


def test_every_item_gets_a_fresh_view_and_a_blank_slot_holds_none(
    make_renderer: object, http_server: LoopbackServer
) -> None:
    renderer, reports = make_renderer()  # type: ignore[operator]
    views = []
    for index in range(10):
        show_and_wait(renderer, reports, item(http_server.colour(["red", "blue"][index % 2])))
        front = renderer.region.stack.front_slot()
        assert front is not None and front.view is not None
        views.append(front.view)
        process_for(0.3)  # the old view is dropped shortly after the swap
        blank = [slot for slot in renderer.region.slots if slot is not renderer.region.stack.layer]
        assert [slot.state for slot in blank] == [SlotState.BLANK]
        assert blank[0].view is None  # no view, no document, no history, no render process
    # One view per navigation: nothing of an earlier item can accumulate in a view.
    assert len({id(view) for view in views}) == 10
    assert sum(slot.loads for slot in renderer.region.slots) >= 10


def test_blank_view_holds_no_render_process(
    make_renderer: object, http_server: LoopbackServer
) -> None:
    # A blank slot drops its page: no document, no heap and no render process of an old item
    # stays behind the screen (each item gets a fresh page, see webslot.py).
    renderer, reports = make_renderer()  # type: ignore[operator]
    for colour in ("red", "blue"):
        show_and_wait(renderer, reports, item(http_server.colour(colour)))
    assert wait_until(
        lambda: any(
            slot.state is SlotState.BLANK and slot is not renderer.region.stack.layer
            for slot in renderer.region.slots
        ),
        5,
    )
    blank = next(slot for slot in renderer.region.slots if slot is not renderer.region.stack.layer)
    front = renderer.region.stack.front_slot()
    assert front is not None and front.render_pid() > 0
    process_for(0.5)
    assert blank.render_pid() == 0
    assert blank.view is None and blank.loads >= 1  # a view per navigation, dropped when blank


def test_js_flags_of_our_own_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from player.renderer.options import JS_FLAGS, add_chromium_flags

    monkeypatch.setenv("QTWEBENGINE_CHROMIUM_FLAGS", "--disable-gpu")
    add_chromium_flags()
    assert JS_FLAGS in os.environ["QTWEBENGINE_CHROMIUM_FLAGS"].split()
    # Chromium keeps only the last --js-flags: a deployment's own is not overridden.
    monkeypatch.setenv("QTWEBENGINE_CHROMIUM_FLAGS", "--js-flags=--max-old-space-size=256")
    add_chromium_flags()
    flags = os.environ["QTWEBENGINE_CHROMIUM_FLAGS"].split()
    assert [f for f in flags if f.startswith("--js-flags=")] == [
        "--js-flags=--max-old-space-size=256"
    ]


def test_one_view_keeps_one_render_process(
    make_renderer: object, http_server: LoopbackServer, tmp_path: Path
) -> None:
    """The low-memory profile's single view: each page replaces the last in the same view (and
    its render process ends), a picture in between leaves the view with nothing loaded."""
    renderer, reports = make_renderer(views=1)  # type: ignore[operator]
    assert len(renderer.region.slots) == 1
    slot = renderer.region.slots[0]
    pids: list[int] = []
    picture = write_png(tmp_path / "yellow.png", COLOURS["yellow"], size=SIZE).as_uri()
    for name in ("red", "green", "blue"):
        show_and_wait(renderer, reports, item(http_server.colour(name)))
        assert renderer.region.stack.layer is slot
        assert uniform_colour(renderer.grab_image()) == COLOURS[name]
        process_for(0.3)
        assert not renderer.region.still.isVisible()  # the still is gone once the page painted
        pids.append(slot.render_pid())
    assert len(set(pids)) == 3
    for pid in pids[:-1]:
        assert wait_until(partial(_gone, pid), 5), f"render process {pid} stays"
    # A hint while the only view is on screen cannot be loaded anywhere: it is not.
    hint = item(http_server.colour("cyan"))
    renderer.prepare(hint)
    assert slot.item is not None and slot.item.url == http_server.colour("blue")
    show_and_wait(renderer, reports, item(picture, "image/png"))
    assert wait_until(lambda: slot.state is SlotState.BLANK, 5)
    # ... and behind a picture the view is free again: a hint loads there, shown at once.
    renderer.prepare(hint)
    assert wait_until(lambda: slot.state is SlotState.READY, 10)
    show_and_wait(renderer, reports, hint)
    assert uniform_colour(renderer.grab_image()) == COLOURS["cyan"]
    assert reports.failed == []


def _gone(pid: int) -> bool:
    """The process has ended (a zombie waiting for its parent counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return True
    return state == "Z"


def test_one_view_covers_a_failed_page_with_the_idle_facts(
    make_renderer: object, http_server: LoopbackServer
) -> None:
    """With one view the last item's page is gone once the next one loads in its place: a next
    item that fails shows the native cover, never its error page and never a still for ever."""
    renderer, reports = make_renderer(views=1, page_load_timeout=1.5)  # type: ignore[operator]
    show_and_wait(renderer, reports, item(http_server.colour("green")))
    missing = item(http_server.base + "/missing-page")
    renderer.show(missing)
    assert wait_until(lambda: missing.token in reports.failed_tokens(), 10)
    assert "404" in dict(reports.failed)[missing.token]
    process_for(0.2)
    process_for(0.3)
    assert (
        renderer.region.stack.layer is renderer.region.cover
        and not renderer.region.still.isVisible()
    )
    assert renderer.screen_state()["showing"] == "the cover"
    # A page that never answers: the still stands in until the load timeout, then the cover.
    show_and_wait(renderer, reports, item(http_server.colour("blue")))
    http_server.served.slow_paths.add("/slow")
    stalled = item(http_server.base + "/slow")
    renderer.show(stalled)
    process_for(0.3)
    assert renderer.screen_state()["showing"].startswith("a still of ")
    assert uniform_colour(renderer.grab_image()) == COLOURS["blue"]
    assert wait_until(lambda: stalled.token in reports.failed_tokens(), 5)
    assert wait_until(lambda: renderer.region.stack.layer is renderer.region.cover, 2)
    # And the next good item comes straight back.
    show_and_wait(renderer, reports, item(http_server.colour("red")))
    assert uniform_colour(renderer.grab_image()) == COLOURS["red"]
