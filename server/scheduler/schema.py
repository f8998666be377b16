"""The scheduler's tables, as migrations: ``MIGRATIONS[n]`` takes them from version n to n + 1,
on SQLite and PostgreSQL alike but for the steps marked ``only(...)`` (``server.platform.sql``,
``server.platform.migration``). :class:`server.scheduler.storage.SchedulerStorage` installs them
and reads and writes them; the plays are a component of their own
(``server.scheduler.playstore``).
"""

from __future__ import annotations

from server.platform.sql import Schema, only

__all__ = ["MIGRATIONS"]

# The first tables, the same on both databases ({real}:
# server.platform.sql.TYPES).
_DISPLAYS_V1 = (
    "key TEXT PRIMARY KEY, url TEXT NOT NULL, location TEXT NOT NULL, name TEXT,"
    " sensors TEXT NOT NULL DEFAULT '[]', registered {real} NOT NULL, checked {real}"
)
_SCHEDULES_V1 = """CREATE TABLE schedules (
    id TEXT PRIMARY KEY,
    xml {blob} NOT NULL,
    digest TEXT NOT NULL,
    root_name TEXT,
    updated {real} NOT NULL
)"""
_FLEET_TABLES = (
    """CREATE TABLE display_groups (
        display_key TEXT NOT NULL,
        name TEXT NOT NULL,
        source TEXT NOT NULL CHECK (source IN ('display', 'operator')),
        PRIMARY KEY (display_key, name, source)
    )""",
    """CREATE TABLE assignments (
        schedule_id TEXT NOT NULL,
        target_kind TEXT NOT NULL CHECK (target_kind IN ('display', 'group')),
        target TEXT NOT NULL,
        created {real} NOT NULL,
        PRIMARY KEY (schedule_id, target_kind, target)
    )""",
    """CREATE TABLE pushed_sets (
        display_key TEXT NOT NULL,
        name TEXT NOT NULL,
        digest TEXT NOT NULL,
        pushed {real} NOT NULL,
        PRIMARY KEY (display_key, name)
    )""",
    """CREATE TABLE plays (
        id {serial},
        display_key TEXT NOT NULL,
        display_url TEXT NOT NULL,
        sequence {bigint} NOT NULL,
        item TEXT,
        content_type TEXT,
        set_name TEXT,
        origin TEXT NOT NULL,
        started TEXT NOT NULL,
        started_at {real} NOT NULL,
        duration {real},
        ended TEXT,
        painted {bool} NOT NULL,
        received {real} NOT NULL,
        UNIQUE (display_key, sequence, started)
    )""",
    "CREATE INDEX plays_by_time ON plays (started_at)",
    "CREATE INDEX plays_by_display ON plays (display_key, sequence)",
)
# A schedule change looks up where it is assigned or was pushed (Fleet.schedule_changed).
_LOOKUP_INDEXES = (
    "CREATE INDEX pushed_sets_by_name ON pushed_sets (name)",
    "CREATE INDEX display_groups_by_name ON display_groups (name)",
)

# MIGRATIONS[n] takes the tables from version n to n + 1 (server.platform.sql: a step marked
# only(...) is one database's history; SQLite counts 7 steps before the registration secrets,
# PostgreSQL 6).
MIGRATIONS: Schema = (
    only("sqlite", f"CREATE TABLE displays ({_DISPLAYS_V1}, seq INTEGER NOT NULL)", _SCHEDULES_V1),
    only("sqlite", "ALTER TABLE displays ADD COLUMN ingest TEXT", *_FLEET_TABLES),
    # Displays registered before the fleet get their playback-ingest secret now, so the
    # scheduler subscribes to their updates without waiting for them to register again.
    only("sqlite", "UPDATE displays SET ingest = lower(hex(randomblob(18))) WHERE ingest IS NULL"),
    only(
        "postgresql",
        f"CREATE TABLE displays ({_DISPLAYS_V1}, seq BIGSERIAL NOT NULL, ingest TEXT UNIQUE,"
        " probe_until DOUBLE PRECISION)",
        "CREATE INDEX displays_by_seq ON displays (seq)",
        _SCHEDULES_V1,
        *_FLEET_TABLES,
    ),
    # Where each schedule came from (a folder, or the API); those stored before: any folder.
    ("ALTER TABLE schedules ADD COLUMN source TEXT NOT NULL DEFAULT '*'",),
    # A registration takes the next seq; listing is by seq; a schedule change looks up
    # where it is assigned or was pushed: indexes, not scans.
    only("sqlite", "CREATE INDEX displays_by_seq ON displays (seq)", *_LOOKUP_INDEXES),
    # Background reads shared by the processes (server.scheduler.pgfleet): when each kind of
    # read is due next (epoch s, the database's clock), how many failed in a row and (the
    # next step) with what; and what each display is doing (GET /x/fleet), the same from
    # every process.
    only(
        "postgresql",
        "ALTER TABLE displays DROP COLUMN probe_until,"
        " ADD COLUMN info_due DOUBLE PRECISION NOT NULL DEFAULT 0,"
        " ADD COLUMN info_failures INTEGER NOT NULL DEFAULT 0,"
        " ADD COLUMN health_due DOUBLE PRECISION NOT NULL DEFAULT 0,"
        " ADD COLUMN health_failures INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX displays_info_due ON displays (info_due)",
        "CREATE INDEX displays_health_due ON displays (health_due)",
        "CREATE SEQUENCE display_status_revision",
        """CREATE TABLE display_status (
            key TEXT PRIMARY KEY,
            fields TEXT NOT NULL,
            revision BIGINT NOT NULL,
            thumbnail BYTEA
        )""",
        "CREATE INDEX display_status_by_revision ON display_status (revision)",
    ),
    only(
        "postgresql",
        "ALTER TABLE displays ADD COLUMN info_error TEXT, ADD COLUMN health_error TEXT",
        *_LOOKUP_INDEXES,
    ),
    # What a display gives when it registers: the secret pushes to it are signed
    # with, and the fingerprint of its TLS certificate, pinned.
    (
        "ALTER TABLE displays ADD COLUMN push_secret TEXT",
        "ALTER TABLE displays ADD COLUMN tls_pin TEXT",
    ),
    # A display that registers without the enrolment token is 'pending' until an operator
    # approves it (rows older than this step are 'approved'); and the token
    # the scheduler got by pairing with a display (the console's "Add a display").
    (
        "ALTER TABLE displays ADD COLUMN state TEXT NOT NULL DEFAULT 'approved'",
        "ALTER TABLE displays ADD COLUMN push_token TEXT",
    ),
    # A new display's info read waits for its health read (server.scheduler.probes.FOLLOWER):
    # registering leaves it at infinity, PgProbeQueue.due_now sets it, just after.
    only("postgresql", "ALTER TABLE displays ALTER COLUMN info_due SET DEFAULT 'Infinity'"),
    # Console sessions (server.scheduler.sessions): the SHA-256 of each random session id,
    # a mark of the operator token it was opened with, when it opened and was last used.
    (
        """CREATE TABLE console_sessions (
            id_hash TEXT PRIMARY KEY,
            token_mark TEXT NOT NULL,
            created {real} NOT NULL,
            seen {real} NOT NULL
        )""",
    ),
    # The media library (server.scheduler.media.store): one row per item, keyed by the SHA-256
    # of its bytes (of its canonical URL for a web link; ``link``), a page bundle's folder
    # (``root``) and a video's warnings (JSON), and the bytes themselves in chunks of at most
    # 1 MiB, in the same database so that every scheduler process on PostgreSQL serves every item.
    (
        """CREATE TABLE media (
            sha256 TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '[]',
            kind TEXT NOT NULL,
            mime TEXT NOT NULL,
            size {bigint} NOT NULL,
            width INTEGER,
            height INTEGER,
            duration {real},
            codec TEXT,
            profile TEXT,
            uploader TEXT NOT NULL,
            uploaded {real} NOT NULL,
            thumbnail {blob},
            fps {real},
            link TEXT,
            root TEXT,
            warnings TEXT NOT NULL DEFAULT '[]'
        )""",
        """CREATE TABLE media_chunks (
            sha256 TEXT NOT NULL,
            seq INTEGER NOT NULL,
            data {blob} NOT NULL,
            PRIMARY KEY (sha256, seq)
        )""",
    ),
    # Playlists (server.scheduler.playlists): each one's JSON as the operator gave it (checked),
    # and which media items it uses, so "where is this item used" is an index look-up. Its
    # CDS is a schedule of the same id (source 'playlist').
    (
        """CREATE TABLE playlists (
            id TEXT PRIMARY KEY,
            body TEXT NOT NULL,
            updated {real} NOT NULL
        )""",
        """CREATE TABLE playlist_media (
            playlist_id TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            PRIMARY KEY (playlist_id, sha256)
        )""",
        "CREATE INDEX playlist_media_by_sha256 ON playlist_media (sha256)",
    ),
)
