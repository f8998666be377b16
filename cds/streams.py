"""Live streams as content items: which addresses and types are one (HLS, RTSP, SRT).

A live stream has no file to fetch: it is never downloaded or cached, and it plays from its
source natively for as long as its item does (it has no length of its own). An item is a
stream when its address is ``rtsp://``, ``rtsps://`` or ``srt://``, when its content type is
an HLS playlist's, or when its http(s) address ends ``.m3u8``. Its address is taken under the
same rules as an http one (a host, and the display's allowed origins).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

STREAM_SCHEMES = ("rtsp", "rtsps", "srt")
HLS_TYPES = frozenset(
    {
        "application/vnd.apple.mpegurl",
        "application/x-mpegurl",
        "audio/mpegurl",
        "audio/x-mpegurl",
    }
)


def _scheme(url: str) -> str:
    return url.split(":", 1)[0].strip().lower() if ":" in url else ""


def is_stream(url: str, content_type: str | None) -> bool:
    """True when the item at ``url`` (of ``content_type``, None when not given) is a live
    stream."""
    scheme = _scheme(url)
    if scheme in STREAM_SCHEMES:
        return True
    if (content_type or "").split(";", 1)[0].strip().lower() in HLS_TYPES:
        return True
    if scheme not in ("http", "https"):
        return False
    try:
        path = urlsplit(url).path
    except ValueError:
        return False
    return PurePosixPath(unquote(path)).suffix.lower() == ".m3u8"


def stream_uri_problem(uri: str) -> str | None:
    """Why ``uri``, an rtsp, rtsps or srt address, cannot be a stream's (None when it can)."""
    if any(character.isspace() for character in uri):
        return f"'{uri[:80]}' contains a space; write spaces as %20"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018  (a port out of range raises here)
    except ValueError:
        return f"'{uri[:80]}' is not a valid address"
    if not parts.hostname:
        return f"'{uri[:80]}' has no host name (like rtsp://camera.example.org/live)"
    return None
