"""Signed webhooks, Standard Webhooks 1.0: who sent an update, and that it is fresh.

A subscriber that gives a ``signing-secret`` (``whsec_<base64 of 24 to 64 bytes>``) when it
subscribes gets every update with three headers:

- ``webhook-id``: the event's id (the same as ``X-PDN-Event-Id``, stable across retries);
- ``webhook-timestamp``: when this attempt was sent, in whole Unix seconds;
- ``webhook-signature``: ``v1,<base64 of HMAC-SHA256(secret, "<id>.<timestamp>.<body>")>``.

A receiver (:class:`Verifier`) refuses a missing or wrong signature and a timestamp more than
5 minutes from its own clock, and drops an id it has already taken (a replay, or a retry of an
update whose answer was lost: either way it was taken once). Receivers use any library of the
standard; the tests check these signatures with the ``standardwebhooks`` package. The ids a
receiver took are kept in its SQLite (:class:`SeenIds`) when it gives one, so a replay inside
the window is dropped after a restart too.

No Flask: the outboxes (``server.platform.delivery``) sign, the segments' HTTP
faces verify.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from server.platform.atomicfile import tighten, write_atomically
from server.platform.db import connect, migrate, transaction

__all__ = [
    "HEADERS",
    "TOLERANCE",
    "SeenIds",
    "SignatureError",
    "Verifier",
    "new_secret",
    "parse_secret",
    "sign",
    "signed_headers",
]

PREFIX = "whsec_"
MIN_BYTES = 24
MAX_BYTES = 64
#: A timestamp further than this from the receiver's clock is refused (seconds).
TOLERANCE = 300
#: The headers a signed update carries.
HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")
_B = "[A-Za-z0-9+/]"
#: ``whsec_`` and padded standard base64 of 24 to 64 bytes: 8 to 20 groups of four characters
#: (3 bytes each) and an optional last group of 1 or 2 bytes, or 21 groups and at most 1 more.
SIGNING_SECRET_PATTERN = (
    f"^whsec_(?:(?:{_B}{{4}}){{8,20}}(?:{_B}{{2}}==|{_B}{{3}}=)?"
    f"|(?:{_B}{{4}}){{21}}(?:{_B}{{2}}==)?)$"
)
_SECRET = re.compile(SIGNING_SECRET_PATTERN)


class SignatureError(Exception):
    """An update refused by a receiver: the message says why (never the secret)."""


def parse_secret(text: str) -> bytes:
    """The key of a ``whsec_...`` secret; ValueError saying what is wrong with it."""
    if not text.startswith(PREFIX):
        raise ValueError(f"a signing secret starts with '{PREFIX}'")
    if not _SECRET.match(text):
        raise ValueError(
            f"after '{PREFIX}', a signing secret is padded standard base64 of {MIN_BYTES} to"
            f" {MAX_BYTES} bytes"
        )
    try:
        return base64.b64decode(text.removeprefix(PREFIX), validate=True)
    except (binascii.Error, ValueError):  # the pattern admits only what decodes; kept safe
        raise ValueError("the signing secret's base64 does not decode") from None


def new_secret() -> str:
    """A fresh ``whsec_`` secret of 32 random bytes."""
    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def load_or_make_secret(path: Path) -> str:
    """The ``whsec_`` secret kept in ``path`` (mode 0600), made at first use; ValueError when
    the file holds something else, OSError when it cannot be read or written."""
    try:
        text = path.read_text(encoding="ascii").strip()
        tighten(path)
    except FileNotFoundError:
        text = new_secret()
        write_atomically(path, (text + "\n").encode())
    parse_secret(text)
    return text


def derived_secret(seed: str, purpose: str) -> str:
    """A ``whsec_`` secret computed from another secret, for one purpose (so one stored secret
    can stand for several without storing more)."""
    key = hmac.new(seed.encode(), purpose.encode(), hashlib.sha256).digest()
    return PREFIX + base64.b64encode(key).decode()


def bearer_from_secret(secret: str) -> str:
    """The bearer token that goes with a display's signing secret: a display that gives its
    scheduler its secret at registration gives it this token too (both sides compute it), so
    the scheduler may also subscribe to the display's playback without being paired."""
    return "pdn_" + hmac.new(secret.encode(), b"pdn display token", hashlib.sha256).hexdigest()


def sign(key: bytes, event_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value for one attempt."""
    message = f"{event_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(
    secret: str, event_id: str, body: bytes, now: float | None = None
) -> dict[str, str]:
    """The three headers of a signed update, timestamped now."""
    timestamp = int(time.time() if now is None else now)
    return {
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(parse_secret(secret), event_id, timestamp, body),
    }


class SeenIds:
    """The webhook ids a receiver took, in a table of its SQLite file (which it shares with
    the receiver's own tables): a restart does not forget them. Ids older than the horizon
    :meth:`Verifier.verify` gives are pruned at each new one, and at most ``remember`` are
    kept, so the table stays small."""

    MIGRATIONS = (
        (
            "CREATE TABLE webhook_ids (id TEXT PRIMARY KEY, seen REAL NOT NULL)",
            "CREATE INDEX webhook_ids_by_time ON webhook_ids (seen)",
        ),
    )

    def __init__(self, path: Path, *, remember: int = 100_000) -> None:
        self.path = path
        self.remember = remember
        self._lock = threading.Lock()
        self._connection = connect(path)  # FULL: an id is on disk before its update is taken
        try:
            migrate(self._connection, self.MIGRATIONS, version_table="pdn_webhook_ids_version")
        except BaseException:
            self._connection.close()
            raise

    def add(self, event_id: str, now: float, horizon: float) -> bool:
        """Record ``event_id`` as taken at ``now``; False when it was taken already. Ids taken
        before ``horizon`` are forgotten first."""
        with self._lock, transaction(self._connection) as connection:
            connection.execute("DELETE FROM webhook_ids WHERE seen < ?", (horizon,))
            added = connection.execute(
                "INSERT OR IGNORE INTO webhook_ids (id, seen) VALUES (?, ?)", (event_id, now)
            ).rowcount
            connection.execute(
                "DELETE FROM webhook_ids WHERE rowid <= (SELECT MAX(rowid) FROM webhook_ids) - ?",
                (self.remember,),
            )
        return bool(added)

    def count(self) -> int:
        with self._lock:
            return int(self._connection.execute("SELECT COUNT(*) FROM webhook_ids").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._connection.close()


class Verifier:
    """Checks signed updates for one receiver, and remembers the ids it took.

    The ids are kept for twice the tolerance (an older replay fails on its timestamp anyway),
    at most ``remember`` of them, so memory is bounded; in ``store`` (SQLite, surviving a
    restart) when one is given, else in memory. Thread-safe.
    """

    def __init__(
        self,
        *,
        tolerance: float = TOLERANCE,
        remember: int = 100_000,
        clock: Callable[[], float] = time.time,
        store: SeenIds | None = None,
    ) -> None:
        self.tolerance = tolerance
        self.remember = remember
        self.store = store
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, float] = OrderedDict()

    def verify(self, keys: Iterable[bytes], headers: Mapping[str, str], body: bytes) -> bool:
        """True for a new, rightly signed update; False for an id already taken (drop it);
        SignatureError when unsigned, wrongly signed or stale."""
        event_id = headers.get("webhook-id", "")
        stamp = headers.get("webhook-timestamp", "")
        given = headers.get("webhook-signature", "")
        if not (event_id and stamp and given):
            raise SignatureError(
                "The update is not signed: it needs webhook-id, webhook-timestamp and"
                " webhook-signature (Standard Webhooks)."
            )
        try:
            timestamp = int(stamp)
        except ValueError:
            raise SignatureError("webhook-timestamp is not whole Unix seconds.") from None
        now = self._clock()
        if abs(now - timestamp) > self.tolerance:
            raise SignatureError(
                f"webhook-timestamp is more than {self.tolerance:g} s from this receiver's"
                " clock: a stale or replayed update, or a clock that is wrong."
            )
        offered = [part.strip() for part in given.split(" ") if part.strip()]
        matched = False
        for key in keys:
            expected = sign(key, event_id, timestamp, body)
            for candidate in offered:  # no early exit: timing does not tell which matched
                matched |= hmac.compare_digest(candidate.encode(), expected.encode())
        if not matched:
            raise SignatureError("webhook-signature does not match the update.")
        if self.store is not None:  # a failing store raises: answered 5xx, the sender retries
            return self.store.add(event_id, now, now - 2 * self.tolerance)
        with self._lock:
            self._forget(now)
            if event_id in self._seen:
                return False
            self._seen[event_id] = now
            while len(self._seen) > self.remember:
                self._seen.popitem(last=False)
        return True

    def _forget(self, now: float) -> None:
        """Drop ids older than twice the tolerance (lock held)."""
        horizon = now - 2 * self.tolerance
        while self._seen:
            seen = next(iter(self._seen.values()))
            if seen >= horizon:
                break
            self._seen.popitem(last=False)
