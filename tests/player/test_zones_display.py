"""Zones on a real ``pdn display`` (Qt on an Xvfb of its own, waitress, SQLite), read back from
the X screen: a ``main+ticker`` layout posted as a CDS, pictures, a page and an H.264 video in
the main zone and a feed ticker from loopback below it; and a zone whose page fails."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tests.support.display import DisplayProcess
from tests.support.pages import HookReceiver, PageServer, Reply
from tests.support.png import png
from tests.support.process import CREDENTIALS
from tests.support.screenpoints import PointFrame, PointGrab
from tests.support.tickerscreen import StripGrab, analyse, ffmpeg
from tests.support.tools import require_tools
from tests.support.videofiles import solid_video
from tests.support.waiting import wait_until
from tests.support.xvfb import xvfb

pytestmark = [pytest.mark.qt, pytest.mark.xvfb, pytest.mark.slow]

WIDTH, HEIGHT = 640, 360
MAIN_HEIGHT = 288  # the main zone: the top 0.8 of the screen; the ticker the 72 px below
# The pictures and the video have the main zone's shape (20:9): no bars beside them.
TICKER_SPEED = 300  # [screen] ticker-speed: px/s for a bar 108 px high
TICKER_PX_S = TICKER_SPEED * (HEIGHT - MAIN_HEIGHT) / 108
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 20, 20),
    "blue": (20, 40, 220),
    "green": (20, 160, 60),
    "yellow": (230, 220, 20),
}
BLACK, WHITE = (0, 0, 0), (255, 255, 255)
MAIN_POINTS = [(320, 144), (6, 6), (633, 6), (6, MAIN_HEIGHT - 7), (633, MAIN_HEIGHT - 7)]
CHANGES = 20  # of the main zone, read from the screen
TICKER_POINTS = [(x, MAIN_HEIGHT + 36) for x in range(4, WIDTH, 40)]
RSS = """<?xml version="1.0"?><rss version="2.0"><channel><title>News</title>
<item><title>Doors open at nine</title></item>
<item><title>All trains are on time</title></item>
<item><title>The lobby cafe closes at six</title></item>
</channel></rss>"""


def near(a: tuple[int, int, int], b: tuple[int, int, int], tolerance: int) -> bool:
    return all(abs(p - q) <= tolerance for p, q in zip(a, b, strict=True))


def page(colour: str) -> bytes:
    r, g, b = COLOURS[colour]
    return f"<!doctype html><body style='margin:0;background:rgb({r},{g},{b})'></body>".encode()


def item(content_type: str, uri: str) -> str:
    return (
        f'<content-item content-type="{content_type}"><requires-file><sources>'
        f"<uri>{uri}</uri></sources></requires-file></content-item>"
    )


def layout_cds(name: str, main: list[str], ticker: list[str], seconds: float = 3) -> bytes:
    return f"""<content-set name="{name}">
  <constraints><scheduling-constraints>
    <preferred-duration>{seconds:g} seconds</preferred-duration>
  </scheduling-constraints></constraints>
  <layout template="main+ticker">
    <zone name="main" set="promos" height="0.8"/>
    <zone name="ticker" set="news" y="0.8" height="0.2"/>
  </layout>
  <content-set name="promos">{"".join(main)}</content-set>
  <content-set name="news">{"".join(ticker)}</content-set>
</content-set>""".encode()


class Screen:
    """The display on its Xvfb, the content server and the webhook receiver."""

    def __init__(self, display: DisplayProcess, x_display: str, content: PageServer) -> None:
        self.display = display
        self.x_display = x_display
        self.content = content
        self.hooks = HookReceiver()
        subscribed = display.post("/playback/subscribe/", json={"subscriber-uri": self.hooks.url()})
        assert subscribed.ok, subscribed.text

    def post_cds(self, document: bytes) -> None:
        answer = self.display.post("/schedule", data=document, headers={"Content-Type": "text/xml"})
        assert answer.ok, answer.text

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(body) for body in self.hooks.bodies()]


@pytest.fixture(scope="module")
def screen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Screen]:
    require_tools("Xvfb", "ffmpeg")
    folder = tmp_path_factory.mktemp("zones-display")
    content = PageServer()
    video = solid_video(
        ffmpeg(), folder / "green.mp4", COLOURS["green"], (320, 144), 3.0, ("libx264", "aac")
    )
    content.page("/red.png", png(80, 36, COLOURS["red"]), "image/png")
    content.page("/yellow.png", png(80, 36, COLOURS["yellow"]), "image/png")
    content.page("/blue.html", page("blue"))
    content.page("/green.mp4", video.read_bytes(), "video/mp4")
    content.page("/news.rss", RSS, "application/rss+xml")
    with xvfb(WIDTH, HEIGHT) as x_display:
        display = DisplayProcess(
            folder,
            config=f'name = "Zones"\ntimezone = "UTC"\n[screen]\nticker-speed = {TICKER_SPEED}\n',
            platform="xcb",
            env={"DISPLAY": x_display},
            unset=(*CREDENTIALS, "WAYLAND_DISPLAY"),
        )
        made = None
        try:
            display.start().wait_ready(timeout=90)
            made = Screen(display, x_display, content)
            yield made
        finally:
            display.stop(30)
            if made is not None:
                made.hooks.close()
            content.close()


def blank(frame: PointFrame, zone: str) -> bool:
    """A black or white frame in ``zone``: for the main zone (a flat colour each item, or a
    cross-fade of two), any point black or white; for the ticker (white text on a dark bar),
    every point black or every point white."""
    points = frame.groups[zone]
    if zone == "main":
        return any(near(p, BLACK, 30) or near(p, WHITE, 30) for p in points)
    return all(near(p, BLACK, 6) for p in points) or all(near(p, WHITE, 30) for p in points)


def colour_of(url: str) -> tuple[int, int, int]:
    return COLOURS[next(name for name in COLOURS if f"/{name}." in url)]


def test_main_and_ticker_play_their_items_on_the_screen(screen: Screen) -> None:
    """Both zones show their content with no black or white frame in either across the main
    zone's changes (pictures, a page, an H.264 video); the ticker moves in every frame; the
    playback record and the webhooks name each zone's item when the screen shows it."""
    url = screen.content.url
    main = [
        item("image/png", f"{url}/red.png"),
        item("text/html", f"{url}/blue.html"),
        item("video/mp4", f"{url}/green.mp4"),
        item("image/png", f"{url}/yellow.png"),
    ]
    feed = f"{url}/news.rss"
    screen.post_cds(layout_cds("lobby", main, [item("application/rss+xml", feed)], seconds=2.5))
    display = screen.display

    def both_zones(record: dict[str, Any]) -> bool:
        zones = record.get("zones", {})
        return (
            record.get("layout") == "lobby"
            and zones.get("ticker", {}).get("content-item") == feed
            and zones.get("main", {}).get("content-item") is not None
        )

    first = display.wait_playback(both_zones, timeout=60)
    assert first["zones"]["ticker"]["content-type"] == "application/rss+xml"
    health = display.health()
    assert health["zones"]["layout"] == "lobby"
    assert set(health["zones"]["zones"]) == {"main", "ticker"}

    grab = PointGrab(
        screen.x_display, (WIDTH, HEIGHT), {"main": MAIN_POINTS, "ticker": TICKER_POINTS}
    )
    try:
        # Twenty changes of the main zone: every kind of item, each several times.
        sequence = first["sequence"]
        assert wait_until(
            lambda: (
                sum(
                    1
                    for record in screen.records()
                    if record["sequence"] > sequence and record["zone"] == "main"
                )
                >= CHANGES
            ),
            120,
        ), screen.records()[-3:]
    finally:
        frames = grab.stop()
    assert len(frames) > 100, len(frames)
    for zone in ("main", "ticker"):
        bad = [frame for frame in frames if blank(frame, zone)]
        assert not bad, f"{len(bad)} of {len(frames)} frames blank in {zone}: {bad[:3]}"

    # Each main zone's change, named by its webhook, is on the screen from then to the next.
    changes = sorted(
        (r for r in screen.records() if r["zone"] == "main" and r["sequence"] >= sequence),
        key=lambda r: r["sequence"],
    )
    assert len(changes) >= CHANGES, len(changes)
    kinds = {change["content-type"] for change in changes}
    assert {"image/png", "text/html", "video/mp4"} <= kinds, kinds
    for change, after in pairwise(changes):
        begin = datetime.fromisoformat(change["started"]).timestamp() + 0.5  # past the fade
        end = datetime.fromisoformat(after["started"]).timestamp() - 0.1
        seen = [f.groups["main"][0] for f in frames if begin <= f.at <= end]
        want = colour_of(change["content-item"])
        wrong = [p for p in seen if not near(p, want, 40)]
        assert seen and not wrong, (change["content-item"], want, wrong[:5])
    for record in screen.records():
        if record["sequence"] >= sequence:
            assert record["layout"] == "lobby"
            assert record["zones"]["ticker"]["content-item"] == feed, record
            assert record["zones"]["main"]["content-item"] == record["content-item"]

    # The ticker moves in every frame the screen shows (read in consecutive frames).
    strip = StripGrab(
        screen.x_display,
        (0, MAIN_HEIGHT + 8, WIDTH, 56),
        Path(screen.display.log.parent / "strip.nut"),
        fps=120,
    )
    time.sleep(2.5)
    strip.stop()
    figures = analyse(strip.frames())
    assert figures.frames > 40, figures
    assert figures.wrong_way == 0, figures
    assert 0.75 * TICKER_PX_S <= figures.px_per_second <= 1.25 * TICKER_PX_S, figures


def test_a_zone_whose_page_fails_shows_its_next_item_and_health_names_it(
    screen: Screen,
) -> None:
    """A layout whose ticker zone starts with a page that never answers: /x/health names the
    zone while it is black; the page fails by its timeout and the zone shows its next item. A
    JSON request naming the zone plays there."""
    url = screen.content.url
    screen.content.reply("/never.html", _never())
    screen.post_cds(b'<content-set name="lobby"/>')  # the layout above goes
    screen.post_cds(
        layout_cds(
            "foyer",
            [item("text/html", f"{url}/blue.html")],
            [item("text/html", f"{url}/never.html"), item("text/html", f"{url}/yellow.html")],
            seconds=30,
        )
    )
    screen.content.page("/yellow.html", page("yellow"))
    problems: list[str] = []

    def named() -> bool:
        renderer = screen.display.health()["renderer"]
        problems.append(str(renderer.get("problem", "")))
        return problems[-1].startswith("zone ticker: black")

    assert wait_until(named, 15, step=0.5), problems
    record = screen.display.wait_playback(
        lambda r: (
            r.get("layout") == "foyer"
            and r["zones"].get("ticker", {}).get("content-item") == f"{url}/yellow.html"
        ),
        timeout=40,
    )
    assert record["zones"]["main"]["content-item"] == f"{url}/blue.html"
    assert wait_until(lambda: screen.display.health()["renderer"]["alive"] is True, 10, step=0.5)
    frame = PointGrab(screen.x_display, (WIDTH, HEIGHT), {"ticker": TICKER_POINTS})
    assert wait_until(lambda: len(frame.taken()) > 3, 10)
    last = frame.stop()[-1]
    assert all(near(p, COLOURS["yellow"], 40) for p in last.groups["ticker"]), last

    # A JSON request naming the ticker zone plays there; a zone the screen does not have is
    # rejected with the reason.
    request = {"content-item": f"{url}/blue.html", "preferred-duration": "20 s", "zone": "ticker"}
    answer = screen.display.post("/schedule", json=request)
    assert answer.status_code == 202 and answer.json() == {"request-status": "scheduling"}
    record = screen.display.wait_playback(
        lambda r: r["zone"] == "ticker" and r["zones"]["ticker"]["origin"] == "request"
    )
    assert record["zones"]["ticker"]["content-item"] == f"{url}/blue.html"
    answer = screen.display.post("/schedule", json={**request, "zone": "side"})
    assert answer.status_code == 202, answer.text
    assert answer.json()["request-status"] == "rejected"
    assert "no zone 'side'" in answer.json()["reason"]


def _never() -> Reply:
    return Reply(200, page("red"), "text/html", delay=60)
