"""The engine playing a synchronised set (sync="wall-clock"), with an injected clock: joining
mid-item, the hand-over ahead of the due instant, videos' offsets, the seeded shuffle on two
engines, interruptions and restarts that rejoin the grid. 2026-11-23 09:00 UTC is a Monday and,
with these 30 s cycles, the start of a cycle counted from midnight."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cds.model import ContentItem
from cds.parser import parse
from cds.playlist import Playlist
from player.engine import PREPARE_LEAD, SHOW_AHEAD, Engine, Playback
from player.store import DisplayStore
from tests.player.test_engine import Clock, ManualRenderer

T0 = datetime(2026, 11, 23, 9, 0, 0, tzinfo=UTC)


def wall(*items: str, order: str = "inorder", seconds: str = "10 s", name: str = "wall") -> bytes:
    """A synchronised set; an item named ``*.mp4`` is a video with no preferred-duration."""
    body = ""
    for url in items:
        if url.endswith(".mp4"):
            body += (
                f'<content-item content-type="video/mp4"><requires-file><sources><uri>{url}'
                "</uri></sources></requires-file></content-item>"
            )
        else:
            body += (
                '<content-item content-type="text/html"><constraints><scheduling-constraints>'
                f"<preferred-duration>{seconds}</preferred-duration></scheduling-constraints>"
                f"</constraints><requires-file><sources><uri>{url}</uri></sources>"
                "</requires-file></content-item>"
            )
    return (
        f'<content-set name="{name}"><constraints><scheduling-constraints>'
        f'<playback order="{order}" sync="wall-clock"/></scheduling-constraints></constraints>'
        f"{body}</content-set>"
    ).encode()


class SyncHarness:
    def __init__(self, tmp_path: Path, clock: Clock, lengths: dict[str, float] | None = None):
        self.clock = clock
        self.store = DisplayStore(tmp_path / "display.db")
        self.records: list[Playback] = []
        self.renderer = ManualRenderer()
        known = lengths if lengths is not None else {}

        def natural_length(item: ContentItem) -> float | None:
            return known.get(item.url)

        self.playlist = Playlist(UTC, natural_length=natural_length)
        self.engine = Engine(
            clock=clock,
            schedule=self.playlist,
            store=self.store,
            renderer=self.renderer,
            on_playback=self.records.append,
        )
        self.renderer.set_listener(self.engine)

    def schedule(self, *documents: bytes) -> None:
        self.engine.set_documents([parse(document).root for document in documents])

    def step_to(self, when: datetime) -> None:
        self.clock.now = when
        self.engine.tick()

    def paint(self, late: float = 0.0) -> None:
        """The renderer paints the item last shown: on its due instant (plus ``late``), or now
        when that instant has passed (a join)."""
        item = self.renderer.last
        at = self.clock()
        if item.due is not None and item.due > at:
            at = item.due
        self.clock.now = at + timedelta(seconds=late)
        self.engine.item_shown(item.token, self.clock(), None)
        self.engine.tick()  # the report wakes the engine (Engine's ``wake``)

    def run_until(self, end: datetime) -> None:
        """Tick at every wakeup the engine asks for, painting what it shows, up to ``end``."""
        while True:
            wakeup = self.engine.next_wakeup()
            assert wakeup is not None
            if wakeup > end:
                return
            self.step_to(wakeup)
            if self.engine.status().pending is not None:
                self.paint()

    @property
    def on_screen(self) -> str | None:
        return self.records[-1].content_item if self.records else None


def clock_at(when: datetime) -> Clock:
    clock = Clock()
    clock.now = when
    return clock


@pytest.fixture
def three(tmp_path: Path) -> SyncHarness:
    harness = SyncHarness(tmp_path, clock_at(T0 + timedelta(seconds=23)))
    harness.schedule(wall("http://w/a", "http://w/b", "http://w/c"))
    return harness


def test_a_display_joins_mid_item_at_the_turn_of_now(three: SyncHarness) -> None:
    three.step_to(three.clock())  # 09:00:23: c's turn (20-30 s), 3 s into it
    shown = three.renderer.last
    assert shown.url == "http://w/c"
    assert shown.due == T0 + timedelta(seconds=20)  # in the past: joined mid-item
    assert shown.duration == 10.0  # the whole turn; the renderer starts 3 s into it
    three.paint(late=0.4)  # the page took 0.4 s to paint
    record = three.records[-1]
    assert record.content_item == "http://w/c"
    # It ends with its turn, not 10 s after it painted.
    assert record.duration == pytest.approx(6.6)
    assert three.engine.status().current["ends-at"] == (T0 + timedelta(seconds=30)).isoformat()  # type: ignore[index]


def test_the_next_turn_is_prepared_and_handed_over_ahead_of_its_instant(three: SyncHarness) -> None:
    three.step_to(three.clock())
    three.paint()
    due = T0 + timedelta(seconds=30)
    assert three.engine.next_wakeup() == due - timedelta(seconds=PREPARE_LEAD)
    three.step_to(due - timedelta(seconds=PREPARE_LEAD))
    (prepared,) = three.renderer.prepared
    assert (prepared.url, prepared.due) == ("http://w/a", due)
    assert three.engine.next_wakeup() == due - timedelta(seconds=SHOW_AHEAD)
    three.step_to(due - timedelta(seconds=SHOW_AHEAD))
    assert three.renderer.last is prepared  # handed over now, to switch on its instant
    assert three.on_screen == "http://w/c"  # still: the renderer has not switched yet
    three.step_to(due)  # the engine's tick on the instant changes nothing
    assert three.renderer.last is prepared and len(three.renderer.shows) == 2
    three.paint(late=0.012)  # the renderer switched 12 ms late by its clock
    assert three.on_screen == "http://w/a"
    assert three.records[-1].started == due + timedelta(seconds=0.012)
    # A late switch does not push the grid: a's turn still ends at 09:00:40.
    assert three.engine.status().current["ends-at"] == (due + timedelta(seconds=10)).isoformat()  # type: ignore[index]


def test_the_grid_goes_round_with_every_turn_on_its_instant(three: SyncHarness) -> None:
    three.step_to(three.clock())
    three.paint()
    three.run_until(T0 + timedelta(seconds=55))
    urls = [r.content_item for r in three.records]
    assert urls == ["http://w/c", "http://w/a", "http://w/b", "http://w/c"]
    starts = [r.started for r in three.records[1:]]
    assert starts == [T0 + timedelta(seconds=s) for s in (30, 40, 50)]


def test_a_video_joining_gets_its_offset_and_its_own_end_does_not_cut_the_turn(
    tmp_path: Path,
) -> None:
    harness = SyncHarness(
        tmp_path, clock_at(T0 + timedelta(seconds=17.5)), {"http://w/clip.mp4": 12.5}
    )
    # 10 s page + 12.5 s video = 22.5 s; 09:00:00 is 1440 cycles: the video runs 10-22.5 s.
    harness.schedule(wall("http://w/page", "http://w/clip.mp4"))
    harness.step_to(harness.clock())
    video = harness.renderer.last
    assert video.url == "http://w/clip.mp4"
    assert video.due == T0 + timedelta(seconds=10)
    assert (harness.clock() - video.due).total_seconds() == 7.5  # the offset it seeks to
    assert video.duration == 12.5  # its own length, read from the file
    harness.paint(late=0.8)
    harness.engine.item_ended(video.token)  # the video reached its end a little early
    harness.engine.tick()
    assert harness.on_screen == "http://w/clip.mp4"  # its last frame stays to the turn's end
    assert harness.engine.status().current["ends-at"] == (T0 + timedelta(seconds=22.5)).isoformat()  # type: ignore[index]


def test_a_video_of_unknown_length_holds_the_set_back_until_it_is_read(tmp_path: Path) -> None:
    lengths: dict[str, float] = {}
    harness = SyncHarness(tmp_path, clock_at(T0), lengths)
    harness.schedule(wall("http://w/page", "http://w/clip.mp4"))
    harness.step_to(T0)
    assert harness.renderer.idle == 1  # no grid: the idle page, not a guess
    lengths["http://w/clip.mp4"] = 5.0  # the download finished (the cache wakes the engine)
    harness.step_to(T0 + timedelta(seconds=1))
    assert harness.renderer.last.url == "http://w/page"
    assert harness.renderer.last.due == T0  # 09:00 is a cycle start (15 s cycles)


def test_the_seeded_shuffle_is_the_same_on_two_engines(tmp_path: Path) -> None:
    shown: list[list[tuple[str, datetime | None]]] = []
    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir()
        start = T0 + timedelta(seconds=60 * 7 + 3)  # a minute on: not a cycle start
        harness = SyncHarness(folder, clock_at(start))
        harness.schedule(wall(*(f"http://w/{c}" for c in "abcdef"), order="random", seconds="5 s"))
        harness.step_to(start)
        harness.paint()
        harness.run_until(start + timedelta(minutes=5))
        shown.append([(r.content_item or "", r.started) for r in harness.records])
    assert shown[0] == shown[1]
    urls = [url for url, _ in shown[0]]
    assert len(urls) > 15
    assert all(a != b for a, b in itertools.pairwise(urls))


def test_a_request_interrupts_and_the_set_rejoins_at_the_turn_of_now(three: SyncHarness) -> None:
    three.step_to(T0 + timedelta(seconds=1))
    three.paint()
    assert three.on_screen == "http://w/a"
    assert three.engine.request("http://r/notice", 12) is None
    three.step_to(T0 + timedelta(seconds=5))
    three.paint()
    assert three.on_screen == "http://r/notice"
    three.step_to(T0 + timedelta(seconds=17))  # the request is over, 7 s into b's turn
    back = three.renderer.last
    assert back.url == "http://w/b"
    assert back.due == T0 + timedelta(seconds=10)
    three.paint()
    assert three.records[-1].duration == pytest.approx(3.0)


def test_a_restarted_engine_rejoins_the_turn_of_now(three: SyncHarness, tmp_path: Path) -> None:
    three.step_to(T0 + timedelta(seconds=1))
    three.paint()
    # The process dies; a new one starts 46 s later, on the same store: no "top of the set".
    clock = clock_at(T0 + timedelta(seconds=47))
    again = SyncHarness(tmp_path, clock)
    again.schedule(wall("http://w/a", "http://w/b", "http://w/c"))
    again.step_to(clock())
    assert again.renderer.last.url == "http://w/b"  # 47 s: the second cycle, b's turn (40-50)
    assert again.renderer.last.due == T0 + timedelta(seconds=40)


def test_an_item_missing_here_plays_the_other_content_until_the_next_turn(
    tmp_path: Path,
) -> None:
    harness = SyncHarness(tmp_path, clock_at(T0 + timedelta(seconds=11)))
    missing = {"http://w/b"}
    harness.engine = Engine(
        clock=harness.clock,
        schedule=harness.playlist,
        store=harness.store,
        renderer=harness.renderer,
        available=lambda item: item.url not in missing,
        on_playback=harness.records.append,
    )
    harness.renderer.set_listener(harness.engine)
    other = (
        b'<content-set name="news"><content-item content-type="text/html"><requires-file>'
        b"<sources><uri>http://n/1</uri></sources></requires-file></content-item></content-set>"
    )
    harness.schedule(other, wall("http://w/a", "http://w/b", "http://w/c"))
    harness.step_to(harness.clock())
    assert harness.renderer.last.url == "http://n/1"  # b's turn, b not here: the news
    harness.paint()
    assert harness.engine.next_wakeup() == T0 + timedelta(seconds=20)  # c's turn
    harness.step_to(T0 + timedelta(seconds=20))
    assert harness.renderer.last.url == "http://w/c"
    assert harness.renderer.last.due == T0 + timedelta(seconds=20)
