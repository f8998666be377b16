"""Pairing a display with its controllers: a code shown on the screen, a token per controller.

The display makes a *pairing code*: 8 characters from an alphabet with no look-alikes (no 0/O,
1/I/L), shown as ``ABCD-EFGH``. It is valid for 15 minutes and for one pairing; after use or
expiry a new one is made, and after ``CODE_TRIES`` wrong tries in all, from any number of
addresses (the per-address lock-out does not bound a guesser with many addresses). It is
written to ``<data_dir>/pairing-code`` (mode 0600, for an operator on the box) and shown on the
idle page. ``POST /x/pair`` with the code, a controller's name and a role gives that
controller a token of its own.

Each token carries a role (:data:`ROLES`): ``control`` may do everything, ``sensor`` post
readings, ``content`` request content, ``read`` read. Pairings stored before roles existed
read as ``control``, which is what they could do.

Tokens are 256-bit random secrets. Only their SHA-256 is stored (a stolen database gives no
token; a fast hash is enough for secrets this long), in SQLite with ``synchronous=FULL``, so a
pairing answered 201 survives a power cut. Pairing again under a name replaces that
controller's token. Lookups compare every stored hash in constant time.

No Flask, no Qt: the display's HTTP face (``server.display``) and ``pdn display
--pairing-code`` use it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from server.platform.atomicfile import write_atomically
from server.platform.db import connect, migrate, transaction
from server.platform.validation import CONTROLLER_NAME_PATTERN

__all__ = [
    "ALPHABET",
    "CODE_FILE",
    "CODE_LIFE",
    "CODE_TRIES",
    "NAME_PATTERN",
    "ROLES",
    "Controller",
    "Pairing",
    "format_code",
    "read_code_file",
]

log = logging.getLogger("pdn.pairing")

#: No 0/O, 1/I/L: a code read off a screen across a room is typed right.
ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_LIFE = 15 * 60.0
CODE_FILE = "pairing-code"
#: Wrong codes, from all addresses together, after which the code is renewed.
CODE_TRIES = 20
#: What a token may do: ``control`` everything; the others one kind of request each.
ROLES = ("control", "sensor", "content", "read")
DATABASE = "pairings.db"
#: A controller's name: what ``GET /x/pairings`` lists and ``DELETE /x/pairings/<name>`` takes.
NAME_PATTERN = re.compile(CONTROLLER_NAME_PATTERN)

MIGRATIONS = (
    (
        """CREATE TABLE controllers (
        name TEXT PRIMARY KEY,
        token_sha256 TEXT NOT NULL UNIQUE,   -- hex; the token itself is never stored
        paired REAL NOT NULL                 -- Unix time
    )""",
    ),
    ("ALTER TABLE controllers ADD COLUMN role TEXT NOT NULL DEFAULT 'control'",),
)


@dataclass(frozen=True)
class Controller:
    """Whose token was given: the controller's name and its role."""

    name: str
    role: str


def format_code(code: str) -> str:
    """``ABCDEFGH`` as people read it: ``ABCD-EFGH``."""
    return f"{code[:4]}-{code[4:]}"


def _normalise(given: str) -> str:
    """What a person typed, as the code: case, spaces and dashes do not matter."""
    return re.sub(r"[\s-]", "", given).upper()


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def read_code_file(data_dir: Path) -> tuple[str, datetime]:
    """The code a display wrote to ``data_dir`` and when it expires; OSError or ValueError."""
    lines = (data_dir / CODE_FILE).read_text(encoding="ascii").splitlines()
    if len(lines) < 2 or not lines[1].startswith("expires "):
        raise ValueError(f"{data_dir / CODE_FILE} is not a pairing-code file")
    return lines[0].strip(), datetime.fromisoformat(lines[1].removeprefix("expires ").strip())


class Pairing:
    """One display's pairing code and paired controllers, kept in ``data_dir``."""

    def __init__(
        self,
        data_dir: Path,
        *,
        clock: Callable[[], float] = time.time,
        code_life: float = CODE_LIFE,
        code_tries: int = CODE_TRIES,
    ) -> None:
        self.data_dir = data_dir
        self._clock = clock
        self._code_life = code_life
        self._code_tries = code_tries
        self._wrong = 0  # wrong tries of the current code, from every address
        self._lock = threading.Lock()
        data_dir.mkdir(parents=True, exist_ok=True)
        self._connection = connect(data_dir / DATABASE)
        migrate(
            self._connection, MIGRATIONS, legacy=1
        )  # the steps pdn 0.1.0 knew (server.platform.db)
        self._code = ""
        self._expires = 0.0
        self._hashes: dict[str, Controller] = {}  # token SHA-256 -> its controller
        self._load()

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def _load(self) -> None:
        rows = self._connection.execute(
            "SELECT token_sha256, name, role FROM controllers"
        ).fetchall()
        self._hashes = {
            str(digest): Controller(str(name), str(role)) for digest, name, role in rows
        }

    # -- the code ----------------------------------------------------------------------------

    def current_code(self) -> tuple[str, float]:
        """The code to show (``ABCD-EFGH``) and when it expires (Unix time); a new one when the
        last expired."""
        with self._lock:
            if self._clock() >= self._expires:
                self._renew()
            return format_code(self._code), self._expires

    def _renew(self) -> None:
        """A new code, written to the code file (lock held)."""
        self._wrong = 0
        self._code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
        self._expires = self._clock() + self._code_life
        expires = datetime.fromtimestamp(self._expires, UTC).isoformat(timespec="seconds")
        text = f"{format_code(self._code)}\nexpires {expires}\n"
        try:
            write_atomically(self.data_dir / CODE_FILE, text.encode())
        except OSError as error:  # the screen still shows it; only the file is missing
            log.error("cannot write %s: %s", self.data_dir / CODE_FILE, error)
        log.info("a new pairing code is shown, valid until %s", expires)  # never the code

    def pair(self, code: str, name: str, role: str = "control") -> str | None:
        """The new token of controller ``name`` with ``role`` when ``code`` is the current
        code, else None.

        The code is then used up (a new one is made); a wrong one counts towards
        ``code_tries``, after which the code is renewed. ``name`` must match NAME_PATTERN and
        ``role`` be one of ROLES."""
        if not NAME_PATTERN.match(name):
            raise ValueError(f"not a controller name: {name!r}")
        if role not in ROLES:
            raise ValueError(f"not a role: {role!r}")
        with self._lock:
            if self._clock() >= self._expires:
                self._renew()
            # Compared in constant time; a wrong length is wrong all the same.
            if not hmac.compare_digest(_normalise(code).encode(), self._code.encode()):
                self._wrong += 1
                if self._wrong >= self._code_tries:
                    log.warning(
                        "the pairing code was tried wrongly %d times: a new one is shown",
                        self._wrong,
                    )
                    self._renew()
                return None
            token = "pdn_" + secrets.token_urlsafe(32)
            digest = _digest(token)
            with transaction(self._connection) as connection:
                replaced = connection.execute(
                    "DELETE FROM controllers WHERE name = ?", (name,)
                ).rowcount
                connection.execute(
                    "INSERT INTO controllers (name, token_sha256, paired, role)"
                    " VALUES (?, ?, ?, ?)",
                    (name, digest, self._clock(), role),
                )
            self._load()
            self._renew()  # single use
        log.info("controller %r %s, role %s", name, "paired again" if replaced else "paired", role)
        return token

    # -- the controllers ---------------------------------------------------------------------

    def controllers(self) -> list[dict[str, Any]]:
        """``GET /x/pairings``: every paired controller's name, role and when it was paired."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT name, role, paired FROM controllers ORDER BY paired, name"
            ).fetchall()
        return [
            {"name": name, "role": role, "paired": datetime.fromtimestamp(paired, UTC).isoformat()}
            for name, role, paired in rows
        ]

    def revoke(self, name: str) -> bool:
        """Forget controller ``name`` (its token stops working at once); False if unknown."""
        with self._lock, transaction(self._connection) as connection:
            gone = connection.execute("DELETE FROM controllers WHERE name = ?", (name,)).rowcount
            self._load()
        if gone:
            log.info("controller %r revoked", name)
        return bool(gone)

    def paired(self) -> int:
        with self._lock:
            return len(self._hashes)

    def authorise(self, token: str) -> Controller | None:
        """The controller whose token this is, or None."""
        digest = _digest(token)
        with self._lock:
            stored = list(self._hashes.items())
        found = None
        for known, controller in stored:  # no early exit: the time does not depend on it
            if hmac.compare_digest(known, digest):
                found = controller
        return found
