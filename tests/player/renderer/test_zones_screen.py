"""Zones on the real screen: a layout splits the kiosk's scene into regions that each play
their own items, read back from the test run's X server."""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime
from itertools import count
from pathlib import Path
from types import SimpleNamespace

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtGui import QImage

from cds.layouts import zone_boxes
from cds.model import Layout, Zone
from cds.parser import parse
from cds.playlist import Playlist
from player.engine import Playback
from player.playitem import PlayItem, Renderer
from player.renderer import KioskRenderer, RendererOptions
from player.renderer.engineprocs import engine_children
from player.screenconfig import ScreenConfig
from player.store import DisplayStore
from player.zones import ZoneEngine
from tests.player.conftest import COLOURS, LoopbackServer, write_png
from tests.support.pixels import RGB, near, process_for, rgb, wait_until
from tests.support.reports import Reports
from tests.support.videofiles import solid_video

pytestmark = pytest.mark.qt

SIZE = (320, 240)  # the test renderer's window (tests/player/conftest.py)
MAIN_HEIGHT = 216  # main+ticker: main is the top 0.9 of the screen, the ticker the rest
TICKER = "ticker"
BLACK, WHITE = (0, 0, 0), (255, 255, 255)
_tokens = count(9000)


def main_and_ticker() -> tuple:  # type: ignore[type-arg]
    layout = Layout(
        zones=[Zone(name="main", set_name="promos"), Zone(name=TICKER, set_name="news")],
        template="main+ticker",
    )
    return zone_boxes(layout)


def split(renderer: KioskRenderer) -> tuple[Renderer, Reports]:
    """Split the screen main+ticker: the ticker zone's renderer, and what it reports."""
    renderer.set_layout("lobby", main_and_ticker())
    ticker = renderer.renderer(TICKER)
    reports = Reports()
    ticker.set_listener(reports)
    return ticker, reports


def play(url: str, content_type: str | None = None, zone: str = "main", **more: object) -> PlayItem:
    return PlayItem(
        token=next(_tokens),
        url=url,
        source_url=url,
        content_type=content_type,
        duration=more.pop("duration", 10.0),  # type: ignore[arg-type]
        origin="schedule",
        zone=zone,
    )


def show(renderer: Renderer, reports: Reports, item: PlayItem) -> None:
    renderer.show(item)
    done = wait_until(
        lambda: item.token in reports.shown_tokens() or item.token in reports.failed_tokens(), 15
    )
    assert done, f"no report for {item.url}"
    assert item.token in reports.shown_tokens(), reports.failed


# Probe points of each zone (inset from its edges by 4 px).
MAIN_POINTS = [(160, 108), (4, 4), (315, 4), (4, MAIN_HEIGHT - 5), (315, MAIN_HEIGHT - 5)]
TICKER_POINTS = [(160, 228), (4, MAIN_HEIGHT + 4), (315, 235)]


def blank_points(image: QImage, points: list[tuple[int, int]]) -> list[RGB]:
    """The points of ``points`` that show black or white."""
    seen = [rgb(image, x, y) for x, y in points]
    return [p for p in seen if near(p, BLACK, 30) or near(p, WHITE, 30)]


class ZoneSampler:
    """Reads the screen every few milliseconds and keeps each zone's black or white points."""

    def __init__(self, renderer: KioskRenderer, zones: dict[str, list[tuple[int, int]]]) -> None:
        self._renderer = renderer
        self._zones = zones
        self.samples = 0
        self.bad: dict[str, list[list[RGB]]] = {name: [] for name in zones}
        self._timer = QTimer()
        self._timer.setInterval(5)
        self._timer.timeout.connect(self._sample)

    def __enter__(self) -> ZoneSampler:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.stop()

    def _sample(self) -> None:
        image = self._renderer.grab_image()
        self.samples += 1
        for name, points in self._zones.items():
            blank = blank_points(image, points)
            if blank:
                self.bad[name].append(blank)


@pytest.fixture(scope="module")
def main_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A green video of the main zone's shape (no bars: a bar is black)."""
    ffmpeg = shutil.which("ffmpeg")
    assert ffmpeg, "ffmpeg is missing: bash packaging/dev.sh setup installs it"
    path = tmp_path_factory.mktemp("zones") / "green.mp4"
    return solid_video(ffmpeg, path, (0, 200, 0), (320, MAIN_HEIGHT), 2.0, ("libx264", "aac"))


def test_a_layout_plays_each_zone_with_no_black_or_white_frame(
    make_renderer: object, http_server: LoopbackServer, tmp_path: Path, main_video: Path
) -> None:
    """main+ticker: pictures, pages and a video in the main zone, pictures and pages in the
    ticker zone, cross-faded, 20 changes: every sample of each zone's rectangle shows content
    (an item, or two mixed), never black or white."""
    renderer, reports = make_renderer(crossfade_ms=200)  # type: ignore[operator]
    ticker, ticker_reports = split(renderer)
    assert renderer.screen_state()["layout"] == "lobby"

    def picture(name: str, zone: str = "main") -> PlayItem:
        # Of the zone's shape: a picture of another is fitted with black bars.
        size = (320, MAIN_HEIGHT) if zone == "main" else (320, SIZE[1] - MAIN_HEIGHT)
        path = write_png(tmp_path / f"{zone}-{name}.png", COLOURS[name], size=size)
        return play(path.as_uri(), "image/png", zone)

    main_items = [
        lambda: play(http_server.colour("red")),
        lambda: picture("blue"),
        lambda: play(main_video.as_uri(), "video/mp4", duration=None),
        lambda: picture("yellow"),
        lambda: play(http_server.colour("cyan")),
    ]
    ticker_items = [
        lambda: picture("magenta", TICKER),
        lambda: play(http_server.colour("yellow"), zone=TICKER),
    ]
    show(renderer, reports, main_items[0]())
    show(ticker, ticker_reports, ticker_items[0]())
    process_for(0.3)
    image = renderer.grab_image()
    assert near(rgb(image, 160, 108), COLOURS["red"]) and near(
        rgb(image, 160, 228), COLOURS["magenta"]
    )
    changes = 0
    with ZoneSampler(renderer, {"main": MAIN_POINTS, TICKER: TICKER_POINTS}) as sampler:
        for n in range(1, 11):
            show(renderer, reports, main_items[n % len(main_items)]())
            process_for(0.25)
            show(ticker, ticker_reports, ticker_items[n % len(ticker_items)]())
            process_for(0.25)
            changes += 2
    assert changes == 20
    assert reports.failed == [] and ticker_reports.failed == []
    # Each zone's reports went to its own listener.
    assert not set(reports.shown_tokens()) & set(ticker_reports.shown_tokens())
    assert sampler.samples > 100
    assert sampler.bad == {"main": [], TICKER: []}, {k: v[:3] for k, v in sampler.bad.items()}


@pytest.mark.parametrize("kind", ["page", "picture"])
def test_layout_to_full_screen_and_back_keeps_the_main_zone_playing(
    make_renderer: object, http_server: LoopbackServer, tmp_path: Path, kind: str
) -> None:
    """The main zone's region plays on through every change of layout: no black or white
    frame in it, the item on screen unchanged; the other zone comes and goes."""
    renderer, reports = make_renderer()  # type: ignore[operator]
    if kind == "page":
        shown = play(http_server.colour("blue"))
        points = MAIN_POINTS
    else:
        # The screen's shape: fitted with bars at the sides in the main zone, so the points
        # are inside the picture in both.
        blue = write_png(tmp_path / "blue.png", COLOURS["blue"], size=SIZE)
        shown = play(blue.as_uri(), "image/png")
        points = [(160, 108), (30, 20), (290, 200)]
    show(renderer, reports, shown)
    ticker_reports = Reports()
    with ZoneSampler(renderer, {"main": points}) as sampler:
        for _ in range(3):
            renderer.set_layout("lobby", main_and_ticker())
            ticker = renderer.renderer(TICKER)
            ticker.set_listener(ticker_reports)
            show(ticker, ticker_reports, play(http_server.colour("magenta"), zone=TICKER))
            process_for(0.2)
            assert near(rgb(renderer.grab_image(), 160, 228), COLOURS["magenta"])
            assert renderer.screen_state()["zones"] == {
                TICKER: f"page {http_server.colour('magenta')}"
            }
            renderer.set_layout(None, None)
            process_for(0.2)
            # Full screen: the main zone fills the screen again, the ticker zone is gone.
            assert near(rgb(renderer.grab_image(), 160, 200), COLOURS["blue"])
            assert "zones" not in renderer.screen_state()
    assert sampler.samples > 30
    assert sampler.bad == {"main": []}, sampler.bad["main"][:3]
    assert renderer.current_token == shown.token
    assert reports.failed == [] and ticker_reports.failed == []


def test_a_zone_whose_page_fails_shows_its_next_item_and_is_named_while_wrong(
    make_renderer: object, http_server: LoopbackServer
) -> None:
    """The ticker zone's page never answers: the zone stays black, the screen is wrong with
    the zone named, the page fails by its timeout, its engine (here: the test) shows the next
    item, and the screen is right again."""
    renderer, reports = make_renderer(page_load_timeout=9.0)  # type: ignore[operator]
    ticker, ticker_reports = split(renderer)
    show(renderer, reports, play(http_server.colour("blue")))
    http_server.served.slow_paths.add("/never")
    stalled = play(http_server.base + "/never", "text/html", zone=TICKER)
    ticker.show(stalled)
    problems: list[str] = []

    def named() -> bool:
        state = renderer.screen_state()
        problem = str(state.get("problem", ""))
        if problem:
            problems.append(problem)
        return problem.startswith(f"zone {TICKER}: black") and state["right"] is False

    assert wait_until(named, 8), problems
    assert renderer.screen_state()["zones"] == {TICKER: "nothing"}
    assert wait_until(lambda: stalled.token in ticker_reports.failed_tokens(), 8)
    assert reports.failed == []  # the main zone's listener heard nothing of it
    # What the zone's engine does on a failure: its next item.
    show(ticker, ticker_reports, play(http_server.colour("green"), zone=TICKER))
    assert wait_until(lambda: renderer.screen_state()["right"] is True, 3)
    image = renderer.grab_image()
    assert near(rgb(image, 160, 228), COLOURS["green"]) and near(
        rgb(image, 160, 108), COLOURS["blue"]
    )


def test_two_video_zones_each_have_their_own_decoders_and_a_third_is_refused(
    make_renderer: object, tmp_path: Path, main_video: Path
) -> None:
    renderer, reports = make_renderer(video_zones=2)  # type: ignore[operator]
    layout = Layout(
        zones=[
            Zone(name="main", set_name="a"),
            Zone(name="side", set_name="b"),
            Zone(name="third", set_name="c", x=0.0, y=0.9, width=1.0, height=0.1),
        ],
        template="main+sidebar",
    )
    renderer.set_layout("videos", zone_boxes(layout))
    side, third = renderer.renderer("side"), renderer.renderer("third")
    side_reports, third_reports = Reports(), Reports()
    side.set_listener(side_reports)
    third.set_listener(third_reports)
    video = replace(play(main_video.as_uri(), "video/mp4", duration=None))
    show(renderer, reports, video)
    show(side, side_reports, play(main_video.as_uri(), "video/mp4", "side", duration=None))
    assert renderer.regions["main"].video_layer is not renderer.regions["side"].video_layer
    assert renderer.regions["main"].plays_video() and renderer.regions["side"].plays_video()
    refused = play(main_video.as_uri(), "video/mp4", "third", duration=None)
    third.show(refused)
    assert wait_until(lambda: refused.token in third_reports.failed_tokens(), 2)
    assert "video-zones is 2" in dict(third_reports.failed)[refused.token]
    assert not renderer.regions["third"].plays_video()
    image = renderer.grab_image()
    for x, y in ((120, 108), (280, 108)):  # main, side: each its own video, green
        assert near(rgb(image, x, y), (0, 200, 0), 20), (x, y, rgb(image, x, y))


def test_a_zone_with_nothing_to_show_and_items_for_no_zone(
    make_renderer: object, http_server: LoopbackServer
) -> None:
    renderer, reports = make_renderer(crossfade_ms=200)  # type: ignore[operator]
    assert renderer.renderer("main") is renderer
    with pytest.raises(ValueError, match="not within the screen"):
        renderer.set_layout("bad", [replace(main_and_ticker()[0], width=1.5)])
    with pytest.raises(ValueError, match="no zone 'main'"):
        renderer.set_layout("bad", main_and_ticker()[1:])
    assert renderer.layout_name is None and list(renderer.regions) == ["main"]
    ticker, ticker_reports = split(renderer)
    zone = renderer.regions[TICKER]
    assert [slot.view for slot in zone.slots] == [None, None]  # no page: no web view
    show(renderer, reports, play(http_server.colour("blue")))
    show(ticker, ticker_reports, play(http_server.colour("green"), zone=TICKER))
    # The zone appeared with the layout: its first item fades in.
    assert zone.stack.fading_until > 0
    assert wait_until(lambda: near(rgb(renderer.grab_image(), 160, 228), COLOURS["green"]), 2)
    # The watchdog's look at the screen classifies each zone's rectangle on its own.
    watchdog = renderer.watchdog
    watchdog._look_at_the_screen(time.monotonic())
    assert (watchdog.frame_class, watchdog._zone_frames) == ("content", {TICKER: "content"})
    # Nothing to play in the ticker zone: it shows nothing, and its engine hears so.
    ticker.show_idle()
    assert len(ticker_reports.idle) == 1
    assert wait_until(lambda: near(rgb(renderer.grab_image(), 160, 228), BLACK), 3)
    assert renderer.screen_state()["zones"] == {TICKER: "nothing"}
    process_for(1.5)
    assert renderer.screen_state()["right"] is True
    assert [slot.view for slot in zone.slots] == [None, None]  # its page's view is gone
    watchdog._look_at_the_screen(time.monotonic())
    assert (watchdog.frame_class, watchdog._zone_frames) == ("content", {TICKER: "black"})
    # An item for a zone the screen does not have now: failed, with the reason, to that zone.
    renderer.set_layout(None, None)
    late = play(http_server.colour("red"), zone=TICKER)
    ticker.show(late)
    assert dict(ticker_reports.failed)[late.token] == f"the screen has no zone '{TICKER}' now"
    assert near(rgb(renderer.grab_image(), 160, 228), COLOURS["blue"])


def test_the_zone_engine_drives_the_zones_on_the_screen(
    make_renderer: object, http_server: LoopbackServer, tmp_path: Path
) -> None:
    """player.zones.ZoneEngine with this renderer as its screen: the layout document splits
    the screen, each zone shows its own set's item in its rectangle, and each zone's record
    names it."""
    renderer, _ = make_renderer()  # type: ignore[operator]

    def page(colour: str) -> str:
        return (
            '<content-item content-type="text/html"><requires-file><sources><uri>'
            f"{http_server.colour(colour)}</uri></sources></requires-file></content-item>"
        )

    document = f"""<content-set name="lobby">
      <layout template="main+ticker">
        <zone name="main" set="promos"/><zone name="ticker" set="news"/>
      </layout>
      <content-set name="promos">{page("blue")}</content-set>
      <content-set name="news">{page("yellow")}</content-set>
    </content-set>""".encode()
    records: list[Playback] = []
    engine = ZoneEngine(
        clock=lambda: datetime.now(UTC),
        schedule=Playlist(UTC),
        store=DisplayStore(tmp_path / "display.db"),
        screen=renderer,
        new_schedule=lambda: Playlist(UTC),
        on_playback=records.append,
    )
    engine.set_documents([parse(document).root])
    ticks = QTimer()
    ticks.timeout.connect(engine.tick)
    ticks.start(50)
    try:

        def both_shown() -> bool:
            zones = {record.zone for record in records if record.content_item}
            return zones == {"main", TICKER}

        assert wait_until(both_shown, 15), records
        process_for(0.2)
    finally:
        ticks.stop()
    image = renderer.grab_image()
    assert near(rgb(image, 160, 108), COLOURS["blue"])
    assert near(rgb(image, 160, 228), COLOURS["yellow"])
    assert renderer.layout_name == "lobby"
    by_zone = {record.zone: record for record in records if record.content_item}
    assert by_zone[TICKER].content_item == http_server.colour("yellow")
    assert by_zone["main"].content_item == http_server.colour("blue")
    assert by_zone["main"].layout == "lobby"


def test_zones_turn_with_the_screen(make_renderer: object, http_server: LoopbackServer) -> None:
    """[screen] rotation = 90 (the content's top on the panel's right): the boxes are the
    audience's, so the ticker along the content's bottom runs down the window's left edge,
    and the watchdog looks at that rectangle."""
    renderer, reports = make_renderer(rotation=90)  # type: ignore[operator]
    ticker, ticker_reports = split(renderer)
    show(renderer, reports, play(http_server.colour("blue")))
    show(ticker, ticker_reports, play(http_server.colour("yellow"), zone=TICKER))
    process_for(0.2)
    image = renderer.grab_image()
    # The content is 240 x 320 as the audience sees it: the ticker is its bottom 32 px.
    assert near(rgb(image, 10, 120), COLOURS["yellow"])
    assert near(rgb(image, 40, 120), COLOURS["blue"])
    assert near(rgb(image, 300, 10), COLOURS["blue"])
    [(name, _, rect)] = renderer.zones.watched()
    assert (name, rect.x(), rect.y(), rect.width(), rect.height()) == (TICKER, 0, 0, 32, 240)


def test_zones_that_go_leave_nothing_behind(
    make_renderer: object, http_server: LoopbackServer, tmp_path: Path
) -> None:
    """A layout that comes and goes ten times, its ticker zone showing a page and a picture
    each time: once it has gone, no render process, decoding thread or region of it is left."""
    renderer, reports = make_renderer()  # type: ignore[operator]
    show(renderer, reports, play(http_server.colour("blue")))
    process_for(0.5)

    def renderers() -> int:
        """Render processes alive: forked by a zygote, they are its children."""
        zygotes = [p.pid for p in engine_children() if p.kind == "zygote"]
        return sum(1 for z in zygotes for child in engine_children(z) if child.alive)

    before = (renderers(), threading.active_count())
    assert before[0] >= 1  # the main zone's page
    picture = write_png(tmp_path / "magenta.png", COLOURS["magenta"], size=(320, 24))
    for _ in range(10):
        ticker, ticker_reports = split(renderer)
        show(ticker, ticker_reports, play(http_server.colour("yellow"), zone=TICKER))
        show(ticker, ticker_reports, play(picture.as_uri(), "image/png", TICKER))
        renderer.set_layout(None, None)
    assert list(renderer.regions) == ["main"]

    def settled() -> bool:
        return renderers() <= before[0] and threading.active_count() == before[1]

    assert wait_until(settled, 10), (before, renderers(), threading.active_count())
    assert near(rgb(renderer.grab_image(), 160, 228), COLOURS["blue"])


def test_video_zones_come_from_the_screen_config() -> None:
    screen = ScreenConfig(video_zones=1)
    assert RendererOptions.from_config(SimpleNamespace(screen=screen), "").video_zones == 1
    auto = ScreenConfig().video_zone_limit()  # 1 on a Raspberry Pi, 2 elsewhere
    assert (
        RendererOptions.from_config(SimpleNamespace(screen=ScreenConfig()), "").video_zones == auto
    )
    assert RendererOptions.from_config(None, "").video_zones == 2
    with pytest.raises(ValueError, match="video_zones"):
        RendererOptions(video_zones=0)
