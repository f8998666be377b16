"""The playback record of a screen split into zones (player/playback.py, player/store.py).

Each zone's change is a :class:`~player.engine.Playback` with its ``zone`` and ``layout``; the
record keeps the main zone's fields at the top, every zone in ``zones``, and the zone that made
it in ``zone``. Each change is a record of its own (the next ``sequence``), stored, logged with
its zone and told to subscribers; read back here from a real store, and through a display's
HTTP face on a real waitress server (``GET /playback/``, ``/x/playback/events``, webhooks,
``GET /x/plays?zone=``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from player.engine import Playback
from player.playback import ZONE_FIELDS, PlaybackRecord, merged
from player.store import (
    MIGRATIONS,
    PLAY_LOG_MIGRATIONS,
    PLAY_LOG_RELEASED_STEPS,
    PLAY_LOG_VERSION_TABLE,
    RELEASED_STEPS,
    DisplayStore,
)
from server.platform.db import migrate
from server.platform.outbox import Outbox
from tests.server.display.test_api import assert_error
from tests.server.display.test_events import open_stream
from tests.support.display import DisplayProcess
from tests.support.inprocess_display import Display
from tests.support.pages import HookReceiver, one_page
from tests.support.ports import free_port
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import Receiver

T0 = datetime(2030, 1, 1, 8, 0, tzinfo=UTC)


def shown(
    item: str | None,
    zone: str = "main",
    layout: str | None = "lobby",
    at: float = 0.0,
    *,
    content_type: str | None = "text/html",
    set_name: str | None = None,
) -> Playback:
    """Zone ``zone`` shows ``item`` (None: idle) ``at`` seconds after T0."""
    return Playback(
        None if item is None else f"http://127.0.0.1:9/{item}",
        None if item is None else content_type,
        "idle" if item is None else "schedule",
        set_name if set_name is not None else ("promos" if zone == "main" else "news"),
        T0 + timedelta(seconds=at),
        None if item is None else 5.0,
        zone=zone,
        layout=layout,
    )


def entry(playback: Playback) -> dict[str, Any]:
    return playback.fields()


class Parts:
    """A record on a real store and outbox, as ``pdn display`` wires them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.store = DisplayStore(folder / "display.db")
        self.outbox = Outbox(self.store.path, name="display")
        self.record = PlaybackRecord(
            store=self.store,
            outbox=self.outbox,
            display_url=lambda: "http://127.0.0.1:1",
            clock=lambda: T0,
        )

    def show(self, *playbacks: Playback) -> dict[str, Any]:
        for playback in playbacks:
            self.record.changed(playback)
        assert self.record.flush(10)
        return self.record.current()

    def close(self) -> None:
        self.record.close()
        self.store.close()


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Parts]:
    made = Parts(tmp_path)
    yield made
    made.close()


def test_a_screen_without_a_layout_keeps_todays_fields(parts: Parts) -> None:
    page = shown("a.html", layout=None, set_name="lobby")
    record = parts.show(page)
    assert record == {
        **entry(page),
        "layout": None,
        "zones": {"main": entry(page)},
        "zone": "main",
        "sequence": 1,
    }
    assert list(record)[: len(ZONE_FIELDS)] == list(ZONE_FIELDS)


def test_each_zones_change_is_a_record_with_the_main_zone_at_the_top(parts: Parts) -> None:
    main = shown("promo1.png", content_type="image/png")
    ticker = shown("news.rss", "ticker", at=0.1, content_type="application/rss+xml")
    clock = shown("clock", "clock", at=0.2, content_type="application/x-pdn-clock")
    parts.show(main)
    record = parts.show(ticker)
    assert record["zone"] == "ticker"
    assert {name: record[name] for name in ZONE_FIELDS} == entry(main)  # main's, at the top
    assert record["zones"] == {"main": entry(main), "ticker": entry(ticker)}
    record = parts.show(clock)
    assert (record["sequence"], record["zone"], record["layout"]) == (3, "clock", "lobby")
    main2 = shown("promo2.png", at=5, content_type="image/png")
    record = parts.show(main2)
    assert record["sequence"] == 4 and record["zone"] == "main"
    assert record["content-item"] == main2.content_item
    assert record["zones"] == {"main": entry(main2), "ticker": entry(ticker), "clock": entry(clock)}
    # The stored record is the published one, zones and all.
    assert parts.store.playback() == (4, record)


def test_the_other_zones_go_with_the_layout(parts: Parts) -> None:
    main = shown("promo1.png")
    ticker = shown("news.rss", "ticker", at=0.1)
    parts.show(main, ticker)
    full = shown("alert.html", layout=None, at=3, set_name="alerts")
    record = parts.show(full)
    assert record == {
        **entry(full),
        "layout": None,
        "zones": {"main": entry(full)},
        "zone": "main",
        "sequence": 3,
    }
    # Another layout: the main zone shows on until it changes; the old layout's zones go.
    parts.show(shown("promo1.png", at=4), shown("news.rss", "ticker", at=4.1))
    side = shown("weather.html", "side", layout="foyer", at=6)
    record = parts.show(side)
    assert record["layout"] == "foyer"
    assert set(record["zones"]) == {"main", "side"}
    assert record["zones"]["main"]["started"] == (T0 + timedelta(seconds=4)).isoformat()


def test_a_zone_without_a_layout_is_refused_and_changes_nothing(parts: Parts) -> None:
    before = parts.show(shown("promo1.png"))
    after = parts.show(shown("news.rss", "ticker", layout=None))
    assert after == before
    assert parts.store.playback()[0] == before["sequence"]


def test_the_record_with_its_zones_survives_a_restart(tmp_path: Path) -> None:
    first = Parts(tmp_path)
    try:
        record = first.show(shown("promo1.png"), shown("news.rss", "ticker", at=1))
    finally:
        first.close()
    again = Parts(tmp_path)
    try:
        assert again.record.current() == record
        later = again.show(shown("news2.rss", "ticker", at=9))
        assert later["sequence"] == record["sequence"] + 1
        assert later["zones"]["main"] == record["zones"]["main"]
    finally:
        again.close()


def test_a_record_stored_without_zones_opens_as_the_main_zone(tmp_path: Path) -> None:
    """A record as a display without zones stored it: read with ``layout``, ``zones``, ``zone``."""
    store = DisplayStore(tmp_path / "display.db")
    top = {
        "content-item": "http://127.0.0.1:9/a.html",
        "content-type": "text/html",
        "origin": "schedule",
        "set": "lobby",
        "started": T0.isoformat(),
        "duration": 5.0,
    }
    with store.write() as connection:
        connection.execute(
            "INSERT INTO playback (id, sequence, record) VALUES (1, 7, ?)",
            (json.dumps({**top, "sequence": 7}),),
        )
    store.close()
    parts = Parts(tmp_path)
    try:
        assert parts.record.current() == {
            **top,
            "layout": None,
            "zones": {"main": top},
            "zone": "main",
            "sequence": 7,
        }
        record = parts.show(shown("news.rss", "ticker", at=9))
        assert record["sequence"] == 8 and record["zones"]["main"] == top
    finally:
        parts.close()


def test_the_play_log_keeps_each_zones_plays_and_their_ends(parts: Parts) -> None:
    main1, ticker1 = shown("p1.png"), shown("n1.rss", "ticker", at=0.5)
    main2, ticker2 = shown("p2.png", at=5), shown("n2.rss", "ticker", at=7)
    full = shown("alert.html", layout=None, at=9, set_name="alerts")
    parts.show(main1, ticker1, main2, ticker2, full)
    plays = {play.sequence: play for play in parts.store.plays(0, 100)}
    assert [(s, p.zone, p.layout) for s, p in plays.items()] == [
        (1, "main", "lobby"),
        (2, "ticker", "lobby"),
        (3, "main", "lobby"),
        (4, "ticker", "lobby"),
        (5, "main", None),
    ]
    assert plays[2].item == ticker1.content_item  # the zone's own item, not the main one
    assert plays[1].ended == main2.started.isoformat()  # its zone's next play
    assert plays[2].ended == ticker2.started.isoformat()
    assert plays[3].ended == full.started.isoformat()
    assert plays[4].ended == full.started.isoformat()  # the layout went: the ticker with it
    assert plays[5].ended is None
    assert [p.sequence for p in parts.store.plays(0, 100, "ticker")] == [2, 4]
    assert [p.sequence for p in parts.store.plays(2, 100, "main")] == [3, 5]
    assert parts.store.plays(0, 100, "side") == []


def test_after_a_jump_the_ends_before_it_stay_unknown(parts: Parts) -> None:
    """Records shown while the disk was full were never stored: what ended when, before the
    jump, is not known; the plays after it end as usual."""
    parts.show(shown("p1.png"), shown("n1.rss", "ticker", at=1))
    parts.store.save_playback(merged(parts.record.current(), shown("p5.png", at=20)), sequence=9)
    plays = {play.sequence: play for play in parts.store.plays(0, 100)}
    assert plays[1].ended is None and plays[2].ended is None


# Through a display's HTTP face


def feed(display: Display, *playbacks: Playback) -> None:
    for playback in playbacks:
        display.playback_record.changed(playback)
    assert display.playback_record.flush(10)


def test_the_api_the_stream_and_the_webhooks_name_each_zone(
    make_display: Callable[..., Display],
) -> None:
    display = make_display()
    receiver = Receiver().start_thread()
    try:
        hook = receiver.url + "/hook"
        assert display.post("/playback/subscribe/", json={"subscriber-uri": hook}).ok
        start = display.playback()["sequence"]
        stream = open_stream(display.url)
        try:
            assert stream.next_record()[0] == start  # the current record first
            changes = [
                shown("p1.png"),
                shown("n1.rss", "ticker", at=0.5),
                shown("clock", "clock", at=0.6),
                shown("p2.png", at=5),
                shown("alert.html", layout=None, at=9, set_name="alerts"),
            ]
            feed(display, *changes)
            records = [stream.next_record() for _ in changes]
        finally:
            stream.close()
        assert [s for s, _ in records] == list(range(start + 1, start + 6))
        assert [r["zone"] for _, r in records] == ["main", "ticker", "clock", "main", "main"]
        assert records[2][1]["zones"] == {
            "main": entry(changes[0]),
            "ticker": entry(changes[1]),
            "clock": entry(changes[2]),
        }
        assert records[4][1]["zones"] == {"main": entry(changes[4])}
        assert display.playback() == records[-1][1]

        def delivered() -> list[dict[str, Any]]:
            return [json.loads(seen.body) for seen in receiver.records() if seen.acknowledged]

        updates = wait_until(lambda: len(delivered()) >= 5 and delivered(), 15, "5 updates")
        assert [u["sequence"] for u in updates] == [s for s, _ in records]  # no gap
        assert [u["zone"] for u in updates] == ["main", "ticker", "clock", "main", "main"]
        assert all(u["display"] == display.url for u in updates)
        assert [{k: v for k, v in u.items() if k != "display"} for u in updates] == [
            r for _, r in records
        ]
    finally:
        receiver.close()
    ticker = display.get("/x/plays", params={"zone": "ticker"}).json()["plays"]
    assert [(p["sequence"], p["zone"], p["layout"]) for p in ticker] == [
        (start + 2, "ticker", "lobby")
    ]
    assert ticker[0]["ended"] == changes[4].started.isoformat()
    every = display.get("/x/plays", params={"since": start}).json()["plays"]
    assert [p["zone"] for p in every] == ["main", "ticker", "clock", "main", "main"]
    for bad in ("", " ", "z" * 101):
        assert_error(display.get("/x/plays", params={"zone": bad}), 400, "invalid-field", "zone")


# A play log made before zones


#: How a display before zones logs a play (its step of the play log, its INSERT).
_LOGGED_BEFORE_ZONES = (
    "INSERT INTO plays (sequence, item, content_type, set_name, origin, started, logged,"
    " duration, ended, painted) VALUES (?, ?, 'text/html', 'lobby', 'schedule', ?,"
    " unixepoch('now'), 5.0, ?, 1)"
)


def test_a_play_log_made_before_zones_gains_them_without_loss(tmp_path: Path) -> None:
    """A display file as the release before zones leaves it: the play log at its first step,
    three plays (the last still on screen) and that record. Opened here: every play is kept,
    each of the main zone, full screen; the next record ends the one on screen; and the
    release before still writes to the file (a roll-back), its plays counted as main's."""
    path = tmp_path / "display.db"
    path.touch(mode=0o600)
    old = sqlite3.connect(path)
    old.isolation_level = None
    migrate(old, MIGRATIONS, legacy=RELEASED_STEPS)
    migrate(
        old,
        PLAY_LOG_MIGRATIONS[:PLAY_LOG_RELEASED_STEPS],
        version_table=PLAY_LOG_VERSION_TABLE,
        legacy=PLAY_LOG_RELEASED_STEPS,
    )
    starts = [(T0 + timedelta(seconds=n)).isoformat() for n in range(5)]
    for n in (1, 2, 3):
        item = f"http://127.0.0.1:9/{n}.html"
        old.execute(_LOGGED_BEFORE_ZONES, (n, item, starts[n], starts[n + 1] if n < 3 else None))
    top = {
        "content-item": "http://127.0.0.1:9/3.html",
        "content-type": "text/html",
        "origin": "schedule",
        "set": "lobby",
        "started": starts[3],
        "duration": 5.0,
    }
    old.execute(
        "INSERT INTO playback (id, sequence, record) VALUES (1, 3, ?)",
        (json.dumps({**top, "sequence": 3}),),
    )
    before = old.execute("SELECT * FROM plays ORDER BY sequence").fetchall()
    old.close()

    parts = Parts(tmp_path)
    try:
        plays = parts.store.plays(0, 10)
        assert [(p.sequence, p.zone, p.layout, p.ended) for p in plays] == [
            (1, "main", None, starts[2]),
            (2, "main", None, starts[3]),
            (3, "main", None, None),
        ]
        assert parts.record.current()["zones"] == {"main": top}
        parts.show(shown("p4.png", at=4), shown("n4.rss", "ticker", at=4.5))
        plays = parts.store.plays(0, 10)
        assert plays[2].ended == starts[4]
        assert [(p.zone, p.layout) for p in plays[3:]] == [("main", "lobby"), ("ticker", "lobby")]
    finally:
        parts.close()
    check = sqlite3.connect(path)
    try:
        # Nothing lost: the rows of before, as they were, with their zone and layout after.
        after = check.execute("SELECT * FROM plays WHERE sequence <= 3 ORDER BY sequence")
        assert [row[:10] for row in after.fetchall()][:2] == before[:2]
        # The version the release before reads stays its own (it opens the file).
        assert check.execute(f"SELECT version FROM {PLAY_LOG_VERSION_TABLE}").fetchall() == [(1,)]
        # It writes as it always did: its plays are the main zone's.
        check.execute(_LOGGED_BEFORE_ZONES, (6, "http://127.0.0.1:9/6.html", starts[4], None))
        check.commit()
        assert check.execute("SELECT zone, layout FROM plays WHERE sequence = 6").fetchone() == (
            "main",
            None,
        )
    finally:
        check.close()


# The real ``pdn display``


@pytest.mark.qt
@pytest.mark.slow
def test_a_real_display_without_a_layout_gives_the_main_zone(tmp_path: Path) -> None:
    """``pdn display`` (offscreen): its record and its webhooks have ``layout`` null, the one
    zone ``main`` with the top's fields, and ``zone`` main; so does the record it keeps across
    a kill -9."""
    receiver = HookReceiver()
    port = free_port()
    started: list[DisplayProcess] = []

    def start() -> DisplayProcess:
        display = DisplayProcess(tmp_path, platform="offscreen", port=port)
        started.append(display)
        return display.start().wait_ready()

    def full_screen(record: dict[str, Any]) -> bool:
        top = {name: record[name] for name in ZONE_FIELDS}
        return (record["layout"], record["zones"], record["zone"]) == (None, {"main": top}, "main")

    try:
        with one_page() as content:
            display = start()
            hook = {"subscriber-uri": receiver.url()}
            assert requests.post(display.url + "/playback/subscribe/", json=hook, timeout=5).ok
            item = {"content-item": content.url + "/page", "preferred-duration": "2 minutes"}
            assert requests.post(display.url + "/schedule", json=item, timeout=5).ok
            record = display.wait_playback(lambda r: r["content-item"] == item["content-item"])
            assert full_screen(record)
            sent = wait_until(
                lambda: [
                    body
                    for body in map(json.loads, receiver.bodies())
                    if body["sequence"] == record["sequence"]
                ],
                timeout=10,
            )
            assert {k: v for k, v in sent[0].items() if k != "display"} == record
            display.kill()
            again = start()
            kept = requests.get(again.url + "/playback/", timeout=5).json()
            assert kept["sequence"] >= record["sequence"] and full_screen(kept)
    finally:
        for display in started:
            display.kill()
        receiver.close()
