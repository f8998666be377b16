"""A segment's credentials for the displays it pushes to: a token of each, and its certificate.

A sensor (its readings) and a content server (the requests it forwards) talk to displays that
take changes only from paired controllers (docs/interface.md, "Who may change what"). Each
gets a display's token

- **by pairing**: ``pdn ctl pair DISPLAY_URL CODE``, run as the user the segment runs as,
  keeps the token, and the fingerprint of the display's certificate when it serves HTTPS, in
  that user's ``~/.config/pdn/ctl.toml`` (``server.ctl.client``);
- **by configuration**: the same file written by hand, named by ``PDN_DISPLAYS_FILE`` (one
  table per display origin, keys ``token`` and ``tls-fingerprint``, both optional), or
  ``PDN_DISPLAY_TOKEN`` for the *listed* displays without a token of their own.

A display's token goes only to that display's origin (``scheme://host:port``). The shared
``PDN_DISPLAY_TOKEN`` goes only to a listed display: one with a table in the file, or one the
segment was told of (a content server's ``--display``); never to another URL, whoever named it.
HTTPS to a display with a fingerprint is pinned to it (``server.platform.pins``) and refused if the
certificate changed. The file is read again when it changes (its modification time), so pairing
while the segment runs needs no restart.
"""

from __future__ import annotations

import logging
import os
import threading
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from server.platform.pins import origin_of

__all__ = ["DisplayCredentials", "credentials_path"]

log = logging.getLogger("pdn.displaycreds")


def credentials_path() -> Path:
    """``PDN_DISPLAYS_FILE``, else the pairing store of ``pdn ctl pair``."""
    given = os.environ.get("PDN_DISPLAYS_FILE", "").strip()
    if given:
        return Path(given)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "pdn" / "ctl.toml"


class DisplayCredentials:
    """Tokens and pinned fingerprints of displays, by origin, from a TOML file; thread-safe.

    ``shared_token`` (``PDN_DISPLAY_TOKEN``) is sent to a listed display that has no token of
    its own; ``listed``: display URLs the segment was told of besides the file's.
    """

    def __init__(
        self,
        path: Path | None = None,
        *,
        shared_token: str | None = None,
        listed: Iterable[str] = (),
    ) -> None:
        self.path = path or credentials_path()
        self.shared_token = shared_token or None
        self.extra = frozenset(origin_of(url) for url in listed)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._entries: dict[str, dict[str, Any]] = {}

    def _table(self) -> dict[str, dict[str, Any]]:
        """The file's tables by origin, read again when the file changed."""
        try:
            stat = self.path.stat()
            stamp: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                self._stamp = stamp
                self._entries = self._read() if stamp is not None else {}
            return self._entries

    def _entry(self, url: str) -> dict[str, Any]:
        return self._table().get(origin_of(url), {})

    def origins(self) -> frozenset[str]:
        """Every listed display origin: the file's tables and the ones given."""
        return self.extra | frozenset(self._table())

    def listed(self, url: str) -> bool:
        """True when the display at ``url`` (its origin) is in the file or was given."""
        return origin_of(url) in self.origins()

    def bearer(self, url: str) -> str | None:
        """What to send to ``url`` as a bearer token: its own, else the shared token when its
        origin is listed; None for any other URL."""
        own = self.token(url)
        if own is not None:
            return own
        return self.shared_token if self.shared_token and self.listed(url) else None

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            with self.path.open("rb") as handle:
                table = tomllib.load(handle)
        except (OSError, tomllib.TOMLDecodeError) as error:
            log.warning("cannot read the display credentials in %s: %s", self.path, error)
            return {}
        displays = table.get("displays", {})
        if not isinstance(displays, dict):
            return {}
        found: dict[str, dict[str, Any]] = {}
        for key, value in displays.items():
            if not isinstance(value, dict) or urlsplit(str(key)).scheme not in ("http", "https"):
                continue
            try:
                found[origin_of(str(key))] = dict(value)
            except ValueError:  # a port out of range
                log.warning("%s: [displays.%r] is not a display's URL; ignored", self.path, key)
        return found

    def token(self, url: str) -> str | None:
        """The token of the display at ``url`` (its origin), or None."""
        found = self._entry(url).get("token")
        return found if isinstance(found, str) and found else None

    def pin(self, url: str) -> str | None:
        """The pinned ``sha256:...`` of the display at ``url`` when it is HTTPS, or None."""
        if urlsplit(url).scheme.lower() != "https":
            return None
        found = self._entry(url).get("tls-fingerprint")
        return found if isinstance(found, str) and found else None
