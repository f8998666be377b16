"""This machine's address as a peer sees it (what to advertise when listening on every address)."""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Literal, overload
from urllib.parse import urlsplit, urlunsplit

#: TEST-NET-1 (RFC 5737): never routed, so connecting to it only looks up the default route.
DEFAULT_ROUTE_PROBE = "192.0.2.1"


@overload
def local_address(towards: str | None = None, *, or_hostname: Literal[True] = True) -> str: ...
@overload
def local_address(towards: str | None = None, *, or_hostname: Literal[False]) -> str | None: ...
def local_address(towards: str | None = None, *, or_hostname: bool = True) -> str | None:
    """This machine's address on the route to ``towards`` (default: the default route).

    What a peer can use to reach us back, when we listen on every address. A UDP socket is
    connected (no packet is sent) and asked for its own address; an IPv6 address comes without
    brackets (``url_host`` adds them). Without such a route: the host name, or None when
    ``or_hostname`` is false.
    """
    host = towards or DEFAULT_ROUTE_PROBE
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((host, 9))
            return str(probe.getsockname()[0])
    except OSError:
        return socket.gethostname() if or_hostname else None


def url_host(host: str) -> str:
    """``host`` as it stands in a URL: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def is_loopback(host: str) -> bool:
    """True for an address only this machine reaches (127.0.0.0/8, ::1, ``localhost``)."""
    bare = host.strip("[]").split("%")[0]
    if bare.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False  # another host name: it may resolve to anything


# A path segment that looks like a random secret (the scheduler's playback-ingest URLs carry one).
_SECRET_SEGMENT = re.compile(r"^[A-Za-z0-9_-]{16,}$")


def shown_uri(uri: str) -> str:
    """``uri`` as a log line may show it: a subscriber URI can carry a credential (user:password@,
    a query, a capability path segment such as ``/x/ingest/<secret>``), so those are masked."""
    parts = urlsplit(uri)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    path = "/".join("***" if _SECRET_SEGMENT.match(p) else p for p in parts.path.split("/"))
    return urlunsplit((parts.scheme, netloc, path, "***" if parts.query else "", ""))
