"""The console's sign-in sessions: random, kept server-side, revocable, ended by idleness.

Signing in with the operator token opens a session: a random id of 256 bits, which the browser
keeps in the console's cookie. The scheduler's database keeps only the SHA-256 of the id (a
copy of the database signs no one in), with a mark of the operator token it was opened with,
when it opened and when it was last used; several scheduler processes on one PostgreSQL
database share them.

A session ends when:
- it is signed out (that session only), or "signed out everywhere" (every session);
- it was not used for ``idle`` seconds (default 12 hours, ``PDN_CONSOLE_IDLE``);
- the operator token changes: a session opened with another token is never taken, and a
  scheduler starting with a new token deletes them.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import time
from collections.abc import Callable

from server.platform.sql import Database

__all__ = ["IDLE", "ConsoleSessions", "idle_from_env"]

log = logging.getLogger("pdn.scheduler.sessions")

#: A session not used for this long (seconds) has ended.
IDLE = 12 * 3600.0


def idle_from_env() -> float:
    """``PDN_CONSOLE_IDLE``: seconds a console session may stay unused (default 12 hours);
    ValueError saying what is wrong with it."""
    text = os.environ.get("PDN_CONSOLE_IDLE", "").strip()
    if not text:
        return IDLE
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 30 * 24 * 3600:
        raise ValueError(
            f"PDN_CONSOLE_IDLE is {text!r}: it is the seconds a console session may stay"
            " unused, more than 0 and at most 2592000 (30 days)"
        )
    return value


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class ConsoleSessions:
    """The sessions of one operator token, in the scheduler's database. Thread-safe (each
    call is one statement or one transaction)."""

    def __init__(
        self,
        database: Database,
        token: str,
        *,
        idle: float = IDLE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = database
        self._mark = hmac.new(token.encode(), b"pdn-console-session-v1", hashlib.sha256).hexdigest()
        self.idle = idle
        self._clock = clock
        # A session's last use is written at most this often (a page load is not a write).
        self._touch = min(60.0, idle / 20)
        revoked = self._db.execute(
            "DELETE FROM console_sessions WHERE token_mark <> ?", (self._mark,)
        )
        if revoked:
            log.info("the operator token changed: %d console sessions ended", revoked)

    def open(self) -> str:
        """A new session; returns its id (for the cookie only: it is not stored)."""
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        with self._db.transaction() as transaction:
            transaction.execute("DELETE FROM console_sessions WHERE seen < ?", (now - self.idle,))
            transaction.execute(
                "INSERT INTO console_sessions (id_hash, token_mark, created, seen)"
                " VALUES (?, ?, ?, ?)",
                (_hash(session_id), self._mark, now, now),
            )
        return session_id

    def valid(self, session_id: str) -> bool:
        """Whether ``session_id`` is a session that has not ended; using it keeps it open."""
        if not session_id:
            return False
        key = _hash(session_id)
        row = self._db.row(
            "SELECT seen FROM console_sessions WHERE id_hash = ? AND token_mark = ?",
            (key, self._mark),
        )
        if row is None:
            return False
        now = self._clock()
        seen = float(row[0])
        if now - seen > self.idle:
            self._db.execute("DELETE FROM console_sessions WHERE id_hash = ?", (key,))
            return False
        if now - seen >= self._touch:
            self._db.execute(
                "UPDATE console_sessions SET seen = ? WHERE id_hash = ? AND seen < ?",
                (now, key, now),
            )
        return True

    def close(self, session_id: str) -> None:
        """Sign this session out."""
        if session_id:
            self._db.execute("DELETE FROM console_sessions WHERE id_hash = ?", (_hash(session_id),))

    def close_all(self) -> int:
        """Sign every session out; returns how many there were."""
        ended = self._db.execute("DELETE FROM console_sessions")
        log.info("every console session signed out (%d)", ended)
        return ended
