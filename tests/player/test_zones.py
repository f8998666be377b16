"""The zone engine with an injected clock: which layout splits the screen, each zone a player
of its own (windows, priorities, requests), a higher priority taking the whole screen and the
layout coming back. No Qt, no threads, no sleeping."""

from __future__ import annotations

from datetime import UTC, timedelta
from pathlib import Path

import pytest

from cds.parser import parse
from cds.playlist import Playlist
from player.engine import DEFAULT_DURATION, Engine, Playback
from player.playitem import PlayItem
from player.store import DisplayStore
from player.writer import StoredZoneQueues
from player.zones import ScreenLayout, ZoneEngine
from tests.player.test_engine import Clock, ManualRenderer
from tests.support.inprocess_display import cds


class Screen:
    """A screen of regions, one recording renderer per zone; the test decides when they paint."""

    def __init__(self) -> None:
        self.renderers: dict[str, ManualRenderer] = {}
        self.splits: list[ScreenLayout | None] = []

    def split(self, layout: ScreenLayout | None) -> None:
        self.splits.append(layout)

    def renderer(self, zone: str) -> ManualRenderer:
        return self.renderers.setdefault(zone, ManualRenderer())


class Zones:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = Clock()
        self.store = DisplayStore(tmp_path / "display.db")
        self.records: list[Playback] = []
        self.screen = Screen()
        self.painted: set[int] = set()
        self.engine = self._engine()

    def _engine(self) -> ZoneEngine:
        return ZoneEngine(
            clock=self.clock,
            schedule=Playlist(UTC),
            store=self.store,
            screen=self.screen,
            new_schedule=lambda: Playlist(UTC),
            on_playback=self.records.append,
            zone_queues=StoredZoneQueues(self.store),
        )

    def restart(self, down: float) -> None:
        """The display is down ``down`` seconds and starts again on the same store: a new
        engine and a new screen, the documents not yet given."""
        self.clock.advance(down)
        self.screen = Screen()
        self.painted.clear()
        self.engine = self._engine()

    def schedule(self, *documents: bytes) -> None:
        self.engine.set_documents([parse(document).root for document in documents])

    def step(self, seconds: float = 0.0) -> None:
        self.clock.advance(seconds)
        self.engine.tick()

    def shows(self, zone: str) -> list[str]:
        return [item.url for item in self.screen.renderer(zone).shows]

    def paint(self, zone: str) -> PlayItem:
        renderer = self.screen.renderer(zone)
        item = renderer.last
        assert renderer.listener is not None
        renderer.listener.item_shown(item.token, self.clock(), None)
        self.painted.add(item.token)
        return item

    def paint_new(self) -> None:
        """Every zone paints the item it was last handed, if it has not yet."""
        for zone, renderer in self.screen.renderers.items():
            if renderer.shows and renderer.last.token not in self.painted:
                self.paint(zone)

    def on_screen(self, zone: str) -> Playback:
        return [record for record in self.records if record.zone == zone][-1]


@pytest.fixture
def zones(tmp_path: Path) -> Zones:
    return Zones(tmp_path)


def item(url: str, seconds: float | None = None, constraints: str = "") -> str:
    own = f"<preferred-duration>{seconds:g} s</preferred-duration>" if seconds else ""
    own += constraints
    wrapped = f"<constraints><scheduling-constraints>{own}</scheduling-constraints></constraints>"
    return (
        f'<content-item content-type="text/html">{wrapped if own else ""}<requires-file>'
        f"<sources><uri>{url}</uri></sources></requires-file></content-item>"
    )


def layout_doc(
    *, name: str = "lobby", main: tuple[str, ...], ticker: tuple[str, ...], constraints: str = ""
) -> bytes:
    held = (
        f"<constraints><scheduling-constraints>{constraints}</scheduling-constraints></constraints>"
        if constraints
        else ""
    )
    return f"""<content-set name="{name}">{held}
      <layout template="main+ticker">
        <zone name="main" set="promos"/><zone name="ticker" set="news"/>
      </layout>
      <content-set name="promos">{"".join(main)}</content-set>
      <content-set name="news">{"".join(ticker)}</content-set>
    </content-set>""".encode()


def test_without_a_layout_the_screen_plays_as_one_engine_does(zones: Zones, tmp_path: Path) -> None:
    """The same documents and requests give the same items, paints and records as a plain
    engine: a screen without a layout is the main zone alone, never split."""
    renderer = ManualRenderer()
    records: list[Playback] = []
    plain = Engine(
        clock=zones.clock,
        schedule=Playlist(UTC),
        store=DisplayStore(tmp_path / "plain.db"),
        renderer=renderer,
        on_playback=records.append,
    )
    renderer.set_listener(plain)
    document = cds("lobby", "http://a/1", "http://a/2")
    plain.set_documents([parse(document).root])
    zones.schedule(document)
    for step in range(12):
        if step == 5:
            assert plain.request("http://r/1", 7) is None
            assert zones.engine.request("http://r/1", 7) is None
        zones.clock.advance(4)
        plain.tick()
        zones.engine.tick()
        for shown in (renderer, zones.screen.renderer("main")):
            if shown.shows and shown.listener is not None:
                shown.listener.item_shown(shown.last.token, zones.clock(), None)
        assert zones.engine.next_wakeup() == plain.next_wakeup()
    assert [i.url for i in renderer.shows] == zones.shows("main")
    assert len(renderer.shows) > 4
    assert records == zones.records
    assert zones.screen.splits == []
    assert zones.engine.layout() is None
    assert all(item.zone == "main" for item in zones.screen.renderer("main").shows)


def test_a_layout_splits_the_screen_and_each_zone_plays_its_own_set(zones: Zones) -> None:
    zones.schedule(
        layout_doc(
            main=(item("http://m/1", 10), item("http://m/2", 10)),
            ticker=(item("http://t/1", 25), item("http://t/2", 25)),
        )
    )
    zones.step()
    layout = zones.screen.splits[-1]
    assert layout is not None and layout.name == "lobby"
    assert [(z.name, z.y, z.height, z.z) for z in layout.zones] == [
        ("main", 0, 0.9, 0),
        ("ticker", 0.9, 0.1, 1),
    ]
    assert zones.engine.layout() == layout
    assert zones.shows("main") == ["http://m/1"]
    assert zones.shows("ticker") == ["http://t/1"]
    assert zones.screen.renderer("ticker").last.zone == "ticker"
    assert zones.screen.renderer("main").last.zone == "main"
    zones.paint("main")
    zones.paint("ticker")
    assert (zones.on_screen("main").content_item, zones.on_screen("main").layout) == (
        "http://m/1",
        "lobby",
    )
    assert zones.on_screen("ticker").content_item == "http://t/1"
    assert zones.on_screen("ticker").set_name == "lobby"
    # Each zone on its own clock: main changes every 10 s, the ticker every 25 s.
    for _ in range(6):
        zones.step(5)
        zones.paint_new()
    assert zones.shows("main") == ["http://m/1", "http://m/2", "http://m/1", "http://m/2"]
    assert zones.shows("ticker") == ["http://t/1", "http://t/2"]
    assert len(zones.screen.splits) == 1  # split once, never again while it holds


def test_a_layout_goes_in_and_out_of_its_window(zones: Zones) -> None:
    """09:00 on the clock; the layout's window is 09:30 to 10:00, a full-screen set always."""
    zones.schedule(
        layout_doc(
            main=(item("http://m/1"),),
            ticker=(item("http://t/1"),),
            constraints='<time><between start="09:30" end="10:00"/></time>',
        ),
        cds("always", "http://f/1"),
    )
    zones.step()
    assert zones.screen.splits == []
    assert zones.shows("main") == ["http://f/1"]
    zones.paint("main")
    assert zones.on_screen("main").layout is None
    zones.step(30 * 60)
    assert zones.screen.splits[-1] is not None
    # The main zone plays the layout's set and the full-screen set, taking turns.
    assert zones.shows("main")[-1] in ("http://m/1", "http://f/1")
    assert zones.shows("ticker") == ["http://t/1"]
    seen_main = set()
    for _ in range(4):
        zones.paint("main")
        seen_main.add(zones.on_screen("main").content_item)
        zones.step(DEFAULT_DURATION)
    assert seen_main == {"http://m/1", "http://f/1"}
    assert zones.on_screen("main").layout == "lobby"
    zones.clock.now = zones.clock.now.replace(hour=10, minute=0, second=0)
    zones.engine.tick()
    assert zones.screen.splits[-1] is None  # full screen again
    assert zones.engine.layout() is None
    assert zones.on_screen("main").layout is None  # the main zone's record names no layout
    ticker_shows = len(zones.shows("ticker"))
    for _ in range(3):
        zones.step(DEFAULT_DURATION)
        zones.paint("main")
    assert set(zones.shows("main")[-3:]) == {"http://f/1"}
    assert len(zones.shows("ticker")) == ticker_shows  # the ticker is off screen
    assert zones.engine.request("http://r/1", 5, zone="ticker") == (
        "the screen has no zone 'ticker' now: it plays full screen (zone 'main')"
    )


def test_a_higher_priority_takes_the_whole_screen_and_the_layout_comes_back(
    zones: Zones,
) -> None:
    alarm = cds(
        "alarm",
        "http://alarm/",
        priority="highest",
        extra='<time><between start="09:01" end="09:02"/></time>',
    )
    zones.schedule(
        layout_doc(main=(item("http://m/1"),), ticker=(item("http://t/1"), item("http://t/2"))),
        alarm,
    )
    zones.step()
    assert zones.screen.splits[-1] is not None
    zones.paint("main")
    zones.paint("ticker")
    zones.step(60)
    assert zones.screen.splits[-1] is None  # the alarm: the whole screen
    assert zones.shows("main")[-1] == "http://alarm/"
    zones.paint("main")
    assert (zones.on_screen("main").content_item, zones.on_screen("main").layout) == (
        "http://alarm/",
        None,
    )
    ticker_before = len(zones.shows("ticker"))
    zones.step(30)
    assert len(zones.shows("ticker")) == ticker_before  # waits with its layout
    zones.step(30)  # 09:02: the alarm's window closes
    layout = zones.screen.splits[-1]
    assert layout is not None and layout.name == "lobby"
    assert zones.shows("main")[-1] == "http://m/1"
    # The ticker comes back on screen with its next item, handed over afresh.
    assert len(zones.shows("ticker")) == ticker_before + 1
    assert zones.shows("ticker")[-1] == "http://t/2"
    zones.paint("ticker")
    assert zones.on_screen("ticker").layout == "lobby"
    assert len(zones.screen.splits) == 3


def test_a_full_screen_set_of_the_same_priority_plays_in_the_main_zone_of_a_lower_never(
    zones: Zones,
) -> None:
    zones.schedule(
        layout_doc(main=(item("http://m/1"),), ticker=(item("http://t/1"),)),
        cds("low", "http://low/", priority="low"),
    )
    for _ in range(4):
        zones.step()
        zones.paint("main")
        zones.step(DEFAULT_DURATION)
    assert set(zones.shows("main")) == {"http://m/1"}
    assert len(zones.screen.splits) == 1
    # The main zone's set leaves: the low set plays in the main zone, the layout stays.
    zones.schedule(
        layout_doc(
            main=(
                item(
                    "http://m/1",
                    constraints='<date><between start="2020-01-01" end="2020-01-02"/></date>',
                ),
            ),
            ticker=(item("http://t/1"),),
        ),
        cds("low", "http://low/", priority="low"),
    )
    zones.step()
    assert zones.shows("main")[-1] == "http://low/"
    assert len(zones.screen.splits) == 1 and zones.engine.layout() is not None


def test_windows_and_priorities_hold_within_a_zone(zones: Zones) -> None:
    """A ticker item of a higher priority in its window plays alone in the ticker, and the
    main zone does not notice."""
    urgent = item(
        "http://t/urgent",
        constraints='<priority level="high"/><time><between start="09:00" end="09:01"/></time>',
    )
    zones.schedule(
        layout_doc(main=(item("http://m/1", 20),), ticker=(item("http://t/1", 5), urgent))
    )
    zones.step()
    assert zones.shows("ticker") == ["http://t/urgent"]
    zones.paint("ticker")
    zones.paint("main")
    for _ in range(7):
        zones.step(10)
        zones.paint_new()
    ticker = zones.shows("ticker")
    # 15 s each, shown at the steps of 10 s: 09:00:00, 09:00:20, 09:00:40; then its window shuts.
    assert ticker[: ticker.index("http://t/1")] == ["http://t/urgent"] * 3
    assert set(ticker[ticker.index("http://t/1") :]) == {"http://t/1"}  # its window closed
    assert zones.shows("main") == ["http://m/1"] * 4  # every 20 s, as if alone


def test_requests_go_to_the_zone_they_name(zones: Zones) -> None:
    zones.schedule(layout_doc(main=(item("http://m/1"),), ticker=(item("http://t/1"),)))
    zones.step()
    zones.paint("main")
    zones.paint("ticker")
    assert zones.engine.request("http://r/side", 5, zone="ticker") is None
    assert zones.engine.request("http://r/main", 5) is None
    assert zones.engine.request("http://r/x", 5, zone="side") == (
        "the screen has no zone 'side' now (its zones: main, ticker)"
    )
    zones.step()
    assert zones.shows("ticker")[-1] == "http://r/side"
    assert zones.screen.renderer("ticker").last.origin == "request"
    assert zones.shows("main")[-1] == "http://r/main"
    zones.paint("ticker")
    zones.paint("main")
    assert zones.on_screen("ticker").origin == "request"
    zones.step(5)
    assert zones.shows("ticker")[-1] == "http://t/1"
    assert zones.shows("main")[-1] == "http://m/1"
    assert zones.engine.queue_length() == 0


def test_a_request_in_a_zone_keeps_its_time_while_the_layout_waits(zones: Zones) -> None:
    alarm = cds(
        "alarm",
        "http://alarm/",
        priority="highest",
        extra='<time><between start="09:00:10" end="09:00:40"/></time>',
    )
    zones.schedule(layout_doc(main=(item("http://m/1"),), ticker=(item("http://t/1"),)), alarm)
    zones.step()
    zones.paint("ticker")
    assert zones.engine.request("http://r/side", 20, zone="ticker") is None
    zones.step()
    zones.paint("ticker")  # the request on screen for 20 s
    zones.step(10)  # 09:00:10: the alarm takes the screen, 10 s of the request left
    assert zones.screen.splits[-1] is None
    zones.step(30)  # 09:00:40: the layout comes back, the request with its 10 s
    assert zones.shows("ticker")[-1] == "http://r/side"
    zones.paint("ticker")
    assert zones.on_screen("ticker").duration == pytest.approx(10)
    zones.step(10)
    assert zones.shows("ticker")[-1] == "http://t/1"


def test_a_request_in_a_zone_survives_a_restart_and_goes_with_its_layout(zones: Zones) -> None:
    """A zone's requests are on disk with their layout and zone: after a power cut the one on
    screen keeps the time it had left by the wall clock and the next waits its turn; once the
    layout is no longer scheduled they are forgotten."""
    lobby = layout_doc(main=(item("http://m/1"),), ticker=(item("http://t/1"),))
    zones.schedule(lobby)
    zones.step()
    zones.paint("main")
    zones.paint("ticker")
    assert zones.engine.request("http://r/first", 20, zone="ticker") is None
    assert zones.engine.request("http://r/second", 10, zone="ticker") is None
    zones.step()
    zones.paint("ticker")  # r/first on screen for 20 s
    zones.step(5)
    stored = zones.store.zone_requests("lobby", "ticker").queued_requests()
    assert [request.url for request in stored] == ["http://r/first", "http://r/second"]
    assert zones.store.queued_requests() == []  # the main zone's queue has none of them

    zones.restart(down=3)  # 15 s of r/first were left; 3 s of them pass while it is down
    zones.schedule(lobby)
    zones.step()
    assert zones.shows("ticker") == ["http://r/first"]
    zones.paint("ticker")
    assert zones.on_screen("ticker").origin == "request"
    assert zones.on_screen("ticker").duration == pytest.approx(12)
    zones.step(12)
    assert zones.shows("ticker")[-1] == "http://r/second"
    zones.paint("ticker")
    zones.step(10)
    assert zones.shows("ticker")[-1] == "http://t/1"

    assert zones.engine.request("http://r/third", 30, zone="ticker") is None
    zones.schedule()  # the layout withdrawn: its zones' requests go with it
    assert zones.store.zone_requests("lobby", "ticker").queued_requests() == []
    zones.restart(down=1)
    zones.schedule(lobby)
    zones.step()
    assert zones.shows("ticker") == ["http://t/1"]


def test_a_new_version_of_the_layout_keeps_its_zones_going(zones: Zones) -> None:
    zones.schedule(layout_doc(main=(item("http://m/1"),), ticker=(item("http://t/1"),)))
    zones.step()
    zones.paint("ticker")
    zones.schedule(
        layout_doc(main=(item("http://m/1"),), ticker=(item("http://t/1"), item("http://t/2")))
    )
    zones.step()
    assert len(zones.screen.splits) == 1  # same boxes: not laid out again
    assert zones.shows("ticker") == ["http://t/1"]  # still on screen
    zones.step(DEFAULT_DURATION)
    assert zones.shows("ticker")[-1] == "http://t/2"
    zones.schedule()  # withdrawn: full screen, idle
    zones.step()
    assert zones.screen.splits[-1] is None
    assert zones.screen.renderer("main").idle >= 1
    assert zones.clock() - zones.records[-1].started < timedelta(days=1)


def test_the_layout_of_the_highest_priority_splits_the_screen_the_first_among_equals(
    zones: Zones,
) -> None:
    first = layout_doc(name="first", main=(item("http://1/m"),), ticker=(item("http://1/t"),))
    second = layout_doc(name="second", main=(item("http://2/m"),), ticker=(item("http://2/t"),))
    urgent = layout_doc(
        name="urgent",
        main=(item("http://u/m"),),
        ticker=(item("http://u/t"),),
        constraints='<priority level="high"/><time><between start="09:01" end="09:02"/></time>',
    )
    zones.schedule(first, second, urgent)
    zones.step()
    assert [layout.name if layout else None for layout in zones.screen.splits] == ["first"]
    assert zones.shows("ticker") == ["http://1/t"]
    zones.step(60)
    assert zones.screen.splits[-1] is not None and zones.screen.splits[-1].name == "urgent"
    assert zones.shows("ticker")[-1] == "http://u/t"  # the same region, now urgent's zone
    assert zones.shows("main")[-1] == "http://u/m"
    zones.paint_new()
    assert (zones.on_screen("ticker").layout, zones.on_screen("ticker").set_name) == (
        "urgent",
        "urgent",
    )
    assert zones.engine.zones_status()["layout"] == "urgent"
    zones.step(60)
    assert zones.screen.splits[-1] is not None and zones.screen.splits[-1].name == "first"
    assert zones.shows("ticker")[-1] == "http://1/t"
    # Every item handed to any zone has a token of its own on the whole screen.
    tokens = [i.token for r in zones.screen.renderers.values() for i in r.shows]
    assert len(tokens) == len(set(tokens))


def test_a_synchronised_layout_changes_its_zones_together_on_every_display(
    tmp_path: Path,
) -> None:
    """Two displays that start 23 s apart show the same item in each zone, each zone on a grid
    of its own from the layout set's ``sync``."""
    document = layout_doc(
        main=(item("http://m/1", 10), item("http://m/2", 10), item("http://m/3", 10)),
        ticker=(item("http://t/1", 4), item("http://t/2", 4)),
        constraints='<playback sync="wall-clock"/>',
    )
    early, late = Zones(tmp_path / "a"), Zones(tmp_path / "b")
    early.schedule(document)
    late.schedule(document)
    early.step()
    late.clock.advance(23)
    late.step()
    # 09:00:23 on the grid from midnight: main's turn 2 (20-30 s), the ticker's t/2 (20-24 s).
    assert late.shows("main") == ["http://m/3"] and late.shows("ticker") == ["http://t/2"]
    for _ in range(120):  # to 09:01:00, the late display joining at 09:00:23
        for display in (early, late):
            display.paint_new()
        early.step(0.5)
        if early.clock() > late.clock():
            late.step(early.clock().timestamp() - late.clock().timestamp())
    for zone in ("main", "ticker"):
        early_items = early.screen.renderer(zone).shows
        late_items = late.screen.renderer(zone).shows
        assert len(late_items) >= 3 and all(i.due is not None for i in late_items)
        assert [(i.url, i.due) for i in late_items] == [
            (i.url, i.due) for i in early_items[-len(late_items) :]
        ]
