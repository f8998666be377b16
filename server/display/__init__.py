"""The Display Segment's HTTP face (Flask), served by waitress inside ``pdn display``.

It knows a display only through :class:`server.display.port.DisplayPort`, and who may change it
through :class:`DisplaySecurity` (docs/interface.md, "Who may change what"):

- every request's ``Host`` names the display, where it answers without a token (loopback) or
  names are configured, and a state-changing request's browser ``Origin`` is the display's own
  (``server.display.access``): a web page cannot drive a display on loopback;
- listening on loopback only with no ``api_token``: open, as the spec shows it;
- otherwise every state-changing request needs ``Authorization: Bearer`` with the configured
  ``api_token`` or a paired controller's token (``server.platform.pairing``); without one it is
  refused with 401 ``not-paired`` (``unauthorized`` when an ``api_token`` is configured), saying how
  to pair. Reads stay open unless ``protect_reads``; ``GET /x/pairings``, ``GET /x/screenshot`` (it
  may show the pairing code) and the event stream (it holds a thread) are never free reads;
- each token has a role (``server.platform.pairing.ROLES``): the ``api_token`` and the scheduler's
  token are ``control``, a paired controller's is the one it paired with; a token used beyond
  its role is refused with 403 ``forbidden``, naming the role it has and the roles needed;
- ``POST /x/pair`` is open: the pairing code is the credential;
- a signed update (Standard Webhooks headers) to ``POST /schedule`` or ``POST /sensing`` is
  checked against the display's own signing secret, which it gives to the publishers it
  subscribes to (its scheduler): rightly signed, it needs no token; wrongly signed, stale or
  unsigned-but-claiming it is refused with 401 ``invalid-signature``; an id already taken is
  answered 200 and dropped (the ids taken are kept in SQLite, so a restart does not forget
  them: ``server.platform.signing.SeenIds``); the bearer token that goes with that secret
  (``server.platform.signing.bearer_from_secret``) is the scheduler's token, as a paired one;
- wrong tokens and wrong codes lock the client's address out (``server.platform.lockout``).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, Response, current_app, request

from server.display.access import (
    check_host,
    check_origin,
    forbidden_role,
    parse_host,
    roles_for,
)
from server.display.api import api
from server.display.port import DisplayPort
from server.platform.http import (
    JSON_LIMIT,
    XML_LIMIT,
    ApiError,
    create_base_app,
    json_response,
    read_raw_body,
    too_many_attempts,
    webhook_headers,
)
from server.platform.lockout import CODE_GUESSES, TOKEN_GUESSES, Lockout
from server.platform.pairing import Pairing
from server.platform.signing import (
    HEADERS,
    SignatureError,
    Verifier,
    bearer_from_secret,
    parse_secret,
)

__all__ = ["DisplayPort", "DisplaySecurity", "create_app"]

#: Endpoints that are never free reads on a closed display: the list of controllers is for
#: controllers, and a screenshot of the idle page shows the pairing code, meant to be read off
#: the screen by someone in front of it, not over the network.
_GUARDED_READS = frozenset(("display.pairings", "display.screenshot", "display.playback_events"))
#: Endpoints publishers POST signed updates to (a schedule, a sensor's readings).
_SIGNED_UPDATES = frozenset(("display.schedule", "display.post_sensing"))
log = logging.getLogger("pdn.display.access")


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
    #: The secret publishers sign their updates to this display with (``whsec_...``).
    webhook_secret: str | None = None
    verifier: Verifier = field(default_factory=Verifier)
    #: The ``Host`` values (name, port) the display answers to; None: any (beyond loopback,
    #: where a change needs a token anyway, with no names configured).
    hosts: frozenset[tuple[str, int]] | None = None

    def closed(self, display: DisplayPort) -> bool:
        """True when changes need a token."""
        return self.beyond_loopback or bool(display.api_token)

    @property
    def scheme(self) -> str:
        return "https" if self.tls_fingerprint else "http"

    @property
    def default_port(self) -> int:
        return 443 if self.tls_fingerprint else 80


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


def _check_access() -> Response | None:
    """Refuse the request unless this client may make it (see the module's docstring)."""
    extensions = current_app.extensions
    display: DisplayPort = extensions["pdn.display"]
    security: DisplaySecurity = extensions["pdn.security"]
    _check_browser(security)
    if request.method == "OPTIONS" or request.endpoint == "display.pair":
        return None
    if request.endpoint in _SIGNED_UPDATES and any(h in request.headers for h in HEADERS):
        return _check_signature(security)
    if not security.closed(display):
        return None
    reading = request.method in ("GET", "HEAD") and request.endpoint not in _GUARDED_READS
    if reading and not getattr(display, "protect_reads", False):
        return None
    address = request.remote_addr or ""
    wait = security.tokens.retry_after(address)
    if wait is not None:
        raise too_many_attempts(wait, "tokens")
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    given = given.strip()
    if scheme.lower() == "bearer" and given:
        role = _token_role(given, display, security)
        if role is not None:
            needs = roles_for(request.endpoint, request.method)
            if role != "control" and needs is not None and role not in needs:
                raise forbidden_role(role, needs, request.method, request.path)
            return None
        security.tokens.failed(address)
    raise _refusal(display, reading, wrong=bool(header))


def _check_browser(security: DisplaySecurity) -> None:
    """403 for a ``Host`` the display does not answer to, or a foreign browser ``Origin`` on
    a change (``server.display.access``)."""
    given = request.headers.get("Host", "")
    host: tuple[str, int] | None
    if security.hosts is not None:
        host = check_host(given, security.hosts, security.default_port)
    else:
        host = parse_host(given, security.default_port)
    origin = request.headers.get("Origin")
    if origin is not None and request.method not in ("GET", "HEAD", "OPTIONS"):
        if host is None:
            raise ApiError(403, "forbidden-origin", "A browser request needs a Host header.")
        check_origin(origin, security.scheme, host)


def _token_role(given: str, display: DisplayPort, security: DisplaySecurity) -> str | None:
    """The role of the token given: ``control`` for the configured api_token and for the
    scheduler's (the one that goes with the signing secret the display gave it), a paired
    controller's own role; None for a token not known. Compared in constant time."""
    candidates = [display.api_token]
    if security.webhook_secret is not None:
        candidates.append(bearer_from_secret(security.webhook_secret))
    known = False
    for token in candidates:
        if token:
            known |= hmac.compare_digest(given.encode(), token.encode())
    controller = security.pairing.authorise(given) if security.pairing is not None else None
    if known:
        return "control"
    return controller.role if controller is not None else None


def _check_signature(security: DisplaySecurity) -> Response | None:
    """A signed update: None to go on (rightly signed and new), 200 for an id already taken
    (the sender stops; nothing is applied twice), else 401."""
    address = request.remote_addr or ""
    wait = security.tokens.retry_after(address)
    if wait is not None:
        raise too_many_attempts(wait, "signatures")
    keys = [parse_secret(security.webhook_secret)] if security.webhook_secret else []
    try:
        # A CDS may be up to 8 MiB (XML_LIMIT); the JSON limit is checked as the body is read.
        body = read_raw_body(XML_LIMIT if request.endpoint == "display.schedule" else JSON_LIMIT)
        fresh = security.verifier.verify(keys, webhook_headers(), body)
    except SignatureError as error:
        security.tokens.failed(address)
        log.warning("refused a signed update to %s: %s", request.path, error)
        raise ApiError(
            401,
            "invalid-signature",
            str(error),
            headers={"WWW-Authenticate": 'Bearer realm="pdn display"'},
        ) from None
    if not fresh:
        log.debug("dropped a repeated update to %s", request.path)
        return json_response({}, 200)
    return None


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
    (``protect_reads`` on a closed display), or the ``Host`` is not one the display answers
    to: then Flask answers, with its checks.
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
            and (
                security.hosts is None
                or parse_host(environ.get("HTTP_HOST", ""), security.default_port) in security.hosts
            )
        ):
            body: bytes = display.playback_json()
            start_response(
                "200 OK",
                [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
            )
            return [body]
        return self.wrapped(environ, start_response)
