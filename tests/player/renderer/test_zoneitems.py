"""A zone's ticker and clock (player/renderer/zoneitems.py, qml/Ticker.qml, qml/Clock.qml) on
the X screen, each in a box of a scene as a region would place it: the ticker moves in every
frame the screen shows (read back from the screen by ffmpeg x11grab), takes a feed's lines
from loopback and follows it, keeps its lines when the feed goes or turns hostile; the clock
shows the time in its time zone and redraws the scene only when its text changes."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote
from zoneinfo import ZoneInfo

import pytest
from PySide6.QtCore import QLocale, QObject, Qt, QUrl, Slot
from PySide6.QtGui import QColor, QGuiApplication, QImage
from PySide6.QtQuick import QQuickItem, QQuickView

from player.feeds import FeedSpec
from player.renderer.stage import QML_DIR
from player.renderer.zoneitems import SEPARATOR, Clock, Ticker, clock_format, shows_seconds
from tests.support.pages import PageServer
from tests.support.pixels import RGB, near, process_for, rgb, wait_until
from tests.support.tickerscreen import StripGrab, analyse

pytestmark = pytest.mark.qt

TICKER_BOX = (0, 612, 1280, 108)  # the bar of a 1280x720 main+ticker layout
CLOCK_BOX = (1040, 24, 216, 96)
BAR: RGB = (0x14, 0x14, 0x14)


class SwapCounter(QObject):
    """Frames the window swapped, counted on the GUI thread (queued: a Python slot on the
    render thread would wait for the GIL while the GUI thread waits for it to stop)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    @Slot()
    def swapped(self) -> None:
        self.count += 1


class Scene:
    """A frameless window at the screen's top left, black, holding a ticker and a clock (each
    given) in boxes of their own, as a region holds them."""

    def __init__(self, tmp_path: Path, ticker: Ticker | None, clock: Clock | None) -> None:
        parts = []
        if ticker is not None:
            x, y, w, h = TICKER_BOX
            parts.append(f"Item {{ x: {x}; y: {y}; width: {w}; height: {h}\n"
                         "  Ticker { ticker: root.tickerObject } }")  # fmt: skip
        if clock is not None:
            x, y, w, h = CLOCK_BOX
            parts.append(f"Item {{ x: {x}; y: {y}; width: {w}; height: {h}\n"
                         "  Clock { clock: root.clockObject } }")  # fmt: skip
        source = tmp_path / "Scene.qml"
        source.write_text(
            f'import QtQuick\nimport "{QUrl.fromLocalFile(str(QML_DIR)).toString()}"\n'
            "Item {\n  id: root\n  property var tickerObject\n  property var clockObject\n"
            + "\n".join(parts)
            + "\n}\n"
        )
        self.counter = SwapCounter()
        view = QQuickView()
        self.view = view
        view.setFlags(Qt.WindowType.FramelessWindowHint | Qt.WindowType.Window)
        view.setColor(QColor(0, 0, 0))
        view.setResizeMode(QQuickView.ResizeMode.SizeRootObjectToView)
        view.setInitialProperties({"tickerObject": ticker, "clockObject": clock})
        view.setSource(QUrl.fromLocalFile(str(source)))
        assert view.rootObject() is not None, view.errors()
        view.frameSwapped.connect(self.counter.swapped, Qt.ConnectionType.QueuedConnection)
        view.setPosition(0, 0)
        view.resize(1280, 720)
        view.show()

    @property
    def swaps(self) -> int:
        return self.counter.count

    def strip_texts(self) -> list[str]:
        strip = self.view.rootObject().findChild(QQuickItem, "strip")
        assert isinstance(strip, QQuickItem)
        return [str(item.property("text")) for item in strip.childItems() if item.property("text")]

    def close(self) -> None:
        self.view.close()
        self.view.deleteLater()
        process_for(0.05)


def screen_box(box: tuple[int, int, int, int]) -> QImage:
    """What the X server shows in ``box`` (read from the root window, not from Qt)."""
    x, y, w, h = box
    return QGuiApplication.primaryScreen().grabWindow(0, x, y, w, h).toImage()


def has_text(image: QImage) -> bool:
    """Whether the box shows white text on its dark bar (not a flat colour)."""
    colours = {rgb(image, x, image.height() // 2) for x in range(0, image.width(), 3)}
    return any(min(c) > 200 for c in colours) and any(near(c, BAR, 4) for c in colours)


@pytest.fixture
def scene(qapp: object, tmp_path: Path) -> Iterator[Callable[..., Scene]]:
    made: list[tuple[Scene, list[QObject]]] = []

    def make(ticker: Ticker | None = None, clock: Clock | None = None) -> Scene:
        built = Scene(tmp_path, ticker, clock)
        made.append((built, [item for item in (ticker, clock) if item is not None]))
        return built

    yield make
    for built, items in made:
        for item in items:
            item.close()  # type: ignore[attr-defined]
        built.close()


def test_a_text_ticker_from_data_moves_in_every_frame(
    scene: Callable[..., Scene], tmp_path: Path
) -> None:
    ticker = Ticker(speed=120)
    lines = ["Doors open at nine", "Mind the step"]
    ticker.follow(FeedSpec("data:text/plain," + quote("\n".join(lines)), "text/plain"))
    shown = scene(ticker=ticker)
    assert wait_until(lambda: ticker.is_painted, 15), "the ticker never painted"
    assert ticker.lines == lines
    assert shown.strip_texts()[0] == SEPARATOR.join(lines)
    assert has_text(screen_box(TICKER_BOX))

    grab = StripGrab(os.environ["DISPLAY"], TICKER_BOX, tmp_path / "strip.nut")
    process_for(0.5)  # ffmpeg's start
    swaps, began = shown.swaps, time.monotonic()
    process_for(1.5)
    # New lines half way: they come in from the right, with no jump.
    ticker.set_lines(["Second edition", "All trains on time"])
    # Shorter than the bar, so the strip holds two of them and the new one follows soon.
    assert wait_until(lambda: "Second edition" in shown.strip_texts()[-1], 10, step=0.1)
    process_for(0.5)
    swap_rate = (shown.swaps - swaps) / (time.monotonic() - began)
    grab.stop()
    figures = analyse(grab.frames())

    assert figures.frames > 60, figures
    assert figures.wrong_way == 0, figures  # every new frame moved the text to the left
    # Every frame Qt swapped moved the text: a frame without motion is no new frame on the
    # screen. (Frames the display painted late, on this shared machine, are not counted
    # here: figures.held, a benchmark's figure.)
    assert figures.fps >= 0.9 * swap_rate, (figures, swap_rate)
    # 120 px/s for a bar 108 px high, kept by the time each frame took.
    assert 100 <= figures.px_per_second <= 140, figures
    assert shown.strip_texts()[-1] == "Second edition" + SEPARATOR + "All trains on time"


def test_a_feed_from_loopback_is_shown_followed_and_kept(
    scene: Callable[..., Scene], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def rss(*titles: str) -> str:
        items = "".join(f"<item><title>{t}</title></item>" for t in titles)
        return f'<rss version="2.0"><channel><title>n</title>{items}</channel></rss>'

    with PageServer() as server:
        url = server.page("/news.rss", rss("Storm warning", "Roads closed"), "application/rss+xml")
        ticker = Ticker()
        reader = ticker.follow(FeedSpec(url, "application/rss+xml"), tmp_path)
        shown = scene(ticker=ticker)
        first = "Storm warning" + SEPARATOR + "Roads closed"
        assert wait_until(lambda: ticker.is_painted, 15)
        assert shown.strip_texts()[0] == first and has_text(screen_box(TICKER_BOX))

        server.page("/news.rss", rss("All clear"), "application/rss+xml")
        reader.refresh_now()
        assert wait_until(lambda: ticker.property("text") == "All clear", 15)
        # Appended after what was on screen, then alone once that has scrolled through.
        assert wait_until(lambda: "All clear" in shown.strip_texts(), 15)
        assert wait_until(lambda: set(shown.strip_texts()) == {"All clear"}, 30)

        with caplog.at_level(logging.WARNING, "pdn.feeds"):
            server.page("/news.rss", "<!DOCTYPE x [<!ENTITY a 'a'>]><rss/>", "application/rss+xml")
            reads = reader.reads
            reader.refresh_now()
            # ``reads`` counts a read as it begins: its warning comes once it has been refused.
            assert wait_until(lambda: reader.reads > reads, 15)
            assert wait_until(lambda: any("DOCTYPE" in r.getMessage() for r in caplog.records), 15)
            caplog.clear()
            server.close()  # the feed goes away
            reads = reader.reads
            reader.refresh_now()
            assert wait_until(lambda: reader.reads > reads, 15)
            assert wait_until(lambda: len(caplog.records) > 0, 15)
            assert [r.name for r in caplog.records] == ["pdn.feeds"]
        process_for(0.3)
        assert ticker.property("text") == "All clear" and set(shown.strip_texts()) == {"All clear"}
        assert has_text(screen_box(TICKER_BOX))


def test_a_ticker_without_lines_is_a_dark_bar_until_they_come(
    scene: Callable[..., Scene],
) -> None:
    ticker = Ticker(speed=240)
    shown = scene(ticker=ticker)
    process_for(0.5)
    assert not ticker.is_painted and shown.strip_texts() == []
    image = screen_box(TICKER_BOX)
    assert all(near(rgb(image, x, 54), BAR, 4) for x in range(0, 1280, 16))
    swaps = shown.swaps
    process_for(0.5)
    assert shown.swaps - swaps <= 1  # an empty bar does not redraw the scene

    ticker.set_lines(["Now showing"])
    assert wait_until(lambda: ticker.is_painted, 15)
    assert has_text(screen_box(TICKER_BOX))
    # Emptied: what is on screen scrolls out, then the bar stands still again.
    ticker.set_lines([])
    assert wait_until(lambda: shown.strip_texts() == [], 20, step=0.1)
    process_for(0.3)
    swaps = shown.swaps
    process_for(0.5)
    assert shown.swaps - swaps <= 1
    ticker.set_lines(["Back again"])
    assert wait_until(lambda: shown.strip_texts()[:1] == ["Back again"], 5, step=0.1)


def at(hour: int, minute: int, second: int, month: int = 1) -> Callable[[], datetime]:
    return lambda: datetime(2026, month, 15, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize("zone", ["Asia/Tokyo", "America/New_York", "Asia/Kolkata", "UTC"])
@pytest.mark.parametrize("month", [1, 7])
def test_the_clock_shows_the_time_of_its_time_zone(qapp: object, zone: str, month: int) -> None:
    now = at(12, 34, 56, month)
    clock = Clock("HH:mm", zone, now=now)
    try:
        assert clock.property("text") == now().astimezone(ZoneInfo(zone)).strftime("%H:%M")
    finally:
        clock.close()
    english = QLocale(QLocale.Language.English, QLocale.Country.UnitedKingdom)
    clock = Clock("dddd d MMMM, h:mm:ss AP 'o''clock'", zone, now=now, locale=english)
    try:
        local = now().astimezone(ZoneInfo(zone))
        hour = local.strftime("%I").lstrip("0")
        assert clock.property("text") == local.strftime(
            f"%A {local.day} %B, {hour}:%M:%S %p o'clock"
        )
    finally:
        clock.close()


def test_clock_formats_come_from_the_uri() -> None:
    assert clock_format("pdn:clock") == "HH:mm"
    assert clock_format("pdn:clock?format=HH:mm:ss") == "HH:mm:ss"
    assert clock_format("pdn:clock?format=ddd%20d%20MMM") == "ddd d MMM"
    for wrong in ("pdn:weather", "https://example.org/clock", "pdn:clock?format=" + "H" * 65):
        with pytest.raises(ValueError):
            clock_format(wrong)
    assert shows_seconds("HH:mm:ss") and shows_seconds("zzz")
    assert not shows_seconds("HH:mm 'seconds'") and not shows_seconds("ddd HH:mm")


@pytest.mark.parametrize(("fmt", "most_frames"), [("HH:mm", 2), ("HH:mm:ss", 8)])
def test_the_clock_redraws_only_when_its_text_changes(
    scene: Callable[..., Scene], fmt: str, most_frames: int
) -> None:
    clock = Clock(fmt, "Europe/London")
    shown = scene(clock=clock)
    assert wait_until(lambda: clock.is_painted, 15)
    image = screen_box(CLOCK_BOX)
    assert near(rgb(image, 2, 2), BAR, 4)  # its box, filled
    assert any(min(rgb(image, x, image.height() // 2)) > 200 for x in range(image.width()))
    process_for(0.3)
    swaps, ticks = shown.swaps, clock.ticks
    process_for(3.2)
    frames = shown.swaps - swaps
    # Once a minute (a minute may turn now), or once a second: nothing else draws.
    assert frames <= most_frames, frames
    if shows_seconds(fmt):
        assert 3 <= clock.ticks - ticks <= 4 and frames >= 3
    else:
        assert clock.ticks - ticks <= 1
