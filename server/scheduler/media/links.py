"""Web links in the media library: a name and an http(s) URL, kept as an item of type ``link``
whose key is the SHA-256 of the URL's canonical text (docs/media.md, "Web links"), so the same
page added twice is one item however its scheme or host was spelt.

Canonical: scheme and host in lower case (an international host in its IDNA form), the
default port dropped, an empty path as ``/``; the path, query and fragment as given. Refused:
another scheme, no host, a user name or password in the URL, spaces or control characters,
more than :data:`MAX_LINK` characters.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import urlsplit, urlunsplit

from server.scheduler.media.probe import RefusedError

__all__ = ["MAX_LINK", "canonical_link", "link_key"]

MAX_LINK = 2048
_UNSAFE = re.compile(r"[\x00-\x20\x7f]")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _bad(message: str) -> RefusedError:
    return RefusedError(400, "bad-link", message)


def canonical_link(given: object) -> str:
    """The canonical text of the link ``given``; :class:`RefusedError` (400 ``bad-link``)."""
    if not isinstance(given, str) or not given.strip():
        raise _bad('Give the link as a string: {"link": "https://...", "name": "..."}.')
    text = given.strip()
    if len(text) > MAX_LINK or _UNSAFE.search(text):
        raise _bad(f"A link is at most {MAX_LINK} characters with no spaces or control characters.")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as error:
        raise _bad(f"'{text}' is not a URL ({error}).") from error
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise _bad(f"'{text}': a link is an http:// or https:// URL.")
    if parts.username is not None or parts.password is not None:
        raise _bad("A link carries no user name or password; the displays would show them.")
    host = parts.hostname or ""
    if not host:
        raise _bad(f"'{text}' has no host.")
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host.lower()
    except UnicodeError as error:
        raise _bad(f"'{text}' has a host that is not a valid name.") from error
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, parts.fragment))


def link_key(link: str) -> str:
    """The item key of a canonical link."""
    return hashlib.sha256(link.encode()).hexdigest()
