"""Proof of play with zones on the scheduler, on SQLite and PostgreSQL: each update is the
change of one zone; the play stored is that zone's, with its zone and layout, ended by its
zone's next play (or the layout going), also when updates come out of order or from the
display's play log; ``GET /x/plays`` answers and filters by zone (JSON and CSV); the display's
status and the console's card show each zone's item while a layout plays; and a database made
before zones keeps its plays, as the main zone's."""

from __future__ import annotations

import csv
import io
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from player.engine import Playback
from server.platform.http import ApiError
from server.platform.pg import PgDatabase, open_pool
from server.platform.sql import SqliteDatabase
from server.scheduler.plays import record_from_update
from server.scheduler.service import SchedulerService
from server.scheduler.storage import PlayRecord, SchedulerStorage
from tests.server.scheduler.test_play_gaps import LOCATION, ONE, open_storage
from tests.server.scheduler.test_release_db import RELEASE, load_postgresql
from tests.support.fleet import Screen, entry, plays
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("scheduler_backend")

T0 = datetime(2030, 1, 1, 8, 0, tzinfo=UTC)


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def update(
    sequence: int,
    zone: str,
    item: str,
    seconds: float,
    layout: str | None,
    zones: dict[str, dict[str, Any]],
) -> PlayRecord:
    """The update a display sends when ``zone`` shows ``item``; ``zones``: what every zone
    showed until then (changed here, as the display's record is)."""
    zones[zone] = {
        "content-item": f"http://127.0.0.1:9/{item}",
        "content-type": "text/html",
        "origin": "schedule",
        "set": "promos" if zone == "main" else "news",
        "started": at(seconds),
        "duration": 5.0,
    }
    if layout is None:
        for name in [name for name in zones if name != "main"]:
            del zones[name]
    body = {
        **zones["main"],
        "layout": layout,
        "zones": {name: dict(value) for name, value in zones.items()},
        "zone": zone,
        "sequence": sequence,
    }
    return record_from_update(ONE, body)


def screen_changes() -> list[PlayRecord]:
    """Main and ticker take turns under the layout 'lobby'; then full screen."""
    zones: dict[str, dict[str, Any]] = {}
    return [
        update(1, "main", "p1.png", 0, "lobby", zones),
        update(2, "ticker", "n1.rss", 0.5, "lobby", zones),
        update(3, "main", "p2.png", 5, "lobby", zones),
        update(4, "ticker", "n2.rss", 7, "lobby", zones),
        update(5, "main", "alert.html", 9, None, zones),
    ]


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[SchedulerStorage]:
    made = open_storage(tmp_path)
    made.upsert_display(ONE, LOCATION, "one")
    yield made
    made.close()


def ends(storage: SchedulerStorage) -> list[tuple[int, str, str | None, str | None]]:
    return [(p.sequence, p.zone, p.layout, p.ended) for p in storage.plays(ONE)]


#: What the plays of screen_changes() are, and when each ended.
ENDED = [
    (1, "main", "lobby", at(5)),
    (2, "ticker", "lobby", at(7)),
    (3, "main", "lobby", at(9)),
    (4, "ticker", "lobby", at(9)),  # the layout went: the ticker with it
    (5, "main", None, None),
]


def test_each_zones_play_ends_at_its_zones_next(storage: SchedulerStorage) -> None:
    changes = screen_changes()
    for play in changes:
        assert storage.record_play(play)
    assert ends(storage) == ENDED
    stored = storage.plays(ONE)
    assert stored[1].item == "http://127.0.0.1:9/n1.rss"  # the zone's own item
    assert stored[1].set_name == "news"


@pytest.mark.parametrize("order", [(1, 3, 2, 5, 4), (5, 4, 3, 2, 1), (2, 4, 1, 5, 3)])
def test_out_of_order_updates_end_the_same(
    storage: SchedulerStorage, order: tuple[int, ...]
) -> None:
    changes = {play.sequence: play for play in screen_changes()}
    for sequence in order:
        assert storage.record_play(changes[sequence])
    assert ends(storage) == ENDED


def test_a_missing_update_leaves_the_ends_it_hides_unknown(storage: SchedulerStorage) -> None:
    """Update 3 never came: it may have been the main zone's or the ticker's, so when plays
    1 and 2 ended is not known; the ticker's play 4 went with the layout at 5, the update
    right after it. Read from the display's play log (with the end the display knows), 3 is
    stored, and plays 1 and 2 end."""
    changes = screen_changes()
    for play in changes[:2] + changes[3:]:
        assert storage.record_play(play)
    assert ends(storage) == [
        (1, "main", "lobby", None),
        (2, "ticker", "lobby", None),
        (4, "ticker", "lobby", at(9)),
        (5, "main", None, None),
    ]
    logged = replace(changes[2], zones=None, ended=at(9))  # as the display's play log gives it
    assert storage.record_plays([logged]) == 1
    assert ends(storage) == ENDED


def test_a_database_made_before_zones_keeps_its_plays(
    scheduler_backend: str, tmp_path: Path
) -> None:
    """The release's database (tests/fixtures/release-0618ddd) with its two plays: opened
    here, they are the main zone's, full screen, and zones' plays are stored after them."""
    if scheduler_backend == "sqlite":
        path = tmp_path / "scheduler.sqlite3"
        with sqlite3.connect(path) as made:
            made.executescript((RELEASE / "scheduler.sqlite3.dump").read_text())
        path.chmod(0o600)
        storage = SchedulerStorage(SqliteDatabase(path))
    else:
        url = os.environ["PDN_DATABASE_URL"]
        load_postgresql(url)
        storage = SchedulerStorage(
            PgDatabase(open_pool(url, name="test", max_size=2), own_pool=True)
        )
    try:
        before = [(p.sequence, p.ended, p.zone, p.layout) for p in storage.plays(ONE)]
        assert before == [(1, "2026-11-23T10:00:10Z", "main", None), (2, None, "main", None)]
        zones: dict[str, dict[str, Any]] = {}
        storage.record_play(update(3, "main", "p1.png", 0, "lobby", zones))
        storage.record_play(update(4, "ticker", "n1.rss", 1, "lobby", zones))
        assert [(p.sequence, p.zone, p.ended) for p in storage.plays(ONE)] == [
            (1, "main", "2026-11-23T10:00:10Z"),
            (2, "main", at(0)),  # on screen when the release stopped: the main zone's next
            (3, "main", None),
            (4, "ticker", None),
        ]
    finally:
        storage.close()
    if scheduler_backend != "sqlite":
        with psycopg.connect(url) as connection:
            row = connection.execute(
                "SELECT column_default, is_nullable FROM information_schema.columns"
                " WHERE table_name = 'plays' AND column_name = 'zone'"
            ).fetchone()
        assert row is not None and "main" in row[0] and row[1] == "NO"


# Through a scheduler and a display of its fleet


def shown(item: str, zone: str, layout: str | None, seconds: float) -> Playback:
    return Playback(
        f"http://127.0.0.1:9/{item}",
        "text/html",
        "schedule",
        "promos" if zone == "main" else "news",
        T0 + timedelta(seconds=seconds),
        5.0,
        zone=zone,
        layout=layout,
    )


def test_a_displays_zones_in_proof_of_play_its_status_and_the_console(
    scheduler: SchedulerService, make_screen: Callable[..., Screen]
) -> None:
    base = scheduler.url
    screen = make_screen("split")
    wait_until(lambda: screen.display.outbox.subscribers("playback"))
    start = screen.display.playback()["sequence"]
    record = screen.display.playback_record
    for playback in (
        shown("p1.png", "main", "lobby", 0),
        shown("n1.rss", "ticker", "lobby", 0.5),
        shown("clock", "clock", "lobby", 0.6),
        shown("p2.png", "main", "lobby", 5),
    ):
        record.changed(playback)
    assert record.flush(10)
    since = {"display": screen.url, "since": T0.isoformat()}
    answer = wait_until(
        lambda: (found := plays(base, **since)) and len(found["plays"]) == 4 and found
    )
    assert [(p["sequence"], p["zone"], p["layout"]) for p in answer["plays"]] == [
        (start + 1, "main", "lobby"),
        (start + 2, "ticker", "lobby"),
        (start + 3, "clock", "lobby"),
        (start + 4, "main", "lobby"),
    ]
    assert answer["plays"][0]["ended"] == at(5)
    assert answer["plays"][1]["content-item"] == "http://127.0.0.1:9/n1.rss"
    assert answer["gaps"] == []
    ticker = plays(base, zone="ticker", **since)
    assert [p["sequence"] for p in ticker["plays"]] == [start + 2]
    assert [p["gap-before"] for p in ticker["plays"]] == [0]  # other zones' updates: no gap
    bad = requests.get(f"{base}/x/plays", params={"zone": ""}, timeout=5)
    assert bad.status_code == 400 and bad.json()["field"] == "zone"
    as_csv = requests.get(
        f"{base}/x/plays", params=since, headers={"Accept": "text/csv"}, timeout=5
    ).text
    rows = list(csv.DictReader(io.StringIO(as_csv)))
    assert [(r["zone"], r["layout"], r["content_item"]) for r in rows][:2] == [
        ("main", "lobby", "http://127.0.0.1:9/p1.png"),
        ("ticker", "lobby", "http://127.0.0.1:9/n1.rss"),
    ]

    # The display's status: the main zone's item at the top, each zone's item in 'zones'.
    def status() -> dict[str, Any] | None:
        playing: dict[str, Any] | None = entry(base, screen.url)["playing"]
        return playing if playing and playing.get("sequence") == start + 4 else None

    playing = wait_until(status)
    assert playing["content-item"] == "http://127.0.0.1:9/p2.png"
    assert playing["layout"] == "lobby"
    assert {name: zone["content-item"] for name, zone in playing["zones"].items()} == {
        "main": "http://127.0.0.1:9/p2.png",
        "ticker": "http://127.0.0.1:9/n1.rss",
        "clock": "http://127.0.0.1:9/clock",
    }
    card = requests.get(f"{base}/console/", timeout=5)
    assert card.status_code == 200, card.status_code
    assert 'data-zone="ticker"' in card.text and "http://127.0.0.1:9/n1.rss" in card.text

    # Full screen again: the other zones go from the status, the ticker's play ends.
    record.changed(shown("alert.html", "main", None, 9))
    assert record.flush(10)
    playing = wait_until(lambda: (p := entry(base, screen.url)["playing"])["layout"] is None and p)
    assert playing["zones"] is None and playing["content-item"] == "http://127.0.0.1:9/alert.html"
    ended = wait_until(lambda: plays(base, zone="ticker", **since)["plays"][0]["ended"])
    assert ended == at(9)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"zones": []}, "zones"),
        ({"zones": {"main": "p1.png"}}, "zones"),
        ({"zone": "side"}, "zones"),  # a zone the update does not have
        ({"zones": {f"z{n}": {} for n in range(33)}}, "zones"),
        ({"zone": "z" * 101}, "zone"),
        ({"zone": 3}, "zone"),
    ],
)
def test_an_update_whose_zones_make_no_sense_is_refused(change: dict[str, Any], field: str) -> None:
    zones: dict[str, dict[str, Any]] = {}
    good = update(1, "main", "p1.png", 0, "lobby", zones)
    body = {
        "content-item": good.item,
        "origin": "schedule",
        "started": good.started,
        "layout": "lobby",
        "zones": {"main": {"content-item": good.item, "origin": "schedule", "started": at(0)}},
        "zone": "main",
        "sequence": 1,
        **change,
    }
    with pytest.raises(ApiError) as refused:
        record_from_update(ONE, body)
    assert refused.value.status == 400 and refused.value.field == field
