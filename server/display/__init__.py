"""The Display Segment's HTTP face (Flask), served by waitress inside ``pdn display``.

It knows a display only through :class:`server.display.port.DisplayPort`, and who may change it
through :class:`DisplaySecurity` (INTERFACE.md, "Who may change what"):

- listening on loopback only with no ``api_token``: open, as the spec shows it;
- otherwise every state-changing request needs ``Authorization: Bearer`` with the configured
  ``api_token`` or a paired controller's token (``server.pairing``); without one it is refused
  with 401 ``not-paired`` (``unauthorized`` when an ``api_token`` is configured), saying how to
  pair. Reads stay open unless ``protect_reads``; ``GET /x/pairings`` is never a free read;
- ``POST /x/pair`` is open: the pairing code is the credential;
- wrong tokens and wrong codes lock the client's address out (``server.lockout``).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, current_app, request

from server.display.api import api
from server.display.port import DisplayPort
from server.http import ApiError, create_base_app, too_many_attempts
from server.lockout import CODE_GUESSES, TOKEN_GUESSES, Lockout
from server.pairing import Pairing

__all__ = ["DisplayPort", "DisplaySecurity", "create_app"]

#: Endpoints that are never free reads (the list of controllers is for controllers).
_GUARDED_READS = frozenset(("display.pairings",))


@dataclass
class DisplaySecurity:
    """Who may change the display: its pairing, where it listens, the brute-force guards."""

    pairing: Pairing | None = None
    #: Listening on an address other than loopback: closed until paired.
    beyond_loopback: bool = False
    codes: Lockout = field(
        default_factory=lambda: Lockout(limit=CODE_GUESSES[0], window=CODE_GUESSES[1])
    )
    tokens: Lockout = field(
        default_factory=lambda: Lockout(limit=TOKEN_GUESSES[0], window=TOKEN_GUESSES[1])
    )
    #: ``sha256:<hex>`` of the certificate when the API is served over TLS.
    tls_fingerprint: str | None = None

    def closed(self, display: DisplayPort) -> bool:
        """True when changes need a token."""
        return self.beyond_loopback or bool(display.api_token)


def create_app(display: DisplayPort, security: DisplaySecurity | None = None) -> Flask:
    """The Display Segment app for one display (open on loopback when ``security`` is None)."""
    app = create_base_app("pdn.display", openapi="display")
    # Read through the app, so the display can be swapped (tests reuse one server).
    app.extensions["pdn.display"] = display
    app.extensions["pdn.security"] = security or DisplaySecurity()
    app.before_request(_check_access)
    app.register_blueprint(api)
    app.wsgi_app = PlaybackFastPath(app.wsgi_app, app)  # type: ignore[method-assign]
    return app


def _check_access() -> None:
    """Refuse the request unless this client may make it (see the module's docstring)."""
    if request.method == "OPTIONS" or request.endpoint == "display.pair":
        return
    extensions = current_app.extensions
    display: DisplayPort = extensions["pdn.display"]
    security: DisplaySecurity = extensions["pdn.security"]
    if not security.closed(display):
        return
    reading = request.method in ("GET", "HEAD") and request.endpoint not in _GUARDED_READS
    if reading and not getattr(display, "protect_reads", False):
        return
    address = request.remote_addr or ""
    wait = security.tokens.retry_after(address)
    if wait is not None:
        raise too_many_attempts(wait, "tokens")
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    given = given.strip()
    if scheme.lower() == "bearer" and given:
        token = display.api_token
        if (token and hmac.compare_digest(given.encode(), token.encode())) or (
            security.pairing is not None and security.pairing.authorise(given) is not None
        ):
            return
        security.tokens.failed(address)
    raise _refusal(display, reading, wrong=bool(header))


def _refusal(display: DisplayPort, reading: bool, *, wrong: bool) -> ApiError:
    what = "reading too" if reading else "changes"
    challenge = 'Bearer realm="pdn display"' + (', error="invalid_token"' if wrong else "")
    if display.api_token:
        return ApiError(
            401,
            "unauthorized",
            f"This display needs 'Authorization: Bearer <token>' for {what}.",
            headers={"WWW-Authenticate": challenge},
        )
    given = "The token sent is not one this display gave out. " if wrong else ""
    return ApiError(
        401,
        "not-paired",
        f"{given}This display takes {what} only from paired controllers: pair with the code "
        "shown on its screen ('pdn ctl pair DISPLAY_URL CODE', or POST /x/pair with "
        '{"code": ..., "name": ...}), then send \'Authorization: Bearer <token>\'.',
        headers={"WWW-Authenticate": challenge},
    )


class PlaybackFastPath:
    """WSGI middleware answering ``GET /playback/`` from the pre-encoded record.

    Controllers poll this endpoint far more than any other; on a Pi-class CPU Flask's
    per-request machinery costs several times what waitress itself does, so the answer (the
    same bytes and headers as the Flask route) is served here, unless reads need a token
    (``protect_reads`` on a closed display): then Flask answers, with its token check.
    """

    PATHS = frozenset(("/playback/", "/playback"))

    def __init__(self, wrapped: Callable[..., Iterable[bytes]], app: Flask) -> None:
        self.wrapped = wrapped
        self.app = app

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        display = self.app.extensions["pdn.display"]
        security: DisplaySecurity = self.app.extensions["pdn.security"]
        if (
            environ.get("REQUEST_METHOD") == "GET"
            and environ.get("PATH_INFO") in self.PATHS
            and not (getattr(display, "protect_reads", False) and security.closed(display))
        ):
            body: bytes = display.playback_json()
            start_response(
                "200 OK",
                [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
            )
            return [body]
        return self.wrapped(environ, start_response)
