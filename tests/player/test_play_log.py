"""The display's play log: every playback record kept with it, bounded in rows and
days, served at ``GET /x/plays``; an older display database gains it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from player.store import (
    MIGRATIONS,
    PLAY_LOG_MIGRATIONS,
    PLAY_LOG_RELEASED_STEPS,
    PLAY_LOG_VERSION_TABLE,
    DisplayStore,
)
from server.platform.db import migrate
from tests.server.display.test_api import assert_error
from tests.support.inprocess_display import Display


def record(n: int, item: str | None = None) -> dict[str, Any]:
    return {
        "content-item": item or f"http://127.0.0.1:9/{n}.html",
        "content-type": "text/html",
        "origin": "schedule",
        "set": "lobby",
        "started": f"2030-01-01T00:00:{n % 60:02d}+00:00",
        "duration": 5.0,
    }


class Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


def sequences(store: DisplayStore, since: int = 0, limit: int = 1000) -> list[int]:
    return [play.sequence for play in store.plays(since, limit)]


def test_each_record_is_logged_with_when_it_ended(tmp_path: Path) -> None:
    store = DisplayStore(tmp_path / "display.db")
    try:
        for n in range(1, 4):
            assert store.save_playback(record(n))["sequence"] == n
        plays = store.plays(0, 10)
        assert [p.sequence for p in plays] == [1, 2, 3]
        assert plays[0].json() == {
            "sequence": 1,
            "zone": "main",
            "layout": None,
            "content-item": "http://127.0.0.1:9/1.html",
            "content-type": "text/html",
            "set": "lobby",
            "origin": "schedule",
            "started": "2030-01-01T00:00:01+00:00",
            "ended": "2030-01-01T00:00:02+00:00",
            "duration": 5.0,
            "painted": True,
        }
        assert plays[2].ended is None  # on screen still
        # A jump (records shown while the disk was full): the one before's end is not known.
        store.save_playback(record(9), sequence=9)
        assert store.plays(2, 10)[0].ended is None
        assert sequences(store, since=1, limit=2) == [2, 3]
        assert store.play_log_status() == {
            "plays": 4,
            "first-sequence": 1,
            "last-sequence": 9,
            "max-plays": 1_000_000,
            "days": 90,
        }
    finally:
        store.close()


def test_a_record_and_its_log_entry_commit_together(tmp_path: Path) -> None:
    store = DisplayStore(tmp_path / "display.db")

    def fail(_connection: sqlite3.Connection, _record: dict[str, Any]) -> None:
        raise RuntimeError("the webhook events could not be queued")

    try:
        store.save_playback(record(1))
        with pytest.raises(RuntimeError):
            store.save_playback(record(2), fail)
        assert store.playback()[0] == 1
        assert sequences(store) == [1]
        assert store.play_log_status()["plays"] == 1
    finally:
        store.close()


def test_the_log_keeps_at_most_its_rows_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "display.db"
    store = DisplayStore(path, play_log_rows=5)
    try:
        for n in range(1, 13):
            store.save_playback(record(n))
        assert sequences(store) == [8, 9, 10, 11, 12]
        assert store.play_log_status()["plays"] == 5
    finally:
        store.close()
    # Opened again with a smaller bound: the next write keeps to it; the count is right.
    store = DisplayStore(path, play_log_rows=2)
    try:
        assert store.play_log_status()["plays"] == 5
        store.save_playback(record(13))
        assert sequences(store) == [12, 13]
        assert store.play_log_status()["plays"] == 2
    finally:
        store.close()


def test_plays_older_than_the_days_kept_go(tmp_path: Path) -> None:
    clock = Clock()
    store = DisplayStore(tmp_path / "display.db", play_log_days=90, clock=clock)
    try:
        for n in range(1, 4):
            store.save_playback(record(n))
        clock.now += 60 * 86400
        store.save_playback(record(4))
        clock.now += 31 * 86400  # the first three are 91 days old, the fourth 31
        assert store.expire_plays() == 3
        assert sequences(store) == [4]
        assert store.play_log_status()["plays"] == 1
        # Expiry also runs as records are written (the first write after opening, then every
        # so many): a display that writes gets rid of old plays without being told.
        clock.now += 60 * 86400
        store.close()
        store = DisplayStore(tmp_path / "display.db", play_log_days=90, clock=clock)
        store.save_playback(record(5))
        assert sequences(store) == [5]
        assert store.play_log_status()["plays"] == 1
    finally:
        store.close()


def test_bad_bounds_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        DisplayStore(tmp_path / "a.db", play_log_rows=0)
    with pytest.raises(ValueError):
        DisplayStore(tmp_path / "b.db", play_log_days=0)


def test_an_older_display_database_gains_the_log_and_keeps_its_version(tmp_path: Path) -> None:
    """A file of the release before: its tables, user_version 1, a playback record. It opens,
    gains the play log, and keeps the user_version that release reads (so a roll-back to it
    still opens the file)."""
    path = tmp_path / "display.db"
    old = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        old.execute(statement)
    old.execute("INSERT INTO playback (id, sequence, record) VALUES (1, 41, '{\"sequence\": 41}')")
    old.execute("PRAGMA user_version = 1")
    old.commit()
    old.close()
    for _ in range(2):  # the second opening finds nothing to migrate
        store = DisplayStore(path)
        try:
            assert store.playback() == (41, {"sequence": 41})
            assert store.plays(0, 10) == []
            assert store.zone_requests("lobby", "side").queued_requests() == []
        finally:
            store.close()
    store = DisplayStore(path)
    try:
        assert store.save_playback(record(42))["sequence"] == 42
        assert sequences(store) == [42]
    finally:
        store.close()
    check = sqlite3.connect(path)
    try:
        assert check.execute("PRAGMA user_version").fetchone() == (1,)
        assert check.execute(f"SELECT version FROM {PLAY_LOG_VERSION_TABLE}").fetchall() == [(1,)]
    finally:
        check.close()


# GET /x/plays


def test_get_plays_in_sequence_order(make_display: Callable[..., Display]) -> None:
    display = make_display()
    first = display.playback()["sequence"]  # the idle page of a new display
    for n in range(1, 6):
        display.store.save_playback(record(n))
    answer = display.get("/x/plays").json()
    assert [p["sequence"] for p in answer["plays"]] == list(range(first, first + 6))
    assert answer["last-sequence"] == first + 5
    assert answer["plays"][0]["origin"] == "idle"
    assert answer["plays"][1]["content-item"] == "http://127.0.0.1:9/1.html"
    page = display.get("/x/plays", params={"since": first + 1, "limit": 2}).json()
    assert [p["sequence"] for p in page["plays"]] == [first + 2, first + 3]
    assert display.get("/x/plays", params={"since": first + 5}).json() == {
        "plays": [],
        "last-sequence": first + 5,
    }
    health = display.get("/x/health").json()
    assert health["play-log"]["plays"] == 6
    assert health["play-log"]["last-sequence"] == first + 5


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"since": "-1"}, "since"),
        ({"since": "x"}, "since"),
        ({"since": "1.5"}, "since"),
        ({"since": str(2**63)}, "since"),
        ({"limit": "0"}, "limit"),
        ({"limit": "10001"}, "limit"),
        ({"limit": ""}, "limit"),
        ({"since": "٣"}, "since"),  # a digit, but not an ASCII one
    ],
)
def test_bad_parameters_get_the_error_body(
    make_display: Callable[..., Display], query: dict[str, str], field: str
) -> None:
    display = make_display()
    assert_error(display.get("/x/plays", params=query), 400, "invalid-field", field)


def test_the_log_needs_the_token_where_reads_are_protected(
    make_display: Callable[..., Display],
) -> None:
    display = make_display(api_token="s3cret", protect_reads=True)
    assert_error(display.get("/x/plays"), 401, "unauthorized")
    answer = display.get("/x/plays", headers={"Authorization": "Bearer s3cret"})
    assert answer.status_code == 200 and answer.json()["plays"]
    # Closed but reads free: the log is a read like the others.
    open_reads = make_display(api_token="s3cret")
    assert open_reads.get("/x/plays").status_code == 200


def test_a_play_log_a_later_release_extended_still_opens(tmp_path: Path) -> None:
    """After a rollback: a later release added an (additive) step to the play log of a file this
    release made, and wrote plays. This release opens the file as it is and keeps logging."""
    path = tmp_path / "display.db"
    store = DisplayStore(path)
    try:
        store.save_playback(record(1))
    finally:
        store.close()
    later = sqlite3.connect(path)
    later.isolation_level = None
    migrate(
        later,
        (*PLAY_LOG_MIGRATIONS, ("ALTER TABLE plays ADD COLUMN screen TEXT",)),
        version_table=PLAY_LOG_VERSION_TABLE,
        legacy=PLAY_LOG_RELEASED_STEPS,
    )
    later.close()
    store = DisplayStore(path)
    try:
        assert store.save_playback(record(2))["sequence"] == 2
        assert sequences(store) == [1, 2]
    finally:
        store.close()
