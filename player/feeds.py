"""A ticker's lines, read from where a CDS item points: an RSS 2.0 or Atom feed (each item's or
entry's title, optionally with its description), a text file (one message a line) or a
``data:text/plain,`` URI. No Qt: the renderer's ticker (``player.renderer.zoneitems``) shows
what this module reads.

Every feed is hostile input. Only ``http``, ``https`` and ``data`` URIs are read; a download is
bounded in size (:data:`MAX_BYTES`) and time (connect, read and a whole-download deadline);
XML is parsed by lxml with DTDs, entities and network access off, and a document that
declares a DOCTYPE or an entity is refused before the parser sees it. What is shown is bounded
too: at most :data:`MAX_LINES` lines of at most :data:`MAX_LINE_CHARS` characters, control
characters removed, markup in descriptions reduced to its text.

:class:`FeedReader` reads one URI on a worker thread of its own, every ``refresh`` seconds
(the ``<uri refresh="...">`` attribute; :data:`DEFAULT_REFRESH` without one), with a
conditional GET (ETag, Last-Modified). A failed or refused read is retried with a growing
back-off and leaves the last good lines as they are; the last good lines are also kept in the
display's data directory (written whole, then renamed), so a display restarted without a
network shows them at once. Lines are handed over by a callback called on the worker
thread: the caller marshals them (the renderer emits a Qt signal, queued to the GUI thread).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import html
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

import requests
from lxml import etree

from cds.durations import parse_duration
from cds.guard import xml_parser
from server.platform.atomicfile import write_atomically

__all__ = [
    "DEFAULT_REFRESH",
    "MAX_BYTES",
    "MAX_LINES",
    "MAX_LINE_CHARS",
    "FeedError",
    "FeedReader",
    "FeedSpec",
    "parse_feed",
    "read_uri",
    "refresh_seconds",
]

log = logging.getLogger("pdn.feeds")

MAX_BYTES = 1024 * 1024  # a news feed is tens of kilobytes
MAX_LINES = 50
MAX_LINE_CHARS = 300
MAX_ELEMENTS = 20_000
DEFAULT_REFRESH = 300.0
MIN_REFRESH = 5.0  # a refresh shorter than this is read as this (no feed is polled flat out)
RETRY_FIRST = 10.0  # seconds before the first retry of a failed read; doubled at each failure
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 10.0
DEADLINE = 20.0  # a whole download, however slowly it trickles
DESCRIPTION_CHARS = 160  # a description shown after its title is cut to this
SCHEMES = ("http", "https", "data")

_DECLARATION = re.compile(rb"<!\s*(DOCTYPE|ENTITY|ELEMENT|ATTLIST)", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
_ATOM = "{http://www.w3.org/2005/Atom}"


class FeedError(ValueError):
    """A feed that cannot be read or is refused; the message says why, for a person."""


def refresh_seconds(value: str | float | None) -> float:
    """How often a feed is read again: ``<uri refresh="...">`` as written (any duration
    :func:`cds.durations.parse_duration` reads), or seconds; :data:`DEFAULT_REFRESH` when
    there is none, :data:`MIN_REFRESH` at least. A malformed value is a :class:`FeedError`."""
    if value is None or value == "":
        return DEFAULT_REFRESH
    if isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except ValueError as error:
            raise FeedError(f"refresh {value!r}: {error}") from None
    else:
        seconds = float(value)
    if not seconds > 0:
        raise FeedError(f"refresh must be positive, not {value!r}")
    return max(MIN_REFRESH, seconds)


# -- reading ------------------------------------------------------------------------------


def shown_uri(uri: str) -> str:
    """The URI as a log line shows it (a data: URI can be long)."""
    return uri if len(uri) <= 80 else uri[:77] + "..."


def read_uri(
    uri: str,
    *,
    session: requests.Session | None = None,
    max_bytes: int = MAX_BYTES,
    validators: dict[str, str] | None = None,
) -> tuple[bytes, str | None, dict[str, str]] | None:
    """The bytes ``uri`` names, their media type, and the validators of a conditional GET
    (ETag, Last-Modified) for the next read; None when the server says they have not changed
    since ``validators``. :class:`FeedError` for a URI of another scheme, a failed or
    over-long download, or an answer other than 200 (and 304)."""
    scheme = urlsplit(uri).scheme.lower()
    if scheme not in SCHEMES:
        raise FeedError(f"a feed is read from http, https or data URIs, not {scheme or uri!r}")
    if scheme == "data":
        body, media_type = _data_uri(uri, max_bytes)
        return body, media_type, {}
    return _download(uri, session or requests.Session(), max_bytes, validators or {})


def _data_uri(uri: str, max_bytes: int) -> tuple[bytes, str]:
    head, comma, payload = uri[len("data:") :].partition(",")
    if not comma:
        raise FeedError("a data: URI needs a comma before its text")
    if len(payload) > 3 * max_bytes:
        raise FeedError(f"the data: URI is larger than {max_bytes // 1024} KiB")
    parts = [part.strip() for part in head.split(";")]
    media_type = parts[0].lower() or "text/plain"
    try:
        if "base64" in (part.lower() for part in parts[1:]):
            body = base64.b64decode(unquote_to_bytes(payload), validate=False)
        else:
            body = unquote_to_bytes(payload)
    except (binascii.Error, ValueError) as error:
        raise FeedError(f"the data: URI cannot be decoded: {error}") from None
    if len(body) > max_bytes:
        raise FeedError(f"the data: URI is larger than {max_bytes // 1024} KiB")
    return body, media_type


def _download(
    uri: str, session: requests.Session, max_bytes: int, validators: dict[str, str]
) -> tuple[bytes, str | None, dict[str, str]] | None:
    headers = {"Accept": "application/rss+xml, application/atom+xml, text/xml, text/plain;q=0.9"}
    if "etag" in validators:
        headers["If-None-Match"] = validators["etag"]
    if "last-modified" in validators:
        headers["If-Modified-Since"] = validators["last-modified"]
    deadline = time.monotonic() + DEADLINE
    try:
        with session.get(
            uri,
            headers=headers,
            stream=True,
            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
            allow_redirects=True,
        ) as answer:
            if answer.status_code == 304 and validators:
                return None
            if answer.status_code != 200:
                raise FeedError(f"the server answered {answer.status_code}")
            length = answer.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > max_bytes:
                raise FeedError(f"the feed is larger than {max_bytes // 1024} KiB")
            chunks: list[bytes] = []
            size = 0
            for chunk in answer.iter_content(64 * 1024):
                size += len(chunk)
                if size > max_bytes:
                    raise FeedError(f"the feed is larger than {max_bytes // 1024} KiB")
                if time.monotonic() > deadline:
                    raise FeedError(f"the download took longer than {DEADLINE:g} s")
                chunks.append(chunk)
            media_type = answer.headers.get("Content-Type", "").split(";")[0].strip().lower()
            kept = {
                key: answer.headers[name]
                for key, name in (("etag", "ETag"), ("last-modified", "Last-Modified"))
                if name in answer.headers and len(answer.headers[name]) < 200
            }
            return b"".join(chunks), media_type or None, kept
    except requests.RequestException as error:
        raise FeedError(f"cannot read it: {type(error).__name__}: {error}") from None


# -- parsing ------------------------------------------------------------------------------


def parse_feed(data: bytes, media_type: str | None = None, descriptions: bool = False) -> list[str]:
    """The lines a ticker shows from ``data``: an RSS or Atom document's item titles (each
    followed by its description, cut short, with ``descriptions``), or a text's non-empty
    lines. XML or text is told by ``media_type``, or by the data when it names none (or a
    generic one). :class:`FeedError` when the data are refused or hold no line."""
    if len(data) > MAX_BYTES:
        raise FeedError(f"the feed is larger than {MAX_BYTES // 1024} KiB")
    kind = (media_type or "").lower()
    if kind == "text/plain" or (not kind.endswith("xml") and not _looks_like_xml(data)):
        lines = _text_lines(data)
    else:
        lines = _xml_lines(data, descriptions)
    if not lines:
        raise FeedError("the feed holds no line to show")
    return lines


def _looks_like_xml(data: bytes) -> bool:
    return data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<")


def _clean(text: str, limit: int = MAX_LINE_CHARS) -> str:
    text = _SPACE.sub(" ", _CONTROL.sub(" ", text)).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def _text_lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    lines = [_clean(line) for line in text.splitlines()]
    return [line for line in lines if line][:MAX_LINES]


def _refuse_declarations(data: bytes) -> None:
    texts = [data]
    if b"\x00" in data[:4] or data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        # UTF-16 or UTF-32 hides the ASCII pattern: look at decoded copies too.
        for encoding in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"):
            texts.append(data.decode(encoding, errors="ignore").encode("utf-8", errors="replace"))
    if any(_DECLARATION.search(text) for text in texts):
        raise FeedError("the feed declares a DOCTYPE or entities, which are refused for safety")


def _xml_lines(data: bytes, descriptions: bool) -> list[str]:
    _refuse_declarations(data)
    if data.count(b"<") > 2 * MAX_ELEMENTS:
        raise FeedError(f"the feed has more than {MAX_ELEMENTS} elements")
    try:
        root = etree.fromstring(data, xml_parser())
    except (etree.LxmlError, ValueError, LookupError) as error:
        raise FeedError(f"the feed is not readable XML: {error}") from None
    if root is None:
        raise FeedError("the feed is empty")
    docinfo: Any = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None:
        raise FeedError("the feed declares a DOCTYPE, which is refused for safety")
    name = etree.QName(root).localname
    fields: tuple[str, ...]
    if name == "feed":  # Atom
        entries = root.iter(f"{_ATOM}entry")
        fields = (f"{_ATOM}title", f"{_ATOM}summary", f"{_ATOM}content")
    elif name in ("rss", "RDF"):  # RSS 2.0 (and 1.0, whose items sit beside the channel)
        entries = (e for e in root.iter() if etree.QName(e).localname == "item")
        fields = ("title", "description")
    else:
        raise FeedError(f"the document is neither RSS nor Atom (its root is <{name}>)")
    lines: list[str] = []
    for entry in entries:
        line = _entry_line(entry, fields, descriptions)
        if line:
            lines.append(line)
        if len(lines) >= MAX_LINES:
            break
    return lines


def _entry_line(entry: Any, fields: tuple[str, ...], descriptions: bool) -> str:
    def text_of(tag: str) -> str:
        for child in entry:
            if isinstance(child.tag, str) and _local(child.tag) == _local(tag):
                # RSS descriptions carry HTML as escaped text: keep its words alone.
                return _clean(html.unescape(_TAG.sub(" ", "".join(child.itertext()))))
        return ""

    title = text_of(fields[0])
    if not descriptions:
        return title
    detail = next((text for text in map(text_of, fields[1:]) if text), "")
    detail = _clean(detail, DESCRIPTION_CHARS)
    return _clean(f"{title}: {detail}" if title and detail else title or detail)


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


# -- the reader ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FeedSpec:
    """Where a ticker's lines come from: the item's URI, its media type (the CDS item's
    ``content-type``), its refresh in seconds, and whether descriptions follow titles."""

    uri: str
    media_type: str | None = None
    refresh: float = DEFAULT_REFRESH
    descriptions: bool = False


class FeedReader:
    """Reads one feed on a worker thread of its own, now and every ``refresh`` seconds, and
    calls ``on_lines`` (on that thread) with each new set of good lines.

    The last good lines are kept (:attr:`lines`) whatever later reads bring, and written to
    ``data_dir/feeds/`` (none: kept in memory only); :meth:`start` hands the stored ones over
    first. :meth:`refresh_now` reads at once; :meth:`close` stops the thread, and no callback
    comes after it returns.
    """

    def __init__(
        self,
        spec: FeedSpec,
        on_lines: Callable[[list[str]], None],
        *,
        data_dir: Path | None = None,
        max_bytes: int = MAX_BYTES,
        retry_first: float = RETRY_FIRST,
    ) -> None:
        scheme = urlsplit(spec.uri).scheme.lower()
        if scheme not in SCHEMES:
            raise FeedError(f"a feed is read from http, https or data URIs, not {scheme!r}")
        self.spec = spec
        self._on_lines = on_lines
        self._max_bytes = max_bytes
        self._retry_first = retry_first
        digest = hashlib.sha256(spec.uri.encode()).hexdigest()[:32]
        self._stored = data_dir / "feeds" / f"{digest}.json" if data_dir is not None else None
        self._lock = threading.RLock()  # a callback may read .lines
        self._lines: list[str] = []
        self._validators: dict[str, str] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._session = requests.Session()
        self._session.max_redirects = 5
        self.reads = 0  # reads tried, good or not
        self.failures = 0  # reads failed or refused in a row
        self._last_error = ""

    @property
    def lines(self) -> list[str]:
        with self._lock:
            return list(self._lines)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name=f"feed {shown_uri(self.spec.uri)}", daemon=True
        )
        self._thread.start()

    def refresh_now(self) -> None:
        """Read the feed at once (not waiting for the refresh, nor for a back-off)."""
        self._wake.set()

    def close(self, timeout: float = 0.0) -> None:
        """Stop the worker; no callback comes once this returns. A read under way is
        abandoned (its result is dropped) and the thread ends with it, within the read's
        timeouts, holding nothing of the caller's: the GUI thread does not wait for it
        (``timeout``: wait that long at most)."""
        with self._lock:
            self._closed = True
        self._stop.set()
        self._wake.set()
        if self._thread is None:
            self._session.close()
        elif timeout > 0 and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- the worker -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._follow()
        finally:
            self._session.close()

    def _follow(self) -> None:
        stored = self._load()
        if stored:
            self._hand_over(stored)
        once = urlsplit(self.spec.uri).scheme.lower() == "data"  # its text never changes
        while not self._stop.is_set():
            self._wake.clear()
            good = self._read_once()
            if once and good:
                return
            if good:
                delay = max(MIN_REFRESH, self.spec.refresh)
            else:
                delay = min(
                    self._retry_first * 2 ** min(self.failures - 1, 16),
                    max(self.spec.refresh, self._retry_first),
                )
            self._wake.wait(delay)

    def _read_once(self) -> bool:
        self.reads += 1
        try:
            got = read_uri(
                self.spec.uri,
                session=self._session,
                max_bytes=self._max_bytes,
                validators=self._validators,
            )
            if got is None:  # not modified
                self._recovered()
                return True
            body, media_type, validators = got
            lines = parse_feed(body, self.spec.media_type or media_type, self.spec.descriptions)
        except FeedError as error:
            self.failures += 1
            if self._stop.is_set():
                return False
            # Each new reason is a warning; the same one again, while it lasts, is not.
            report = log.warning if str(error) != self._last_error else log.debug
            self._last_error = str(error)
            report(
                "ticker feed %s refused or unreadable: %s; %s",
                shown_uri(self.spec.uri),
                error,
                f"keeping its last {len(self.lines)} lines" if self.lines else "no line yet",
            )
            return False
        self._validators = validators
        self._recovered()
        if lines != self.lines:
            self._store(lines)
            self._hand_over(lines)
        return True

    def _recovered(self) -> None:
        if self.failures:
            log.info("ticker feed %s read again", shown_uri(self.spec.uri))
        self.failures = 0
        self._last_error = ""

    def _hand_over(self, lines: list[str]) -> None:
        # Under the lock, so no callback runs once close() has returned.
        with self._lock:
            if self._closed:
                return
            self._lines = list(lines)
            self._on_lines(list(lines))

    def _load(self) -> list[str]:
        if self._stored is None:
            return []
        try:
            kept = json.loads(self._stored.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as error:
            log.warning("ticker feed store %s is unreadable (%s): ignored", self._stored, error)
            return []
        lines = kept.get("lines") if isinstance(kept, dict) else None
        if kept.get("uri") != self.spec.uri or not isinstance(lines, list):
            return []
        return [_clean(line) for line in lines if isinstance(line, str) and line][:MAX_LINES]

    def _store(self, lines: list[str]) -> None:
        if self._stored is None:
            return
        record = {"uri": self.spec.uri, "lines": lines, "read": time.time()}
        try:
            self._stored.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self._stored, json.dumps(record, ensure_ascii=False).encode())
        except OSError as error:
            log.warning("cannot keep the ticker feed's lines in %s: %s", self._stored, error)
