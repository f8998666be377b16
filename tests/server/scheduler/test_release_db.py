"""Databases made by the release of commit 0618ddd (which had one storage class
per database) open with this checkout's one storage and carry on: the same registry, the same
secrets, the outbox's subscriptions and pending event, and the registration order goes on.

The databases are tests/fixtures/release-0618ddd/: SQL text dumped from that release's own
``SqliteStorage``/``Outbox`` (scheduler.sqlite3, outbox.sqlite3) and ``PgStorage``/``PgOutbox``
(``pg_dump --inserts``), made by that folder's make.sh.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from server.platform.outbox import install_schema
from server.platform.pg import PgDatabase, open_pool
from server.platform.sql import SqliteDatabase
from server.scheduler.service import SchedulerService
from server.scheduler.storage import (
    PLAYS_COMPONENT,
    PLAYS_SCHEMA,
    Assignment,
    SchedulerStorage,
)
from tests.support.fleet import put_schedule
from tests.support.inprocess_display import cds
from tests.support.pages import PageServer
from tests.support.scheduler import start

RELEASE = Path(__file__).resolve().parents[2] / "fixtures" / "release-0618ddd"
LOCATION = {"latitude": "N54.0104", "longitude": "W2.7883"}
ONE, TWO, STRANGER = "http://192.0.2.1:8080", "http://192.0.2.2:8080/", "http://192.0.2.3:8080"
#: The schema versions the release left.
RELEASED = {"sqlite": {"scheduler": 7, "outbox": 2}, "postgresql": {"scheduler": 6, "outbox": 2}}


def load_postgresql(url: str) -> None:
    """Run the dump as psql would (its ``\\restrict`` lines are psql's own commands)."""
    script = "\n".join(
        line
        for line in (RELEASE / "postgresql.dump").read_text().splitlines()
        if not line.startswith("\\")
    )
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(script.encode())


def versions(backend: str, data: Path, url: str | None) -> dict[str, int]:
    if backend == "sqlite":
        with sqlite3.connect(data / "scheduler.sqlite3") as scheduler:
            (own,) = scheduler.execute("PRAGMA user_version").fetchone()
            made = scheduler.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'proof_of_play_schema'"
            ).fetchone()
            plays = (
                scheduler.execute("SELECT version FROM proof_of_play_schema").fetchall()
                if made
                else []
            )
            # Its steps after those its first release knew are counted apart, as the outbox's.
            if (
                plays
                and scheduler.execute(
                    "SELECT 1 FROM sqlite_master WHERE name = 'pdn_schema_steps'"
                ).fetchone()
            ):
                plays = (
                    scheduler.execute(
                        "SELECT version FROM pdn_schema_steps WHERE name = 'proof_of_play_schema'"
                    ).fetchall()
                    or plays
                )
        with sqlite3.connect(data / "outbox.sqlite3") as outbox:
            (box,) = outbox.execute("SELECT version FROM outbox_schema").fetchone()
            # The steps after those pdn 0.1.0 knows are counted apart (server.platform.db, issue
            # 25).
            if outbox.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'pdn_schema_steps'"
            ).fetchone():
                (box,) = outbox.execute(
                    "SELECT version FROM pdn_schema_steps WHERE name = 'outbox_schema'"
                ).fetchone()
        found = {"scheduler": own, "outbox": box}
        if plays:
            found[PLAYS_COMPONENT] = plays[0][0]
        return found
    assert url is not None
    with psycopg.connect(url) as connection:
        rows = connection.execute("SELECT component, version FROM pdn_schema").fetchall()
        # As on SQLite, the steps after those pdn 0.1.0 knows are counted apart.
        steps = connection.execute("SELECT to_regclass('pdn_schema_steps') IS NOT NULL")
        if steps.fetchone() == (True,):
            rows += connection.execute("SELECT component, version FROM pdn_schema_steps").fetchall()
    return dict(rows)


@pytest.fixture(params=["sqlite", "postgresql"])
def release(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, SchedulerService, dict[str, int]]]:
    monkeypatch.delenv("PDN_DATABASE_URL", raising=False)
    data = tmp_path / "data"
    url = None
    if request.param == "sqlite":
        data.mkdir()
        for name in ("scheduler", "outbox"):
            with sqlite3.connect(data / f"{name}.sqlite3") as made:
                made.executescript((RELEASE / f"{name}.sqlite3.dump").read_text())
    else:
        url = request.getfixturevalue("postgres_url")
        load_postgresql(url)
    before = versions(request.param, data, url)
    service = start(tmp_path, None, database=url)  # its data in ``data``
    yield request.param, service, before
    service.stop()
    after = versions(request.param, data, url)
    # The scheduler's tables: on SQLite its version is PRAGMA user_version, which the steps
    # after those the release knows leave alone; on PostgreSQL four steps (the parked default
    # of info_due, the console's sessions, the media library's tables, the playlists'). The
    # outbox's:
    # one step on both (one shape).
    # Proof of play's gap filling is a component of its own, so the versions the release
    # reads do not move for it: the release still opens the database.
    assert after == {
        "scheduler": before["scheduler"] + (4 if request.param != "sqlite" else 0),
        "outbox": before["outbox"] + 1,
        PLAYS_COMPONENT: len(PLAYS_SCHEMA),
    }


def test_a_release_database_opens_with_its_registry(
    release: tuple[str, SchedulerService, dict[str, int]],
) -> None:
    backend, service, before = release
    assert before == RELEASED[backend]
    storage = service.storage
    displays = storage.displays()
    assert [(d.url, d.name, d.pending) for d in displays] == [
        (ONE, "one", False),
        (TWO, None, False),
        (STRANGER, "stranger", True),
    ]
    assert displays[0].sensors == [{"sensor-id": "door", "sensor-type": "presence"}]
    assert displays[0].location == LOCATION
    hall = storage.schedule("hall")
    assert hall is not None and hall.digest == "d1" and b"a.html" in hall.xml
    assert storage.groups() == {"lobby": [ONE, TWO]}
    assert storage.display_groups(ONE) == ["lobby"]
    assert [(a.schedule_id, a.display, a.group) for a in storage.assignments()] == [
        ("hall", None, "lobby"),
        ("hall", ONE, None),
    ]
    assert storage.schedules_for(TWO) == ["hall"]
    assert storage.displays_holding("hall") == [ONE, TWO]
    assert storage.push_secret(ONE) == "whsec_" + "A" * 32
    assert storage.tls_pins() == {TWO: "sha256:" + "ab" * 32}
    assert storage.push_tokens() == {TWO: "pdn_token_of_two"}
    secret = storage.ingest_secret(ONE)
    assert secret and storage.display_for_secret(secret) == ONE
    plays = storage.plays(ONE)
    assert [(p.sequence, p.ended, p.painted) for p in plays] == [
        (1, "2026-11-23T10:00:10Z", True),
        (2, None, True),
    ]
    # The displays the release registered have their play logs read once, from
    # the first sequence (those pending approval not before they are approved); these are
    # not there to answer, which their gaps would say.
    states = storage.backfill_states()
    assert sorted(states) == sorted([ONE, TWO, STRANGER])
    assert all(state.seen == 0 and state.pending for state in states.values())
    outbox = service.outbox
    assert outbox.subscribers("schedule:hall") == ["http://127.0.0.1:9/hook"]
    assert outbox.subscribers("display:http://192.0.2.1:8080") == [f"{ONE}/schedule"]
    assert outbox.stats()["pending-events"] >= 1


def test_a_release_database_carries_on(
    release: tuple[str, SchedulerService, dict[str, int]], peer: PageServer
) -> None:
    _backend, service, _before = release
    storage = service.storage
    # Registration order goes on after the release's displays; the stranger can be approved.
    storage.upsert_display("http://192.0.2.4:8080", LOCATION, "four")
    assert [d.url for d in storage.displays()][-1] == "http://192.0.2.4:8080"
    assert storage.approve(STRANGER) is True
    assert storage.assign(Assignment("hall", display="http://192.0.2.4:8080")) is True
    # A change reaches a subscriber through the release's outbox tables.
    assert service.outbox.subscribe("schedule:hall", f"{peer.url}/hook") is True
    assert put_schedule(service.url, "hall", cds("hall", "http://127.0.0.1:9/b.html")).ok
    assert b"b.html" in peer.wait_for(1, "/hook")[0].body


def sqlite_tables(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Each table's columns (name, type, not null, default, key) and each index's columns."""
    with sqlite3.connect(path) as connection:
        names = connection.execute(
            "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()
        pragma = {"table": "table_info", "index": "index_info"}
        return {
            name: [tuple(row) for row in connection.execute(f"PRAGMA {pragma[kind]}({name})")]
            for kind, name in names
        }


def postgresql_tables(url: str) -> dict[str, list[tuple[object, ...]]]:
    with psycopg.connect(url) as connection:
        columns = connection.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default"
            " FROM information_schema.columns WHERE table_schema = 'public'"
            " ORDER BY table_name, column_name"
        ).fetchall()
        indexes = connection.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
        ).fetchall()
    found: dict[str, list[tuple[object, ...]]] = {}
    for table, *column in columns:
        found.setdefault(table, []).append(tuple(column))
    for name, definition in indexes:
        found[name] = [(definition,)]
    return found


def test_a_new_database_has_the_tables_of_a_release_one(tmp_path: Path, postgres_url: str) -> None:
    """Made from nothing by this checkout, or by the release and opened by this checkout:
    the same columns, types, defaults and indexes, on both databases."""
    release = tmp_path / "release.sqlite3"
    with sqlite3.connect(release) as made:
        made.executescript((RELEASE / "scheduler.sqlite3.dump").read_text())
    for path in (release, tmp_path / "new.sqlite3"):
        SchedulerStorage(SqliteDatabase(path)).close()
    assert sqlite_tables(release) == sqlite_tables(tmp_path / "new.sqlite3")

    load_postgresql(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("CREATE DATABASE fresh")
    fresh = postgres_url.rsplit("/", 1)[0] + "/fresh"
    for url in (postgres_url, fresh):
        pool = open_pool(url, name="test", max_size=1)
        install_schema(PgDatabase(pool))
        SchedulerStorage(PgDatabase(pool, own_pool=True)).close()
    assert postgresql_tables(postgres_url) == postgresql_tables(fresh)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("DROP DATABASE fresh")
