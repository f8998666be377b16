"""Web links in the media library: a name and an http(s) URL, kept as an item of type ``link``
whose key is the SHA-256 of the URL's canonical text (docs/media.md, "Web links"), so the same
page added twice is one item however its scheme or host was spelt.

A link is what every URL field of the API takes (``server.platform.validation.check_uri``):
an http(s) URL with an ASCII host (an international name in its IDNA form), as given, with no
space or control character; besides, no user name or password (the displays would show them)
and at most :data:`MAX_LINK` characters. Canonical: scheme and host in lower case, the default
port dropped, an empty path as ``/``; the path, query and fragment as given.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import urlsplit, urlunsplit

from server.platform.validation import HTTP, USERINFO_PATTERN, check_uri
from server.scheduler.media.probe import RefusedError

__all__ = ["MAX_LINK", "canonical_link", "link_key"]

MAX_LINK = 2048
_USERINFO = re.compile(USERINFO_PATTERN)
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _bad(message: str) -> RefusedError:
    return RefusedError(400, "bad-link", message)


def canonical_link(given: object) -> str:
    """The canonical text of the link ``given``; :class:`RefusedError` (400 ``bad-link``)."""
    if not isinstance(given, str) or not given:
        raise _bad('Give the link as a string: {"link": "https://...", "name": "..."}.')
    if len(given) > MAX_LINK:
        raise _bad(f"A link is at most {MAX_LINK} characters.")
    problem = check_uri(given, HTTP)
    if problem is not None:
        raise _bad(f"'{given}' {problem}.")
    parts = urlsplit(given)
    scheme = parts.scheme.lower()
    if _USERINFO.match(given):
        raise _bad("A link carries no user name or password; the displays would show them.")
    host = (parts.hostname or "").lower()  # ASCII: an international name in its IDNA form
    if not host:
        raise _bad(f"'{given}' has no host.")
    port = parts.port
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, parts.fragment))


def link_key(link: str) -> str:
    """The item key of a canonical link."""
    return hashlib.sha256(link.encode()).hexdigest()
