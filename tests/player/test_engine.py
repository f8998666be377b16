"""The playlist engine with an injected clock: no Qt, no threads, no sleeping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cds.parser import parse
from cds.playlist import Playlist
from player.engine import (
    DEFAULT_DURATION,
    LOAD_TIMEOUT,
    PREPARE_LEAD,
    Engine,
    Playback,
)
from player.playitem import PlayItem, RendererListener
from player.requestqueue import QUEUE_LIMIT
from player.store import DisplayStore
from tests.support.inprocess_display import cds


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 23, 9, 0, 0, tzinfo=UTC)  # a Monday

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class ManualRenderer:
    """Records what the engine asks; the test decides when things paint."""

    def __init__(self) -> None:
        self.listener: RendererListener | None = None
        self.shows: list[PlayItem] = []
        self.prepared: list[PlayItem] = []
        self.idle = 0
        self.paint_idle_at_once = True

    def set_listener(self, listener: RendererListener) -> None:
        self.listener = listener

    def prepare(self, item: PlayItem) -> None:
        self.prepared.append(item)

    def show(self, item: PlayItem) -> None:
        self.shows.append(item)

    def show_idle(self) -> None:
        self.idle += 1
        # The idle page is local: it paints at once (and the record follows that report).
        if self.listener is not None and self.paint_idle_at_once:
            self.listener.idle_shown(datetime.now(UTC))

    @property
    def last(self) -> PlayItem:
        return self.shows[-1]


class Harness:
    def __init__(
        self, tmp_path: Path, clock: Clock | None = None, load_timeout: float = LOAD_TIMEOUT
    ) -> None:
        self.clock = clock or Clock()
        self.store = DisplayStore(tmp_path / "display.db")
        self.records: list[Playback] = []
        self.renderer = ManualRenderer()
        self.playlist = Playlist(UTC)
        self.engine = Engine(
            clock=self.clock,
            schedule=self.playlist,
            store=self.store,
            renderer=self.renderer,
            on_playback=self.records.append,
            load_timeout=load_timeout,
        )
        self.renderer.set_listener(self.engine)

    def schedule(self, *documents: bytes) -> None:
        self.engine.set_documents([parse(document).root for document in documents])

    def paint(self, natural: float | None = None) -> PlayItem:
        """The renderer paints the item it was last asked to show."""
        item = self.renderer.last
        self.engine.item_shown(item.token, self.clock(), natural)
        return item

    def step(self, seconds: float = 0.0) -> None:
        self.clock.advance(seconds)
        self.engine.tick()

    @property
    def on_screen(self) -> str | None:
        return self.records[-1].content_item if self.records else None


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def test_idle_record_follows_the_idle_page_being_painted(harness: Harness) -> None:
    harness.renderer.paint_idle_at_once = False
    harness.step()
    assert harness.renderer.idle == 1
    assert harness.records == []  # asked for, not on screen yet
    harness.engine.idle_shown(harness.clock())
    assert [r.origin for r in harness.records] == ["idle"]
    harness.engine.idle_shown(harness.clock())  # a repeated report changes nothing
    assert len(harness.records) == 1


def test_a_superseded_idle_page_is_never_reported(harness: Harness) -> None:
    harness.renderer.paint_idle_at_once = False
    harness.step()
    assert harness.engine.request("http://127.0.0.1:9/a", 30.0) is None
    harness.step()
    harness.engine.idle_shown(harness.clock())  # the idle page lost the race to the request
    assert harness.records == []
    harness.paint()
    assert harness.on_screen == "http://127.0.0.1:9/a"


def test_idle_when_nothing_is_eligible(harness: Harness) -> None:
    harness.step()
    assert harness.renderer.idle == 1
    assert harness.records[-1].origin == "idle"
    harness.step(60)
    assert harness.renderer.idle == 1  # no repeat while nothing changes
    assert len(harness.records) == 1


def test_scheduled_items_rotate_and_record_follows_paint(harness: Harness) -> None:
    harness.schedule(cds("lobby", "http://a/1", "http://a/2"))
    harness.step()
    assert harness.renderer.last.url == "http://a/1"
    assert harness.records == []  # asked for, not painted yet
    harness.step(0.4)
    harness.paint()
    assert harness.on_screen == "http://a/1"
    assert harness.records[-1].duration == DEFAULT_DURATION
    assert harness.records[-1].set_name == "lobby"
    assert harness.records[-1].started == harness.clock()
    assert harness.engine.next_wakeup() == harness.clock() + timedelta(
        seconds=DEFAULT_DURATION - PREPARE_LEAD
    )
    harness.step(DEFAULT_DURATION - PREPARE_LEAD)
    assert [item.url for item in harness.renderer.prepared] == ["http://a/2"]
    harness.step(PREPARE_LEAD)
    assert harness.renderer.last.url == "http://a/2"
    assert harness.renderer.last is harness.renderer.prepared[-1]  # the prepared one is shown
    harness.paint()
    assert harness.on_screen == "http://a/2"


def test_request_interrupts_then_queue_then_back_to_schedule(harness: Harness) -> None:
    harness.schedule(cds("lobby", "http://a/1"))
    harness.step()
    harness.paint()
    assert harness.engine.request("http://r/1", 5) is None
    assert harness.engine.request("http://r/2", 7) is None
    harness.step()
    assert harness.renderer.last.url == "http://r/1"  # at once
    harness.paint()
    assert harness.records[-1].origin == "request" and harness.records[-1].duration == 5
    harness.step(5)
    assert harness.renderer.last.url == "http://r/2"
    harness.paint()
    harness.step(6.9)
    assert harness.on_screen == "http://r/2"
    harness.step(0.1)
    assert harness.renderer.last.url == "http://a/1"
    harness.paint()
    assert [r.origin for r in harness.records][-1] == "schedule"
    assert harness.store.queued_requests() == []


def test_highest_is_never_interrupted_and_queue_waits(harness: Harness) -> None:
    harness.schedule(cds("alarm", "http://alarm/", priority="highest"))
    harness.step()
    harness.paint()
    harness.engine.request("http://r/1", 5)
    harness.step()
    assert harness.renderer.last.url == "http://alarm/"
    harness.step(60)
    harness.paint()  # the alarm again (it rotates with itself)
    assert all(r.content_item == "http://alarm/" for r in harness.records)
    harness.schedule()  # the alarm is withdrawn
    harness.step()
    assert harness.renderer.last.url == "http://r/1"


def test_highest_pauses_a_request_which_keeps_its_remaining_time(
    harness: Harness, tmp_path: Path
) -> None:
    harness.engine.request("http://r/1", 10)
    harness.step()
    harness.paint()
    harness.step(4)
    harness.schedule(cds("alarm", "http://alarm/", priority="highest"))
    harness.step()
    assert harness.renderer.last.url == "http://alarm/"
    harness.paint()
    [stored] = harness.store.queued_requests()
    assert stored.remaining == pytest.approx(6)
    assert stored.shown_at is None
    harness.schedule()
    harness.step()
    assert harness.renderer.last.url == "http://r/1"
    harness.paint()
    assert harness.records[-1].duration == pytest.approx(6)


def test_higher_priority_window_opening_interrupts_at_once(harness: Harness) -> None:
    window = '<time><between start="09:00:10" end="10:00:00"/></time>'
    harness.schedule(
        cds("lobby", "http://low/"),
        cds("news", "http://high/", priority="high", extra=window),
    )
    harness.step()
    harness.paint()
    assert harness.on_screen == "http://low/"
    assert harness.engine.next_wakeup() == harness.clock() + timedelta(seconds=10)
    harness.step(10)
    assert harness.renderer.last.url == "http://high/"
    harness.paint()
    assert harness.on_screen == "http://high/"


def test_window_closing_ends_the_item(harness: Harness) -> None:
    window = '<time><between start="08:00" end="09:00:05"/></time>'
    harness.schedule(cds("morning", "http://m/", extra=window))
    harness.step()
    harness.paint()
    harness.step(5)
    assert harness.records[-1].origin == "idle"


def test_failed_item_is_skipped_and_backed_off(harness: Harness) -> None:
    harness.schedule(cds("lobby", "http://bad/", "http://good/"))
    harness.step()
    bad = harness.renderer.last
    assert bad.url == "http://bad/"
    harness.engine.item_failed(bad.token, "404")
    harness.step()
    assert harness.renderer.last.url == "http://good/"
    assert harness.engine.status().backed_off == ["http://bad/"]
    harness.paint()
    harness.step(DEFAULT_DURATION)
    # The back-off (5 s) is over: tried again; failing again doubles it.
    assert harness.renderer.last.url == "http://bad/"
    harness.engine.item_failed(harness.renderer.last.token, "404")
    harness.step()
    assert harness.renderer.last.url == "http://good/"
    harness.paint()
    harness.step(9)
    assert harness.engine.status().backed_off == ["http://bad/"]
    harness.step(1)
    assert harness.engine.status().backed_off == []


def test_item_that_never_paints_times_out(harness: Harness) -> None:
    harness.schedule(cds("lobby", "http://hang/"))
    harness.step()
    assert harness.engine.next_wakeup() == harness.clock() + timedelta(seconds=LOAD_TIMEOUT)
    harness.step(LOAD_TIMEOUT)
    assert harness.records[-1].origin == "idle"  # the only item is backed off: idle, not stuck
    wakeup = harness.engine.next_wakeup()
    assert wakeup is not None
    harness.clock.now = wakeup
    harness.engine.tick()
    assert harness.renderer.last.url == "http://hang/"  # tried again after the back-off


def test_a_slow_board_waits_longer_for_a_paint(tmp_path: Path) -> None:
    """[screen] timeout-factor (an emulated Pi): the engine's wait follows it."""
    harness = Harness(tmp_path, load_timeout=LOAD_TIMEOUT * 20)
    harness.engine.request("http://slow/page", 60)
    harness.step()
    assert harness.engine.next_wakeup() == harness.clock() + timedelta(seconds=LOAD_TIMEOUT * 20)
    harness.step(LOAD_TIMEOUT * 10)
    assert harness.renderer.last.url == "http://slow/page"  # still waited for
    harness.paint()
    assert harness.on_screen == "http://slow/page"


def test_failing_request_is_dropped(harness: Harness) -> None:
    harness.engine.request("http://r/broken", 30)
    harness.engine.request("http://r/ok", 30)
    harness.step()
    harness.engine.item_failed(harness.renderer.last.token, "DNS")
    harness.step()
    assert harness.renderer.last.url == "http://r/ok"
    assert [r.url for r in harness.store.queued_requests()] == ["http://r/ok"]


def test_natural_video_length_and_early_end(harness: Harness) -> None:
    video = (
        b'<content-set name="v"><content-item content-type="video/webm"><requires-file>'
        b"<sources><uri>http://v/clip.webm</uri></sources></requires-file></content-item>"
        b"</content-set>"
    )
    harness.schedule(video)
    harness.step()
    assert harness.renderer.last.duration is None  # the renderer tells the length
    harness.paint(natural=42.0)
    assert harness.records[-1].duration == 42.0
    item = harness.renderer.last
    harness.step(10)
    harness.engine.item_ended(item.token)
    harness.step()
    assert harness.renderer.last.token != item.token  # next play started at once


def test_queue_limit(harness: Harness) -> None:
    for index in range(QUEUE_LIMIT):
        assert harness.engine.request(f"http://r/{index}", 30) is None
    reason = harness.engine.request("http://r/extra", 30)
    assert reason is not None and "full" in reason


def test_restart_resumes_the_request_by_wall_clock(tmp_path: Path) -> None:
    first = Harness(tmp_path)
    first.engine.request("http://r/1", 20)
    first.engine.request("http://r/2", 20)
    first.step()
    first.paint()
    first.step(5)
    first.store.close()  # the process dies here
    clock = Clock()
    clock.now = first.clock.now + timedelta(seconds=3)
    second = Harness(tmp_path, clock)
    second.step()
    assert second.renderer.last.url == "http://r/1"
    assert second.renderer.last.duration == pytest.approx(12)
    second.paint()
    # Down for longer than the request had left: it is over, the next one shows.
    second.store.close()
    clock.now += timedelta(seconds=30)
    third = Harness(tmp_path, clock)
    third.step()
    assert third.renderer.last.url == "http://r/2"
    assert third.renderer.last.duration == 20


def test_superseded_paint_reports_are_ignored(harness: Harness) -> None:
    harness.schedule(cds("lobby", "http://a/1"))
    harness.step()
    stale = harness.renderer.last
    harness.engine.request("http://r/1", 5)
    harness.step()
    harness.engine.item_shown(stale.token, harness.clock(), None)
    assert harness.records == []
    harness.paint()
    assert harness.on_screen == "http://r/1"


def test_a_store_that_cannot_write_does_not_stop_the_queue(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk: the queue's progress cannot be stored, yet requests play and end on time."""
    assert harness.engine.request("http://r/1", 5) is None
    assert harness.engine.request("http://r/2", 7) is None

    def disk_full(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(harness.store, "update_request", disk_full)
    monkeypatch.setattr(harness.store, "remove_request", disk_full)
    harness.step()
    assert harness.renderer.last.url == "http://r/1"
    harness.paint()
    harness.step(5)
    assert harness.renderer.last.url == "http://r/2"
    harness.paint()
    harness.step(7)
    assert harness.records[-1].origin == "idle"
    assert harness.engine.queue_length() == 0
