"""Who may ask the display what: the names it answers to, browsers' origins, tokens' roles.

A browser on the display's machine can send requests to loopback from any page it shows,
including a page whose name an attacker points at 127.0.0.1 (DNS rebinding). Such a request
carries the page's name in ``Host`` and, when it changes state, its origin in ``Origin``. So:

- where the display answers without a token (listening on loopback) and wherever the operator
  named the display's names (``[listen] hosts``), ``Host`` must be one of :func:`allowed_hosts`:
  ``localhost``, ``127.0.0.1``, ``[::1]``, the listen address, the ``public_url``'s name and
  the configured names, each with the display's port; otherwise 403 ``forbidden-host``.
  Beyond loopback with no names configured, the names an operator uses cannot be known, but
  every change there needs a token or a signature, which a page does not have;
- a state-changing request with an ``Origin`` is refused (403 ``forbidden-origin``) unless it
  is the display's own: its scheme and the ``Host`` the request came to.

Tokens carry a role (``server.platform.pairing.ROLES``); :func:`roles_for` says which roles an
endpoint takes besides ``control``, which takes every one.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from server.platform.http import ApiError

__all__ = [
    "LOOPBACK_NAMES",
    "allowed_hosts",
    "check_host",
    "check_origin",
    "forbidden_role",
    "parse_host",
    "roles_for",
]

#: The names a display on loopback is reached by on its own machine.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

#: Endpoint -> the roles besides ``control`` that may use it. Not listed: a read (GET/HEAD)
#: takes ``read``, anything else ``control`` alone.
_ROLES: dict[str, tuple[str, ...]] = {
    "display.schedule": ("content",),
    "display.post_sensing": ("sensor",),
    # A subscription is a way of reading playback: it sends what GET /playback/ shows.
    "display.subscribe": ("read",),
    "display.unsubscribe": ("read",),
    # Who is paired is the controllers' business; a screenshot may show the pairing code,
    # which would let its viewer pair as control.
    "display.pairings": (),
    "display.revoke_pairing": (),
    "display.screenshot": (),
}


def roles_for(endpoint: str | None, method: str) -> tuple[str, ...] | None:
    """The roles besides ``control`` that may make this request; None for a request that
    matches no endpoint (it is answered 404 or 405 whoever asks)."""
    if endpoint is None:
        return None
    if endpoint in _ROLES:
        return _ROLES[endpoint]
    return ("read",) if method in ("GET", "HEAD") else ()


def forbidden_role(role: str, needs: tuple[str, ...], method: str, path: str) -> ApiError:
    """403 for a known token used beyond its role, naming the role it has and needs."""
    allowed = ["control", *needs]
    named = " or ".join(f"'{name}'" for name in allowed)
    return ApiError(
        403,
        "forbidden",
        f"This token's role is '{role}'; {method} {path} needs {named}. Pair again with"
        " the role needed ('pdn ctl pair ... --role ROLE').",
        extra={"role": role, "needs": allowed},
    )


def parse_host(value: str, default_port: int) -> tuple[str, int] | None:
    """``(name, port)`` of a ``Host`` value (lowercase, brackets and a final dot gone), the
    port ``default_port`` when none is given; None when it is not a host."""
    text = value.strip()
    if not text or any(c in text for c in "/?#@\\ \t"):
        return None
    try:
        parts = urlsplit("//" + text)
        name, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not name:
        return None
    return name.rstrip("."), default_port if port is None else port


def allowed_hosts(
    listen_host: str,
    port: int,
    *,
    names: Iterable[str] = (),
    public_url: str | None = None,
) -> frozenset[tuple[str, int]]:
    """The ``Host`` values a display listening on ``listen_host:port`` answers to: the loopback
    names and the listen address with its port, the ``public_url``'s host, and ``names``
    (``[listen] hosts``: a name, or ``name:port`` when reached through another port)."""
    allowed = {(name, port) for name in LOOPBACK_NAMES}
    if listen_host not in ("", "0.0.0.0", "::"):
        allowed.add((listen_host.lower(), port))
    if public_url:
        parts = urlsplit(public_url)
        if parts.hostname:
            scheme_port = 443 if parts.scheme == "https" else 80
            allowed.add((parts.hostname.rstrip("."), parts.port or scheme_port))
    for name in names:
        parsed = parse_host(name, port)
        if parsed is not None:
            allowed.add(parsed)
    return frozenset(allowed)


def check_host(
    given: str, allowed: frozenset[tuple[str, int]], default_port: int
) -> tuple[str, int]:
    """The request's ``(name, port)`` when it is one this display answers to, else 403."""
    parsed = parse_host(given, default_port)
    if parsed is None or parsed not in allowed:
        names = sorted(f"{'[' + n + ']' if ':' in n else n}:{p}" for n, p in allowed)
        shown = given[:100] if given else "(none)"
        raise ApiError(
            403,
            "forbidden-host",
            f"This display does not answer to Host {shown!r}: it answers to"
            f" {', '.join(names)} (add a name to [listen] hosts to reach it by another).",
        )
    return parsed


def check_origin(origin: str, scheme: str, host: tuple[str, int]) -> None:
    """403 unless a browser's ``Origin`` is the display's own: ``scheme`` and ``host``."""
    parts = urlsplit(origin.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    name = (parts.hostname or "").rstrip(".")
    if (
        parts.scheme.lower() == scheme
        and name
        and (name, port or (443 if scheme == "https" else 80)) == host
        and not parts.path
    ):
        return
    raise ApiError(
        403,
        "forbidden-origin",
        f"A page from {origin[:100]!r} may not change this display: only its own origin"
        " may, and its own programs send no Origin.",
    )
