"""The bounds every segment's server keeps under floods and bad luck, and where they are set.

Defaults suit a Pi-class display; each can be changed by an environment variable, which every
segment process reads the same way (``pdn display``, ``pdn scheduler``, ``pdn content``,
``pdn sensor``; systemd units set them with ``Environment=``):

=================================  =========  =================================================
variable                           default    what it bounds
=================================  =========  =================================================
``PDN_MAX_CONNECTIONS``            256        open HTTP connections; at the bound, the
                                              connection idle longest is closed for a new one
``PDN_MAX_CONNECTIONS_PER_CLIENT`` 32         open connections from one client address; more
                                              are answered 429 and closed
``PDN_HEADER_TIMEOUT``             10         seconds to finish the TLS handshake and
                                              send a request's headers (a display's default
                                              is 10 times its ``[screen] timeout-factor``)
``PDN_BODY_TIMEOUT``               60         seconds to send a whole request (headers + body);
                                              a body past 9 MiB (a scheduler's media upload)
                                              gets a second more per MiB past it
``PDN_IDLE_TIMEOUT``               30         seconds a kept-alive connection may stay idle
``PDN_MAX_SUBSCRIPTIONS``          100        subscriptions per resource (topic); more: 429
``PDN_MAX_BACKLOG``                1000       undelivered events per subscriber; beyond, the
                                              oldest are dropped (a gap the receiver sees)
``PDN_SUBSCRIBER_EXPIRY``          86400      seconds a subscriber may fail before it is
                                              dropped with its events
``PDN_PROTECT_READS``              off        ``1``/``true``: reads need the API token too
=================================  =========  =================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

__all__ = ["Limits", "SubscriptionLimitError", "limits", "protect_reads_from_env"]


class SubscriptionLimitError(Exception):
    """A resource has as many subscriptions as it may (answered 429 too-many-subscriptions)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"this resource has {limit} subscriptions, the most it takes")
        self.limit = limit


@dataclass(frozen=True)
class Limits:
    max_connections: int = 256
    max_connections_per_client: int = 32
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    idle_timeout: float = 30.0
    max_subscriptions: int = 100
    max_backlog: int = 1000
    subscriber_expiry: float = 24 * 3600.0


_ENV = {
    "max_connections": "PDN_MAX_CONNECTIONS",
    "max_connections_per_client": "PDN_MAX_CONNECTIONS_PER_CLIENT",
    "header_timeout": "PDN_HEADER_TIMEOUT",
    "body_timeout": "PDN_BODY_TIMEOUT",
    "idle_timeout": "PDN_IDLE_TIMEOUT",
    "max_subscriptions": "PDN_MAX_SUBSCRIPTIONS",
    "max_backlog": "PDN_MAX_BACKLOG",
    "subscriber_expiry": "PDN_SUBSCRIBER_EXPIRY",
}


def limits(environ: dict[str, str] | None = None, *, slowness: float = 1.0) -> Limits:
    """The defaults, changed by the environment; a value that is not a positive number is
    refused with ValueError naming the variable.

    ``slowness`` (a display's ``[screen] timeout-factor``) stretches the default header
    deadline, not one set by ``PDN_HEADER_TIMEOUT``: that deadline is wall-clock time on this
    machine from the connect, and it includes this machine's own share (the server's half of
    the TLS handshake, on a loop that shares the GIL with the screen), which a board slow
    enough to need the factor is slow at too. The flood bounds do not rest on it: a connection
    still handshaking counts as idle, so it is evicted for a new one at the connection bound,
    and one client's connections are capped."""
    env = os.environ if environ is None else environ
    values: dict[str, int | float] = {"header_timeout": Limits.header_timeout * max(1.0, slowness)}
    for item in fields(Limits):
        name = _ENV[item.name]
        given = env.get(name, "").strip()
        if not given:
            continue
        try:
            value = int(given) if item.type == "int" else float(given)
        except ValueError:
            raise ValueError(f"{name}={given!r} is not a number") from None
        if value <= 0:
            raise ValueError(f"{name} must be above 0, not {given}")
        values[item.name] = value
    return Limits(**values)  # type: ignore[arg-type]


def protect_reads_from_env(environ: dict[str, str] | None = None) -> bool:
    """``PDN_PROTECT_READS``: true when reads need the API token too."""
    env = os.environ if environ is None else environ
    return env.get("PDN_PROTECT_READS", "").strip().lower() in ("1", "true", "yes", "on")
