"""server.platform.db, the one SQLite helper: settings, transactions, migrations, and the files that
pdn 0.1.0 wrote (before the helper) opening with their data."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from player.cache import ContentCache
from player.cachefiles import FileSpec
from player.store import DisplayStore, SensorReading
from server.platform.atomicfile import tighten, write_atomically
from server.platform.db import SchemaTooNewError, connect, migrate, schema_version, transaction
from server.platform.outbox import SCHEMA_VERSION as OUTBOX_SCHEMA
from server.platform.outbox import Outbox
from server.platform.sql import RELEASED_SQLITE_STEPS, SqliteDatabase
from server.scheduler.storage import SchedulerStorage

# What pdn 0.1.0 wrote, statement for statement (its own code, before server.platform.db existed).

OLD_DISPLAY_SCHEMA = (
    """CREATE TABLE cds_documents (
        name TEXT PRIMARY KEY, xml BLOB NOT NULL, received REAL NOT NULL)""",
    """CREATE TABLE interrupts (
        id INTEGER PRIMARY KEY AUTOINCREMENT, url TEXT NOT NULL, duration REAL NOT NULL,
        remaining REAL NOT NULL, received REAL NOT NULL, shown_at REAL)""",
    """CREATE TABLE sensors (
        id INTEGER PRIMARY KEY AUTOINCREMENT, sensor_id TEXT NOT NULL UNIQUE,
        sensor_type TEXT NOT NULL, data TEXT, data_source TEXT, updated REAL NOT NULL)""",
    """CREATE TABLE playback (
        id INTEGER PRIMARY KEY CHECK (id = 1), sequence INTEGER NOT NULL, record TEXT NOT NULL)""",
    "PRAGMA user_version=1",
)
#: The outbox version pdn 0.1.0 reads stays at what it knows; the steps after are counted apart
#: (server.platform.db).
OUTBOX_RELEASED = RELEASED_SQLITE_STEPS["outbox"]
STEPS_OF_OUTBOX = "SELECT version FROM pdn_schema_steps WHERE name = 'outbox_schema'"

OLD_OUTBOX_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS outbox_schema (version INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS outbox_subscriptions (
        id INTEGER PRIMARY KEY AUTOINCREMENT, topic TEXT NOT NULL, uri TEXT NOT NULL,
        created REAL NOT NULL, UNIQUE (topic, uri))""",
    """CREATE TABLE IF NOT EXISTS outbox_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT, subscription_id INTEGER NOT NULL,
        event_id TEXT NOT NULL, topic TEXT NOT NULL, body BLOB NOT NULL,
        content_type TEXT NOT NULL, created REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt REAL NOT NULL, first_failure REAL, last_error TEXT)""",
    "CREATE INDEX IF NOT EXISTS outbox_events_lane ON outbox_events (subscription_id, id)",
    "INSERT INTO outbox_schema (version) VALUES (1)",
)
OLD_SCHEDULER_SCHEMA = (
    """CREATE TABLE displays (
        key TEXT PRIMARY KEY, url TEXT NOT NULL, location TEXT NOT NULL, name TEXT,
        sensors TEXT NOT NULL DEFAULT '[]', registered REAL NOT NULL, checked REAL,
        seq INTEGER NOT NULL)""",
    """CREATE TABLE schedules (
        id TEXT PRIMARY KEY, xml BLOB NOT NULL, digest TEXT NOT NULL, root_name TEXT,
        updated REAL NOT NULL)""",
    "PRAGMA user_version=1",
)
# The cache's index had no version (user_version 0).
OLD_CACHE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS files (key TEXT PRIMARY KEY, name TEXT NOT NULL,"
    " size INTEGER NOT NULL, added REAL NOT NULL, last_used REAL NOT NULL,"
    " source TEXT NOT NULL)",
)


def old_file(
    path: Path, *statements: str, rows: tuple[tuple[str, tuple[object, ...]], ...]
) -> None:
    """A file as the old code left it: its own connection, WAL, committed and closed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    for statement in statements:
        connection.execute(statement)
    for sql, params in rows:
        connection.execute(sql, params)
    connection.commit()
    connection.close()


def read(path: Path, sql: str) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(path)
    try:
        return list(connection.execute(sql).fetchall())
    finally:
        connection.close()


# The helper


def test_connect_settings(tmp_path: Path) -> None:
    connection = connect(tmp_path / "a.db", synchronous="NORMAL", busy_timeout=2.5)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert connection.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
        assert connection.isolation_level is None  # autocommit: a lone statement commits
        connection.execute("CREATE TABLE t (x)")
        connection.execute("INSERT INTO t VALUES (1)")
        assert not connection.in_transaction
        assert read(tmp_path / "a.db", "SELECT x FROM t") == [(1,)]
        # Usable from another thread (the stores guard it with their own lock).
        seen: list[object] = []
        thread = threading.Thread(
            target=lambda: seen.append(connection.execute("SELECT x FROM t").fetchone()[0])
        )
        thread.start()
        thread.join()
        assert seen == [1]
    finally:
        connection.close()
    full = connect(tmp_path / "b.db")
    try:
        assert full.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL, the default
        assert full.execute("PRAGMA busy_timeout").fetchone()[0] == 10000
    finally:
        full.close()
    with pytest.raises(ValueError):
        connect(tmp_path / "c.db", synchronous="SOMETIMES")  # type: ignore[arg-type]


def test_transaction_commits_or_rolls_back(tmp_path: Path) -> None:
    connection = connect(tmp_path / "a.db")
    try:
        connection.execute("CREATE TABLE t (x)")
        with transaction(connection):
            connection.execute("INSERT INTO t VALUES (1)")
            assert connection.in_transaction
        with pytest.raises(RuntimeError), transaction(connection):
            connection.execute("INSERT INTO t VALUES (2)")
            raise RuntimeError("the change failed")
        assert not connection.in_transaction
        assert read(tmp_path / "a.db", "SELECT x FROM t") == [(1,)]
    finally:
        connection.close()


COUNTED = (
    ("CREATE TABLE runs (step INTEGER)", "INSERT INTO runs VALUES (1)"),
    ("INSERT INTO runs VALUES (2)",),
)


def test_migrations_are_applied_once_in_order(tmp_path: Path) -> None:
    connection = connect(tmp_path / "a.db")
    try:
        assert migrate(connection, COUNTED[:1]) == 0
        assert migrate(connection, COUNTED[:1]) == 1  # nothing left to do
        assert migrate(connection, COUNTED) == 1  # only the new step runs
        assert migrate(connection, COUNTED) == 2
        assert connection.execute("SELECT step FROM runs").fetchall() == [(1,), (2,)]
        assert schema_version(connection) == 2
        with pytest.raises(SchemaTooNewError) as raised:
            migrate(connection, COUNTED[:1])  # an older pdn
        assert (raised.value.found, raised.value.supported) == (2, 1)
    finally:
        connection.close()
    # A second connection (a restart) finds the file up to date.
    again = connect(tmp_path / "a.db")
    try:
        assert migrate(again, COUNTED) == 2
        assert again.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2
    finally:
        again.close()


def test_a_failing_step_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    connection = connect(tmp_path / "a.db")
    try:
        with pytest.raises(sqlite3.OperationalError):
            migrate(connection, (*COUNTED, ("INSERT INTO nowhere VALUES (3)",)))
        assert schema_version(connection) == 0
        assert connection.execute("SELECT name FROM sqlite_master").fetchall() == []
    finally:
        connection.close()


def test_a_version_table_leaves_user_version_to_the_file_owner(tmp_path: Path) -> None:
    connection = connect(tmp_path / "a.db")
    try:
        migrate(connection, COUNTED)
        extra = (("CREATE TABLE extra (x)",),)
        assert migrate(connection, extra, version_table="extra_schema") == 0
        assert migrate(connection, extra, version_table="extra_schema") == 1
        assert schema_version(connection) == 2
        assert schema_version(connection, "extra_schema") == 1
        assert connection.execute("SELECT version FROM extra_schema").fetchall() == [(1,)]
        with pytest.raises(ValueError):
            schema_version(connection, "extra; DROP TABLE runs")
    finally:
        connection.close()


# Files written by pdn 0.1.0 open with their data


def test_an_old_display_file_keeps_its_state_and_events(tmp_path: Path) -> None:
    path = tmp_path / "display.db"
    old_file(
        path,
        *OLD_DISPLAY_SCHEMA,
        *OLD_OUTBOX_SCHEMA,
        rows=(
            ("INSERT INTO cds_documents VALUES (?, ?, ?)", ("lobby", b"<content-set/>", 1.0)),
            (
                "INSERT INTO interrupts (url, duration, remaining, received) VALUES (?, ?, ?, ?)",
                ("http://example.org/i", 60.0, 30.0, 2.0),
            ),
            (
                "INSERT INTO sensors (sensor_id, sensor_type, data, updated) VALUES (?, ?, ?, ?)",
                ("door", "presence", "true", 3.0),
            ),
            ("INSERT INTO playback VALUES (1, 7, ?)", ('{"sequence": 7}',)),
            (
                "INSERT INTO outbox_subscriptions (topic, uri, created) VALUES (?, ?, ?)",
                ("playback", "http://127.0.0.1:9/hook", 4.0),
            ),
            (
                "INSERT INTO outbox_events (subscription_id, event_id, topic, body, content_type,"
                " created, next_attempt) VALUES (1, 'e1', 'playback', x'7b7d', 'application/json',"
                " 5.0, 5.0)",
                (),
            ),
        ),
    )
    for _ in range(2):  # twice: the second opening finds nothing to migrate
        store = DisplayStore(path)
        outbox = Outbox(path, name="test")  # not started: nothing is sent
        try:
            assert store.cds_documents() == [("lobby", b"<content-set/>", 1.0)]
            assert [(r.url, r.remaining) for r in store.queued_requests()] == [
                ("http://example.org/i", 30.0)
            ]
            assert store.sensors() == [
                SensorReading("door", "presence", True, True, None, 3.0),
            ]
            assert store.playback() == (7, {"sequence": 7})
            assert outbox.subscribers("playback") == ["http://127.0.0.1:9/hook"]
            assert outbox.stats()["pending-events"] == 1
        finally:
            store.close()
            outbox.stop()
    assert read(path, "PRAGMA user_version") == [(1,)]
    assert read(path, "SELECT version FROM outbox_schema") == [(OUTBOX_RELEASED,)]
    assert read(path, STEPS_OF_OUTBOX) == [(OUTBOX_SCHEMA,)]


def test_an_old_outbox_keeps_a_failing_subscribers_back_off(tmp_path: Path) -> None:
    """An outbox of release 0618ddd keeps a failing subscriber's back-off on its oldest event;
    this release keeps it on the subscription, taken over when the tables are rebuilt."""
    path = tmp_path / "outbox.sqlite3"
    old_file(
        path,
        *OLD_OUTBOX_SCHEMA,
        "ALTER TABLE outbox_subscriptions ADD COLUMN signing_secret TEXT",
        "UPDATE outbox_schema SET version = 2",
        rows=(
            (
                "INSERT INTO outbox_subscriptions (topic, uri, created, signing_secret)"
                " VALUES (?, ?, ?, ?)",
                ("sensor", "http://127.0.0.1:9/dead", 1.0, "whsec_" + "C" * 32),
            ),
            ("INSERT INTO outbox_subscriptions (topic, uri, created) VALUES (?, ?, ?)",
             ("sensor", "http://127.0.0.1:9/live", 2.0)),
            (
                "INSERT INTO outbox_events (subscription_id, event_id, topic, body,"
                " content_type, created, attempts, next_attempt, first_failure, last_error)"
                " VALUES (1, 'e1', 'sensor', x'31', 'text/plain', 3.0, 4, 99.0, 5.0, 'HTTP 503'),"
                " (1, 'e2', 'sensor', x'32', 'text/plain', 6.0, 0, 6.0, NULL, NULL),"
                " (2, 'e3', 'sensor', x'33', 'text/plain', 7.0, 0, 7.0, NULL, NULL)",
                (),
            ),
        ),
    )  # fmt: skip
    Outbox(path, name="test").stop()  # not started: nothing is sent
    assert read(
        path,
        "SELECT id, uri, created, attempts, next_attempt, first_failure, last_error,"
        " signing_secret FROM pdn_outbox_subscriptions ORDER BY id",
    ) == [
        (1, "http://127.0.0.1:9/dead", 1.0, 4, 99.0, 5.0, "HTTP 503", "whsec_" + "C" * 32),
        (2, "http://127.0.0.1:9/live", 2.0, 0, None, None, None, None),
    ]
    assert read(
        path, "SELECT id, subscription_id, event_id, body, created FROM pdn_outbox_events"
    ) == [(1, 1, "e1", b"1", 3.0), (2, 1, "e2", b"2", 6.0), (3, 2, "e3", b"3", 7.0)]
    assert read(path, "SELECT version FROM outbox_schema") == [(OUTBOX_RELEASED,)]
    assert read(path, STEPS_OF_OUTBOX) == [(OUTBOX_SCHEMA,)]


def test_a_new_display_file_has_the_versions_the_old_code_reads(tmp_path: Path) -> None:
    path = tmp_path / "display.db"
    DisplayStore(path).close()
    Outbox(path, name="test").stop()
    Outbox(path, name="test").stop()
    assert read(path, "PRAGMA user_version") == [(1,)]
    # The old outbox read this one row: it must be there, once.
    assert read(path, "SELECT version FROM outbox_schema") == [(OUTBOX_RELEASED,)]
    assert read(path, STEPS_OF_OUTBOX) == [(OUTBOX_SCHEMA,)]


def test_an_old_scheduler_file_keeps_its_displays_and_schedules(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.db"
    old_file(
        path,
        *OLD_SCHEDULER_SCHEMA,
        rows=(
            (
                "INSERT INTO displays (key, url, location, registered, seq) VALUES (?, ?, ?, ?, ?)",
                ("http://d1:8080", "http://d1:8080/", '{"room": "lobby"}', 1.0, 1),
            ),
            (
                "INSERT INTO schedules VALUES (?, ?, ?, ?, ?)",
                ("lobby", b"<content-set/>", "ab", "lobby", 2.0),
            ),
        ),
    )
    for _ in range(2):
        storage = SchedulerStorage(SqliteDatabase(path))
        try:
            assert [(d.url, d.location, d.pending) for d in storage.displays()] == [
                ("http://d1:8080/", {"room": "lobby"}, False)  # registered before: approved
            ]
            schedule = storage.schedule("lobby")
            assert schedule is not None and schedule.xml == b"<content-set/>"
            assert storage.ingest_secret("http://d1:8080")  # migration 3
        finally:
            storage.close()
    # 2, 3: the fleet; 4: each schedule's source folder, 5: indexes;
    # 6: the secret each display signs its pushes with, 7: pending or approved
    assert read(path, "PRAGMA user_version") == [(7,)]


def test_an_old_cache_index_keeps_serving_its_files(tmp_path: Path) -> None:
    body = b"verified bytes"
    digest = hashlib.sha256(body).hexdigest()
    name = f"sha256-{digest}.png"
    (tmp_path / "cache" / "files").mkdir(parents=True)
    (tmp_path / "cache" / "files" / name).write_bytes(body)
    old_file(
        tmp_path / "cache" / "index.sqlite3",
        *OLD_CACHE_SCHEMA,
        rows=(
            (
                "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?)",
                (f"sha256-{digest}", name, len(body), 1.0, 1.0, "http://127.0.0.1:9/a.png"),
            ),
        ),
    )
    # No network: the file is served from the old index.
    spec = FileSpec(sources=("http://127.0.0.1:9/a.png",), hashes=(("sha256", digest),))
    for _ in range(2):
        cache = ContentCache(tmp_path, workers=1)
        try:
            path = cache.path_for(spec)
            assert path is not None and path.read_bytes() == body
        finally:
            cache.close()
    # Migrated to the current schema (2: the validators of files without hashes).
    assert read(tmp_path / "cache" / "index.sqlite3", "PRAGMA user_version") == [(2,)]


@pytest.fixture
def open_umask() -> Iterator[None]:
    """umask 000: whatever a file gets, it gets from pdn, not from the umask."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("open_umask")
def test_every_database_and_its_wal_and_shm_are_0600_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "secrets.db"
    connection = connect(path)
    connection.execute("CREATE TABLE t (secret TEXT)")
    connection.execute("INSERT INTO t VALUES ('whsec_x')")
    for name in ("secrets.db", "secrets.db-wal", "secrets.db-shm"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
    connection.close()


@pytest.mark.usefixtures("open_umask")
def test_a_database_left_readable_is_tightened_at_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    first = connect(path)
    first.execute("CREATE TABLE t (x)")
    for name in ("old.db", "old.db-wal", "old.db-shm"):
        os.chmod(tmp_path / name, 0o644)
    again = connect(path)
    for name in ("old.db", "old.db-wal", "old.db-shm"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
    again.close()
    first.close()


@pytest.mark.usefixtures("open_umask")
def test_secret_files_are_written_and_kept_0600(tmp_path: Path) -> None:
    secret = tmp_path / "webhook-secret"
    write_atomically(secret, b"whsec_x\n")
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    os.chmod(secret, 0o664)
    assert tighten(secret)
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert not tighten(secret)  # already private: left alone
    link = tmp_path / "link"
    target = tmp_path / "elsewhere"
    target.write_bytes(b"not ours")
    os.chmod(target, 0o644)
    link.symlink_to(target)
    with pytest.raises(OSError):
        tighten(link)  # never through a symlink
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
