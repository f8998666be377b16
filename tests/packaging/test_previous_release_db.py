"""The release before opens the databases this one migrated (a rollback keeps its data).

This checkout writes a display's files (its state with the playback outbox, the pairings, the
content cache's index) and a scheduler's (registry, schedules, plays, outbox); then pdn 0.1.0,
installed from its wheel (tests/support/release.py), opens each of them with its own code, reads
what
it knows and writes to it; and this checkout opens them again and finds what 0.1.0 wrote.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from player.cache import ContentCache
from player.store import DisplayStore
from server.display.port import SensorMessage
from server.platform.db import STEPS_TABLE
from server.platform.outbox import Outbox
from server.platform.pairing import Pairing
from server.platform.sql import SqliteDatabase
from server.scheduler.storage import Assignment, PlayRecord, SchedulerStorage, StoredSchedule
from tests.support.release import run_release

HALL = b'<content-set name="hall"><content-item><requires-file><sources><uri>http://127.0.0.1:9/a.html</uri></sources></requires-file></content-item></content-set>'
ONE = "http://192.0.2.1:8080"

# What pdn 0.1.0 does with the files: its own classes, as its display and scheduler use them.
PREVIOUS = r"""
import json, sys
from pathlib import Path
from player.store import DisplayStore
from player.cache import ContentCache
from server.display.port import SensorMessage
from server.outbox import Outbox
from server.pairing import Pairing
from server.scheduler.storage import Assignment, PlayRecord, SqliteStorage, StoredSchedule

display, scheduler = Path(sys.argv[1]), Path(sys.argv[2])
seen = {}
store = DisplayStore(display / "display.db")
seen["cds"] = [name for name, _, _ in store.cds_documents()]
seen["sensors"] = [s.sensor_id for s in store.sensors()]
seen["playback"] = store.playback()[0]
store.put_cds("old", b"<content-set name='old'/>", 2.0)
store.record_sensing(SensorMessage("window", "presence", True, True), now=3.0)
outbox = Outbox(display / "display.db", name="display")
seen["display-subscribers"] = outbox.subscribers("playback")
outbox.subscribe("playback", "http://127.0.0.1:9/old")
outbox.publish("playback", b"{}", "application/json")
store.close()
pairing = Pairing(display / "pairing")
seen["controllers"] = sorted(c["name"] for c in pairing.controllers())
cache = ContentCache(display / "cache")
cache.close()
storage = SqliteStorage(scheduler / "scheduler.sqlite3")
seen["displays"] = [d.url for d in storage.displays()]
seen["schedules"] = [s.schedule_id for s in storage.schedules()]
seen["plays"] = [p.sequence for p in storage.plays()]
storage.record_play(PlayRecord(sys.argv[3], 3, "http://127.0.0.1:9/b.html", "text/html",
                               "hall", "schedule", "2026-11-23T10:00:20Z", 1795428020.0, 10.0,
                               None, True, 1795428021.0))
storage.save_schedule(StoredSchedule("foyer", b"<content-set name='foyer'/>", "d9", "foyer",
                                     5.0, source=""))
storage.close()
box = Outbox(scheduler / "outbox.sqlite3", name="scheduler")
seen["scheduler-subscribers"] = box.subscribers("schedule:hall")
print(json.dumps(seen))
"""


@pytest.fixture
def previous_python(previous_release: Path) -> Path:
    return previous_release  # the session's venv of pdn 0.1.0 (tests/conftest.py)


@pytest.fixture
def migrated(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A display's and a scheduler's files, written by this checkout."""
    display, scheduler = tmp_path / "display", tmp_path / "scheduler"
    store = DisplayStore(display / "display.db")
    store.put_cds("hall", HALL, 1.0)
    store.record_sensing(SensorMessage("door", "presence", True, True), now=1.0)
    store.save_playback({"content-item": "http://127.0.0.1:9/a.html"})
    outbox = Outbox(store.path, name="display")
    outbox.subscribe("playback", "http://127.0.0.1:9/new")
    store.close()
    pairing = Pairing(display / "pairing")
    pairing.close()
    ContentCache(display / "cache").close()
    storage = SchedulerStorage(SqliteDatabase(scheduler / "scheduler.sqlite3"))
    storage.upsert_display(ONE, {"latitude": "N54.0104", "longitude": "W2.7883"}, "one")
    storage.save_schedule(StoredSchedule("hall", HALL, "d1", "hall", 1795428000.0, source=""))
    storage.assign(Assignment("hall", display=ONE))
    for sequence in (1, 2):
        at = 1795428000.0 + 10 * sequence
        storage.record_play(
            PlayRecord(ONE, sequence, "http://127.0.0.1:9/a.html", "text/html", "hall",
                       "schedule", f"2026-11-23T10:00:{10 * sequence}Z", at, 10.0, None, True,
                       at + 1)
        )  # fmt: skip
    storage.close()
    box = Outbox(scheduler / "outbox.sqlite3", name="scheduler")
    box.subscribe("schedule:hall", "http://127.0.0.1:9/hook")
    yield display, scheduler


def steps(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as connection:
        return dict(connection.execute(f"SELECT name, version FROM {STEPS_TABLE}").fetchall())


def test_the_previous_release_opens_and_writes_what_this_one_migrated(
    previous_python: Path, migrated: tuple[Path, Path]
) -> None:
    display, scheduler = migrated
    before = steps(display / "display.db")
    result = run_release(previous_python, PREVIOUS, str(display), str(scheduler), ONE)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["cds"] == ["hall"]
    assert seen["sensors"] == ["door"]
    assert seen["playback"] == 1
    # The subscriptions as the tables of 0.1.0 hold them: those made before this release's
    # outbox took over the file are not among them (the outbox is this release's).
    assert seen["display-subscribers"] == []
    assert seen["displays"] == [ONE]
    assert seen["schedules"] == ["hall"]
    assert seen["plays"] == [1, 2]
    # This checkout again: 0.1.0's writes are there, and nothing was migrated twice.
    assert steps(display / "display.db") == before
    store = DisplayStore(display / "display.db")
    try:
        assert sorted(name for name, _, _ in store.cds_documents()) == ["hall", "old"]
        assert sorted(s.sensor_id for s in store.sensors()) == ["door", "window"]
    finally:
        store.close()
    storage = SchedulerStorage(SqliteDatabase(scheduler / "scheduler.sqlite3"))
    try:
        assert [p.sequence for p in storage.plays()] == [1, 2, 3]
        assert sorted(s.schedule_id for s in storage.schedules()) == ["foyer", "hall"]
    finally:
        storage.close()


def test_a_file_from_a_newer_release_opens_here(tmp_path: Path) -> None:
    """The next release adds a step (additive); this one opens its file as it is."""
    from server.platform.db import connect, migrate

    steps_now = (("CREATE TABLE a (x)",),)
    newer = (*steps_now, ("CREATE TABLE b (y)",))
    connection = connect(tmp_path / "f.db")
    try:
        assert migrate(connection, newer, legacy=1) == 0
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 1  # what 0.1.0 reads
        assert migrate(connection, steps_now, legacy=1) == 2  # opened as it is
        assert migrate(connection, newer, legacy=1) == 2
    finally:
        connection.close()


# The same on PostgreSQL: a scheduler's registry and outbox, made by this checkout.
PREVIOUS_PG = r"""
import json, sys
from server.pg import open_pool
from server.pgoutbox import PgOutbox
from server.scheduler.pgstorage import PgStorage
from server.scheduler.storage import PlayRecord

pool = open_pool(sys.argv[1], name="previous")
storage = PgStorage(pool)
seen = {"displays": [d.url for d in storage.displays()]}
seen["plays"] = [p.sequence for p in storage.plays()]
storage.record_play(PlayRecord(sys.argv[2], 3, "http://127.0.0.1:9/b.html", "text/html", "hall",
                               "schedule", "2026-11-23T10:00:20Z", 1795428020.0, 10.0, None, True,
                               1795428021.0))
outbox = PgOutbox(pool, name="scheduler")
seen["subscribers"] = outbox.subscribers("schedule:hall")
pool.close()
print(json.dumps(seen))
"""


def test_the_previous_release_opens_a_postgresql_database_this_one_migrated(
    previous_python: Path, postgres_url: str
) -> None:
    from server.platform.pg import PgDatabase, open_pool
    from server.platform.pgoutbox import PgOutbox

    pool = open_pool(postgres_url, name="new")
    storage = SchedulerStorage(PgDatabase(pool))
    storage.upsert_display(ONE, {"latitude": "N54.0104", "longitude": "W2.7883"}, "one")
    at = 1795428010.0
    storage.record_play(
        PlayRecord(ONE, 1, "http://127.0.0.1:9/a.html", "text/html", "hall", "schedule",
                   "2026-11-23T10:00:10Z", at, 10.0, None, True, at + 1)
    )  # fmt: skip
    PgOutbox(pool, name="scheduler").subscribe("schedule:hall", "http://127.0.0.1:9/hook")
    pool.close()
    result = run_release(previous_python, PREVIOUS_PG, postgres_url, ONE)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {"displays": [ONE], "plays": [1], "subscribers": ["http://127.0.0.1:9/hook"]}
    pool = open_pool(postgres_url, name="again")
    try:
        assert [p.sequence for p in SchedulerStorage(PgDatabase(pool)).plays()] == [1, 3]
    finally:
        pool.close()


# Every step after those pdn 0.1.0 knows is additive (server.platform.db's rule), for the next
# release too.
NOT_ADDITIVE = re.compile(
    r"\bDROP\s+(TABLE|COLUMN|INDEX|SEQUENCE)\b|\bRENAME\b|\bALTER\s+COLUMN\s+\w+\s+"
    r"(TYPE|SET\s+NOT\s+NULL|DROP)\b|\bADD\s+COLUMN\s+\w+\s+\w+\s+NOT\s+NULL(?!\s+DEFAULT)",
    re.IGNORECASE,
)


def schemas() -> Iterator[tuple[str, list[str]]]:
    from player import cache, store
    from server.platform import outbox, pairing
    from server.platform.sql import (
        RELEASED_POSTGRESQL_STEPS,
        RELEASED_SQLITE_STEPS,
        Dialect,
        steps_for,
    )
    from server.scheduler import storage

    def after(steps: Sequence[Sequence[str]], legacy: int) -> list[str]:
        return [statement for step in steps[legacy:] for statement in step]

    yield "display store", after(store.MIGRATIONS, store.RELEASED_STEPS)
    yield "cache index", after(cache.MIGRATIONS, 2)
    yield "pairings", after(pairing.MIGRATIONS, 1)
    released_by: tuple[tuple[Dialect, dict[str, int]], ...] = (
        ("sqlite", RELEASED_SQLITE_STEPS),
        ("postgresql", RELEASED_POSTGRESQL_STEPS),
    )
    for dialect, released in released_by:
        for name, schema in (("scheduler", storage.MIGRATIONS), ("outbox", outbox.MIGRATIONS)):
            yield f"{name} ({dialect})", after(steps_for(schema, dialect), released[name])


def test_steps_after_the_release_are_additive() -> None:
    # What the rule refuses (a step that drops the tables 0.1.0 reads).
    assert NOT_ADDITIVE.search("DROP TABLE outbox_events")
    assert NOT_ADDITIVE.search("ALTER TABLE plays ADD COLUMN seen INTEGER NOT NULL")
    assert not NOT_ADDITIVE.search("ALTER TABLE plays ADD COLUMN seen INTEGER NOT NULL DEFAULT 0")
    for name, statements in schemas():
        for statement in statements:
            assert not NOT_ADDITIVE.search(statement), f"{name}: {statement}"
