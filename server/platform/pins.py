"""Certificate pinning: HTTPS to a display is trusted by its certificate's fingerprint.

A display serving HTTPS usually has a self-signed certificate (``server.platform.tls``), which no
certificate authority vouches for. Whoever talks to it pins the fingerprint it learnt when it
first met the display (``pdn ctl pair``; a scheduler, at the display's registration) and from
then on accepts that certificate and no other, whoever signed it.

- :class:`PinningAdapter`: for ``requests`` sessions (``pdn ctl``, the scheduler's reads of its
  displays): connections to an origin with a pin check the fingerprint (urllib3's
  ``assert_fingerprint``) instead of certificate authorities; other origins are unchanged.
- :func:`check_peer`: the same check for the webhook poster's own connections.
- :class:`PinBook`: the scheduler's pins by origin, in memory, read again from its storage when
  an HTTPS origin has none (at most every few seconds: another scheduler process on the same
  database may have taken the registration). :class:`OriginBook`, the same for any value by
  origin (the tokens the scheduler got by pairing with its displays).
"""

from __future__ import annotations

import hashlib
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from requests import PreparedRequest
from requests.adapters import HTTPAdapter

__all__ = [
    "OriginBook",
    "PinBook",
    "PinningAdapter",
    "Pins",
    "check_peer",
    "origin_of",
    "presented_fingerprint",
    "unverified_context",
]

#: ``pins(url)``: the fingerprint pinned for ``url``'s origin, or None.
Pins = Callable[[str], str | None]


def origin_of(url: str) -> str:
    """``scheme://host:port`` of a URL, lower case, with the default port written out."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def fingerprint_of(der: bytes) -> str:
    return "sha256:" + hashlib.sha256(der).hexdigest()


def presented_fingerprint(url: str, timeout: float = 5.0) -> str:
    """``sha256:...`` of the certificate the HTTPS server at ``url`` presents now, not verified
    (trust on first use, for pairing); OSError or ssl.SSLError when it cannot be had."""
    parts = urlsplit(url)
    pem = ssl.get_server_certificate((parts.hostname or "", parts.port or 443), timeout=timeout)
    return fingerprint_of(ssl.PEM_cert_to_DER_cert(pem))


def check_peer(ssl_object: Any, pin: str) -> None:
    """ssl.SSLError unless the peer's certificate has the fingerprint ``pin``."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    found = fingerprint_of(der) if der else None
    if found != pin:
        raise ssl.SSLError(f"the certificate {found} is not the one pinned ({pin})")


def unverified_context() -> ssl.SSLContext:
    """A client context that checks nothing itself: for connections checked by their pin."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class PinningAdapter(HTTPAdapter):
    """HTTPS to an origin ``pins(url)`` names a fingerprint for is checked by that pin alone."""

    def __init__(self, pins: Pins) -> None:
        self.pins = pins
        super().__init__()

    def _pin(self, url: str) -> str | None:
        return self.pins(url) if urlsplit(url).scheme.lower() == "https" else None

    def build_connection_pool_key_attributes(  # type: ignore[override]  # the stubs' TypedDicts lack assert_fingerprint
        self, request: PreparedRequest, verify: Any, cert: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        found = super().build_connection_pool_key_attributes(request, verify, cert)
        host: dict[str, Any] = dict(found[0])
        pool: dict[str, Any] = dict(found[1])
        pin = self._pin(request.url or "")
        if pin:
            pool.pop("ssl_context", None)
            pool["cert_reqs"] = "CERT_NONE"
            pool["assert_fingerprint"] = pin.removeprefix("sha256:")
        return host, pool

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        # The pin replaces the certificate authorities' check.
        pinned = self._pin(url) is not None
        super().cert_verify(conn, url, False if pinned else verify, cert)  # type: ignore[no-untyped-call]


class OriginBook:
    """A value per display origin (a pin, a token), in memory; thread-safe."""

    https_only = False

    def __init__(
        self,
        load: Callable[[], dict[str, str]],
        *,
        reload_after: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``load()``: every display that has one, ``{display URL: value}``."""
        self._load = load
        self._reload_after = reload_after
        self._clock = clock
        self._lock = threading.Lock()
        self._pins: dict[str, str] = {}
        self._loaded = -reload_after

    def get(self, url: str) -> str | None:
        """The value of ``url``'s origin (None when it has none)."""
        if self.https_only and urlsplit(url).scheme.lower() != "https":
            return None
        origin = origin_of(url)
        with self._lock:
            found = self._pins.get(origin)
            if found is not None or self._clock() - self._loaded < self._reload_after:
                return found
            self._loaded = self._clock()
        loaded = {origin_of(display): pin for display, pin in self._load().items()}
        with self._lock:
            self._pins.update(loaded)
            return self._pins.get(origin)

    def set(self, url: str, value: str) -> None:
        with self._lock:
            self._pins[origin_of(url)] = value


class PinBook(OriginBook):
    """The pinned fingerprints of the displays, by origin (plain HTTP has none)."""

    https_only = True

    def pin(self, url: str) -> str | None:
        """The pin of ``url``'s origin (None for plain HTTP or an origin never pinned)."""
        return self.get(url)
