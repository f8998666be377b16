"""Proof of play in the scheduler's database: every playback update the displays sent, and what
the scheduler knows of each display's own play log, to fill the gaps.

:class:`PlayStorage` is the part of :class:`server.scheduler.storage.SchedulerStorage` that keeps
them; it shares that storage's database (``server.platform.sql``: SQLite or PostgreSQL). The plays
table belongs to the scheduler's own migrations (fleet, migration 2); the backfill table is a
component of its own (:data:`PLAYS_SCHEMA`), so the release before still opens the database.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from server.platform.sql import Database, Schema, Transaction

__all__ = [
    "PLAYS_COMPONENT",
    "PLAYS_SCHEMA",
    "BackfillClaim",
    "BackfillState",
    "PlayRecord",
    "PlayStorage",
    "display_key",
]


def display_key(url: str) -> str:
    """The identity of a display URL: scheme and host in lower case, no trailing slash."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


@dataclass(frozen=True)
class PlayRecord:
    """One playback update a display sent: what one zone of its screen showed from
    ``started`` on (the zone whose change made the update).

    ``ended`` is the start of the next play of the same zone, or of the update whose layout
    took the zone away, when every update between them was received (else unknown: a gap).
    ``painted``: the display sends an update only once its renderer confirmed it painted.
    """

    display: str
    sequence: int
    item: str | None
    content_type: str | None
    set_name: str | None
    origin: str
    started: str  # ISO 8601, as the display sent it
    started_at: float  # the same, epoch seconds
    duration: float | None
    ended: str | None
    painted: bool
    received: float
    #: The zone of the screen it played in ("main" on a screen without a layout), and the
    #: layout set the screen was split by (None: full screen).
    zone: str = "main"
    layout: str | None = None
    #: What every zone showed, by name, as the update gave it (not stored: the display's
    #: status shows it; None for a play read from a play log).
    zones: dict[str, dict[str, Any]] | None = field(default=None, compare=False)


#: Filling the gaps in proof of play: the tables of a component of their own
#: (``proof_of_play``: its version in ``proof_of_play_schema`` on SQLite, a row of
#: ``pdn_schema`` on PostgreSQL), so the scheduler's own version, which the release before reads,
#: stays as it was and that release still opens a database this one migrated.
#:
#: ``play_backfill``, one row per display: ``seen``, the sequence up to which every play the
#: display still had is stored; ``wanted`` counts the reasons to fetch the display's play log
#: (a jump in its sequence, its registration, its coming back) and ``done`` the one the last
#: fetch answered; ``due`` when the next fetch may start (NULL: none wanted), ``lease`` until
#: when the process that claimed it has it, ``failures`` and ``error`` why fetching failed.
PLAYS_SCHEMA: Schema = (
    (
        """CREATE TABLE play_backfill (
            display_key TEXT PRIMARY KEY,
            seen {bigint} NOT NULL DEFAULT 0,
            wanted {bigint} NOT NULL DEFAULT 0,
            done {bigint} NOT NULL DEFAULT 0,
            due {real},
            lease {real},
            failures INTEGER NOT NULL DEFAULT 0,
            error TEXT
        )""",
        "CREATE INDEX play_backfill_by_due ON play_backfill (due)",
        # Displays registered before: their play logs are read once.
        "INSERT INTO play_backfill (display_key, wanted, due) SELECT key, 1, 0 FROM displays",
    ),
    # Zones: each play is of one zone ('main' when none is given), under a layout (NULL:
    # full screen); a zone's plays are looked up in order when one ends, and the plays still
    # going on when an update comes out of order.
    (
        "ALTER TABLE plays ADD COLUMN zone TEXT NOT NULL DEFAULT 'main'",
        "ALTER TABLE plays ADD COLUMN layout TEXT",
        "CREATE INDEX plays_by_zone ON plays (display_key, zone, sequence)",
        "CREATE INDEX plays_open ON plays (display_key, sequence) WHERE ended IS NULL",
    ),
)
PLAYS_COMPONENT = "proof_of_play"


@dataclass(frozen=True)
class BackfillClaim:
    """A display whose play log one process reads now (:meth:`SchedulerStorage.claim_backfill`)."""

    url: str
    seen: int
    wanted: int
    failures: int
    error: str | None


@dataclass(frozen=True)
class BackfillState:
    """What the scheduler knows of a display's play log (gaps in ``GET /x/plays``)."""

    seen: int = 0
    error: str | None = None
    failures: int = 0
    pending: bool = False  # a fetch is wanted (or under way)


_PLAY_COLUMNS = (
    "display_url, sequence, item, content_type, set_name, origin, started, started_at,"
    " duration, ended, painted, received, zone, layout"
)


def _play(row: tuple[Any, ...]) -> PlayRecord:
    values = list(row)
    values[10] = bool(values[10])  # painted: SQLite keeps a boolean as 0 or 1
    return PlayRecord(*values)


def _unbroken(transaction: Transaction, key: str, after: int, before: int) -> bool:
    """Every update of the display between sequence ``after`` and ``before`` is stored."""
    rows = transaction.rows(
        "SELECT COUNT(DISTINCT sequence) FROM plays WHERE display_key = ? AND sequence > ?"
        " AND sequence < ?",
        (key, after, before),
    )
    return int(rows[0][0]) == before - after - 1


def _end_plays_before(transaction: Transaction, key: str, play: PlayRecord) -> None:
    """The plays ``play`` ends, when every update between is stored: its zone's play before
    it, and, when the layout changed right before it, the plays of the zones that went with
    the layout before (the main zone stays: it shows until it changes)."""
    ended: list[int] = []
    rows = transaction.rows(
        "SELECT sequence, ended FROM plays WHERE display_key = ? AND zone = ? AND sequence < ?"
        " ORDER BY sequence DESC LIMIT 1",
        (key, play.zone, play.sequence),
    )
    if rows and rows[0][1] is None:
        ended.append(int(rows[0][0]))
    before = transaction.rows(
        "SELECT layout FROM plays WHERE display_key = ? AND sequence = ?",
        (key, play.sequence - 1),
    )
    gone = before[0][0] if before else None
    if gone is not None and gone != play.layout:
        rows = transaction.rows(
            "SELECT zone, MAX(sequence) FROM plays WHERE display_key = ? AND layout = ?"
            " AND zone <> 'main' AND zone <> ? AND sequence < ? AND ended IS NULL"
            " GROUP BY zone",
            (key, gone, play.zone, play.sequence),
        )
        ended.extend(int(sequence) for _zone, sequence in rows)
    for sequence in ended:
        if _unbroken(transaction, key, sequence, play.sequence):
            transaction.execute(
                "UPDATE plays SET ended = ? WHERE display_key = ? AND sequence = ?"
                " AND ended IS NULL",
                (play.started, key, sequence),
            )


def _end_open_plays(transaction: Transaction, key: str) -> None:
    """End the display's plays whose end is known now: an update came out of order (delivery
    retried, or read from the display's play log) and may be the one that was missing between
    a play and the update that ends it."""
    rows = transaction.rows(
        "SELECT sequence, started, zone, layout FROM plays WHERE display_key = ? AND ended IS NULL",
        (key,),
    )
    for sequence, started, zone, layout in rows:
        _end_play(transaction, key, int(sequence), started, zone, layout)


def _end_play(
    transaction: Transaction, key: str, sequence: int, started: str, zone: str, layout: str | None
) -> None:
    """End the play at ``sequence`` when the update that ends it is stored, and every one
    before that: the next play of its zone or, for a zone other than the main one, the first
    update under another layout."""
    ender, params = "zone = ?", [key, sequence, zone]
    if zone != "main":
        ender = "(zone = ? OR COALESCE(layout, '') <> ?)"
        params.append(layout or "")
    rows = transaction.rows(
        f"SELECT sequence, started FROM plays WHERE display_key = ? AND sequence > ?"
        f" AND {ender} ORDER BY sequence LIMIT 1",
        params,
    )
    if rows and _unbroken(transaction, key, sequence, int(rows[0][0])):
        transaction.execute(
            "UPDATE plays SET ended = ? WHERE display_key = ? AND sequence = ?"
            " AND started = ? AND ended IS NULL",
            (rows[0][1], key, sequence, started),
        )


class PlayStorage:
    """Plays and play-log backfill, on the database of the storage that inherits this."""

    _db: Database

    # -- plays ------------------------------------------------------------------------

    def record_play(self, play: PlayRecord) -> bool:
        """Store a playback update; False when this very update was stored before. An update
        that does not follow the last one stored in the display's sequence makes its play log
        wanted (:meth:`claim_backfill`)."""
        key = display_key(play.display)
        with self._db.transaction() as transaction:
            inserted = self._insert_play(transaction, play)
            if inserted and transaction.rows(
                "SELECT 1 FROM plays WHERE display_key = ? AND sequence > ? LIMIT 1",
                (key, play.sequence),
            ):
                _end_open_plays(transaction, key)  # out of order: delivery retried
            # The next in sequence: every play up to it is stored. Else, a jump (plays this
            # scheduler never received): read them from the display.
            followed = transaction.execute(
                "UPDATE play_backfill SET seen = ? WHERE display_key = ? AND seen = ?",
                (play.sequence, key, play.sequence - 1),
            )
            if not followed:
                transaction.execute(
                    "INSERT INTO play_backfill (display_key, wanted, due) VALUES (?, 1, ?)"
                    " ON CONFLICT (display_key) DO UPDATE SET"
                    " wanted = play_backfill.wanted + 1, due = excluded.due"
                    " WHERE play_backfill.seen < ?",
                    (key, time.time(), play.sequence - 1),
                )
        return inserted > 0

    def _insert_play(self, transaction: Transaction, play: PlayRecord) -> int:
        key = display_key(play.display)
        inserted = transaction.execute(
            f"INSERT INTO plays (display_key, {_PLAY_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                key,
                play.display,
                play.sequence,
                play.item,
                play.content_type,
                play.set_name,
                play.origin,
                play.started,
                play.started_at,
                play.duration,
                play.ended,
                play.painted,
                play.received,
                play.zone,
                play.layout,
            ),
        )
        if inserted:
            _end_plays_before(transaction, key, play)
        return inserted

    def record_plays(self, plays: list[PlayRecord]) -> int:
        """Store plays read from a display's play log (those stored before are left as they
        are), in one transaction; how many were new."""
        added = 0
        with self._db.transaction() as transaction:
            for play in plays:
                added += self._insert_play(transaction, play)
            for key in {display_key(play.display) for play in plays} if added else ():
                _end_open_plays(transaction, key)
        return added

    def plays(
        self, url: str | None = None, since: float | None = None, until: float | None = None
    ) -> list[PlayRecord]:
        """Stored updates, by display then sequence, started in [since, until)."""
        where: list[str] = []
        params: list[Any] = []
        for condition, value in (
            ("display_key = ?", None if url is None else display_key(url)),
            ("started_at >= ?", since),
            ("started_at < ?", until),
        ):
            if value is not None:
                where.append(condition)
                params.append(value)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self._db.rows(
            f"SELECT {_PLAY_COLUMNS} FROM plays {clause} ORDER BY display_key, sequence, id",
            params,
        )
        return [_play(row) for row in rows]

    # -- filling the gaps ---------------------------------------------------------------------

    def _want_plays(self, transaction: Transaction, key: str) -> None:
        transaction.execute(
            "INSERT INTO play_backfill (display_key, wanted, due) VALUES (?, 1, ?)"
            " ON CONFLICT (display_key) DO UPDATE SET wanted = play_backfill.wanted + 1,"
            " due = excluded.due",
            (key, time.time()),
        )

    def want_plays(self, url: str) -> None:
        """Read the display's play log soon (it registered, or answers again): no back-off."""
        with self._db.transaction() as transaction:
            self._want_plays(transaction, display_key(url))

    def want_all_plays(self) -> None:
        """Read every display's play log soon: the scheduler starts, and may have missed plays
        while it was down (those the displays' outboxes dropped, or not sent again yet)."""
        self._db.execute(
            "UPDATE play_backfill SET wanted = wanted + 1, due = ?, failures = 0", (time.time(),)
        )

    def claim_backfill(self, limit: int, lease: float) -> list[BackfillClaim]:
        """Up to ``limit`` approved displays whose play log is due to be read, most overdue
        first; each is left to this process for ``lease`` seconds (on PostgreSQL the rows
        are claimed ``FOR UPDATE SKIP LOCKED``: two processes never read the same display's
        log at once)."""
        now = time.time()
        lock = " FOR UPDATE OF b SKIP LOCKED" if self._db.dialect == "postgresql" else ""
        with self._db.transaction() as transaction:
            rows = transaction.rows(
                "SELECT b.display_key, d.url, b.seen, b.wanted, b.failures, b.error"
                " FROM play_backfill b JOIN displays d ON d.key = b.display_key"
                " WHERE b.due <= ? AND (b.lease IS NULL OR b.lease < ?)"
                " AND d.state = 'approved' ORDER BY b.due LIMIT ?" + lock,
                (now, now, limit),
            )
            transaction.executemany(
                "UPDATE play_backfill SET lease = ? WHERE display_key = ?",
                [(now + lease, row[0]) for row in rows],
            )
        return [BackfillClaim(url, int(seen), int(wanted), failures, error)
                for _key, url, seen, wanted, failures, error in rows]  # fmt: skip

    def plays_seen(self, url: str, sequence: int) -> None:
        """Every play the display still has up to ``sequence`` is stored."""
        self._db.execute(
            "UPDATE play_backfill SET seen = ? WHERE display_key = ? AND seen < ?",
            (sequence, display_key(url), sequence),
        )

    def backfill_done(self, claim: BackfillClaim, error: str | None, retry_in: float) -> None:
        """The claimed read is over: without ``error``, not due again unless wanted again
        meanwhile; with one, due again in ``retry_in`` seconds."""
        key = display_key(claim.url)
        if error is None:
            self._db.execute(
                "UPDATE play_backfill SET done = ?, lease = NULL, failures = 0, error = NULL,"
                " due = CASE WHEN wanted = ? THEN NULL ELSE due END WHERE display_key = ?",
                (claim.wanted, claim.wanted, key),
            )
        else:
            self._db.execute(
                "UPDATE play_backfill SET lease = NULL, failures = failures + 1, error = ?,"
                " due = ? WHERE display_key = ?",
                (error, time.time() + retry_in, key),
            )

    def backfill_states(self, url: str | None = None) -> dict[str, BackfillState]:
        """Per display URL (``url``: that display's only): what the scheduler knows of its
        play log."""
        where, params = ("", ()) if url is None else (" WHERE d.key = ?", (display_key(url),))
        rows = self._db.rows(
            "SELECT d.url, b.seen, b.error, b.failures, b.due FROM play_backfill b"
            " JOIN displays d ON d.key = b.display_key" + where,
            params,
        )
        return {
            url: BackfillState(int(seen), error, failures, due is not None)
            for url, seen, error, failures, due in rows
        }
