"""What web content may load: the display's own URL schemes and the check on every request.

Scheduled content never runs with the display's privileges:

- A cached item (a verified copy under ``<data_dir>/cache/files``) is served through the
  ``pdn-item`` scheme, at ``pdn-item://<its hash>/<the path of its source>``: an origin of its
  own per file, so one cached page cannot read another's. A relative link inside it asks for
  another path of the same origin, which is sent on (redirected) to the same path on the
  item's own server, as it would be from the live page. Nothing else on disk is reachable.
- The idle page (the display's name, addresses and pairing code) is the display's own page, at
  ``pdn-display://idle/``; only it may load from that scheme, and no content item can have it
  (items are http, https, or a data: image).
- Every request of every page passes :class:`RequestGuard` (a URL request interceptor on the
  kiosk's profile), which refuses, whatever the page tries (fetch, XHR, WebSocket, image,
  frame, navigation, form): ``file:`` and ``qrc:`` URLs; the display's own API (its listen
  port on loopback, ``localhost``, its listen address or any address of this machine); one
  cached item's files from any other page; and, from a public page, loopback, link-local or
  private addresses named by IP literal or as ``localhost``. Every navigation (a frame's too)
  is also put to :meth:`RequestGuard.allows` by its view before it leaves and before each of
  its redirects: the interceptor's refusal of a redirected request comes after Qt WebEngine
  has sent it. A name that resolves to a private address, and a subresource redirected there,
  are Chromium's to refuse (Private Network Access, enabled by the kiosk's flags:
  ``options.py``), since only Chromium knows where a name leads.

A page's address space follows Chromium's: loopback is local, RFC 1918, unique-local and
link-local addresses are private, every other address and every DNS name is public. A cached
item's space is that of the server it came from. ``--ip-address-space-overrides`` in
``QTWEBENGINE_CHROMIUM_FLAGS`` (Chromium's own switch, used by tests to make a loopback server
stand for a public one) is honoured here too, so both layers agree.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import mimetypes
import os
import re
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from PySide6.QtCore import QByteArray, QFile, QIODevice, QObject, QUrl, Slot
from PySide6.QtNetwork import QNetworkInterface
from PySide6.QtWebEngineCore import (
    QWebEngineUrlRequestInfo,
    QWebEngineUrlRequestInterceptor,
    QWebEngineUrlRequestJob,
    QWebEngineUrlScheme,
    QWebEngineUrlSchemeHandler,
)

log = logging.getLogger("pdn.renderer")

ITEM_SCHEME = "pdn-item"
DISPLAY_SCHEME = "pdn-display"
IDLE_BASE = f"{DISPLAY_SCHEME}://idle/"
GUARD_PROPERTY = "pdnGuard"  # the profile's property that holds its guard, for its views
# Schemes a page may load at all; everything else (file:, qrc:, filesystem:, ...) is refused.
_LOADABLE = frozenset(
    {"http", "https", "ws", "wss", "data", "blob", "about", ITEM_SCHEME, DISPLAY_SCHEME}
)
_NETWORK = frozenset({"http", "https", "ws", "wss"})
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}
# Chromium's order: a request from a space to a more private one is refused.
_RANK = {"local": 0, "private": 1, "public": 2}
_HASHED_NAME = re.compile(r"^((?:md5|sha1|sha256|url)-[0-9a-f]+)")
_ITEMS_KEPT = 64  # cached files published to the web engine, most recent first
_ADDRESSES_EVERY = 30.0  # seconds between looks at this machine's addresses


def register_schemes() -> None:
    """Declare the display's schemes to Qt WebEngine: before the application exists."""
    flags = QWebEngineUrlScheme.Flag
    for name, extra in ((ITEM_SCHEME, flags.FetchApiAllowed), (DISPLAY_SCHEME, flags(0))):
        if QWebEngineUrlScheme.schemeByName(QByteArray(name.encode())).name():
            continue
        scheme = QWebEngineUrlScheme(QByteArray(name.encode()))
        scheme.setSyntax(QWebEngineUrlScheme.Syntax.Host)
        scheme.setFlags(extra)
        QWebEngineUrlScheme.registerScheme(scheme)


# -- the cached items the web engine may load --------------------------------------------------


@dataclass(frozen=True)
class Published:
    path: Path  # the verified copy on disk
    url_path: str  # the path part of its pdn-item URL (its source's path)
    source: str  # where it came from: relative links go on to that server
    content_type: str


class ItemFiles:
    """Cached files the renderer has handed to the web engine, by their origin's host."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_host: OrderedDict[str, Published] = OrderedDict()

    def publish(self, path: Path, source: str, content_type: str | None) -> str:
        """The ``pdn-item`` URL that serves ``path`` (a verified copy of ``source``)."""
        found = _HASHED_NAME.match(path.name)
        host = (found.group(1) if found else "f-" + _digest(str(path)))[:63]
        parts = urlsplit(source)
        url_path = parts.path if parts.scheme in ("http", "https") and parts.path else ""
        if not url_path.startswith("/") or len(url_path) < 2:
            url_path = "/" + (path.name or "item")
        kind = (content_type or "").split(";")[0].strip() or (
            mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        )
        with self._lock:
            self._by_host[host] = Published(path, url_path, source, kind)
            self._by_host.move_to_end(host)
            while len(self._by_host) > _ITEMS_KEPT:
                self._by_host.popitem(last=False)
        return f"{ITEM_SCHEME}://{host}{url_path}"

    def get(self, host: str) -> Published | None:
        with self._lock:
            return self._by_host.get(host.lower())

    def source_of(self, host: str) -> str | None:
        found = self.get(host)
        return found.source if found is not None else None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:40]


ITEM_FILES = ItemFiles()


def _reply_file(job: QWebEngineUrlRequestJob, path: Path, content_type: str) -> None:
    device = QFile(str(path), job)  # freed with the job
    if not device.open(QIODevice.OpenModeFlag.ReadOnly):
        job.fail(QWebEngineUrlRequestJob.Error.UrlNotFound)
        return
    job.reply(QByteArray(content_type.encode()), device)


class ItemSchemeHandler(QWebEngineUrlSchemeHandler):
    """Serves ``pdn-item`` URLs from the cache, and the idle page's files (``pdn-display``)."""

    def __init__(self, items: ItemFiles, assets: Path, parent: QObject) -> None:
        super().__init__(parent)
        self._items = items
        self._assets = assets

    def requestStarted(self, job: QWebEngineUrlRequestJob) -> None:  # noqa: N802 (Qt's name)
        url = job.requestUrl()
        if bytes(job.requestMethod().data()).upper() != b"GET":
            job.fail(QWebEngineUrlRequestJob.Error.RequestDenied)
        elif url.scheme() == DISPLAY_SCHEME:
            self._display_file(job, url)
        else:
            self._item_file(job, url)

    def _display_file(self, job: QWebEngineUrlRequestJob, url: QUrl) -> None:
        name = url.path().lstrip("/")
        known = {path.name: path for path in self._assets.iterdir() if path.suffix != ".html"}
        if url.host() != "idle" or name not in known:
            job.fail(QWebEngineUrlRequestJob.Error.UrlNotFound)
            return
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        _reply_file(job, known[name], kind)

    def _item_file(self, job: QWebEngineUrlRequestJob, url: QUrl) -> None:
        found = self._items.get(url.host())
        path = url.path(QUrl.ComponentFormattingOption.FullyEncoded)
        if found is None:
            job.fail(QWebEngineUrlRequestJob.Error.UrlNotFound)
        elif path == found.url_path:
            _reply_file(job, found.path, found.content_type)
        elif urlsplit(found.source).scheme in ("http", "https"):
            source = urlsplit(found.source)
            query = url.query(QUrl.ComponentFormattingOption.FullyEncoded)
            target = f"{source.scheme}://{source.netloc}{path}" + (f"?{query}" if query else "")
            job.redirect(QUrl(target))
        else:
            job.fail(QWebEngineUrlRequestJob.Error.UrlNotFound)


# -- address spaces ----------------------------------------------------------------------------


def overrides() -> dict[tuple[str, int], str]:
    """Chromium's ``--ip-address-space-overrides=IP:PORT=space,...``, as it was given."""
    found: dict[tuple[str, int], str] = {}
    for flag in os.environ.get("QTWEBENGINE_CHROMIUM_FLAGS", "").split():
        if not flag.startswith("--ip-address-space-overrides="):
            continue
        for entry in flag.split("=", 1)[1].split(","):
            address, _, space = entry.rpartition("=")
            host, _, port = address.rpartition(":")
            if space in _RANK and port.isdigit():
                found[(host.strip("[]").lower(), int(port))] = space
    return found


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _is_localhost(host: str) -> bool:
    host = host.lower().rstrip(".")
    return host == "localhost" or host.endswith(".localhost")


def space_of_host(host: str) -> str | None:
    """local, private or public for an IP literal or a localhost name; None for a DNS name."""
    if _is_localhost(host):
        return "local"
    address = _literal(host)
    if address is None:
        return None
    if address.is_loopback or address.is_unspecified:
        return "local"
    if address.is_private or address.is_link_local:
        return "private"
    return "public"


def space_of(host: str, port: int, given: dict[tuple[str, int], str]) -> str | None:
    """``space_of_host``, unless the overrides ``given`` say otherwise for ``host:port``."""
    return given.get((host.strip("[]"), port)) or space_of_host(host)


def source_space(url: str, given: dict[tuple[str, int], str]) -> str:
    """The address space of the server at ``url`` (a DNS name: public, as far as we know)."""
    found = _target(url)
    if found is None or found.scheme not in _NETWORK:
        return "public"
    return space_of(found.host, found.port, given) or "public"


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int


def _target(url: str) -> Target | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    return Target(scheme, host, port if port is not None else _DEFAULT_PORTS.get(scheme, 0))


class RequestGuard(QWebEngineUrlRequestInterceptor):
    """Refuses what a page must never reach (see the module's docstring)."""

    def __init__(
        self, items: ItemFiles, api_host: str, api_port: int, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self._items = items
        self._api_host = api_host.strip("[]").lower()
        self._api_port = api_port
        self._overrides = overrides()
        self._hostname = socket.gethostname().lower()
        self._own: frozenset[str] = frozenset()
        self._own_checked = 0.0
        self.refused = 0  # requests refused over the guard's life

    def interceptRequest(self, info: QWebEngineUrlRequestInfo) -> None:  # noqa: N802 (Qt's name)
        url = info.requestUrl().toString(QUrl.ComponentFormattingOption.FullyEncoded)
        initiator = info.initiator()
        origin = "" if initiator.isEmpty() else initiator.toString()
        reason = self.reason(url, origin)
        if reason is not None:
            info.block(True)
            self.refused += 1
            # The display's log lets a burst of each message through (server.platform.logrepeat).
            log.warning(
                "refused a request of %.120s for %.200s: %s", origin or "the display", url, reason
            )

    @Slot(str, str, result=bool)
    def allows(self, url: str, page: str) -> bool:
        """Whether the view showing ``page`` ("" or about:blank: none yet) may navigate to
        ``url`` (asked by the view before a navigation, and before each of its redirects)."""
        parts = urlsplit(page)
        origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""
        if parts.scheme and not parts.netloc and parts.scheme not in ("about", "data"):
            origin = "null"  # an opaque origin: trusted with nothing
        reason = self.reason(url, origin)
        if reason is None:
            return True
        self.refused += 1
        log.warning("refused a navigation of %.120s to %.200s: %s", page or "a view", url, reason)
        return False

    def reason(self, url: str, origin: str) -> str | None:
        """Why a request for ``url`` from a page of ``origin`` ("": the display itself) is
        refused; None when it may go."""
        target = _target(url)
        if target is None or target.scheme not in _LOADABLE:
            return "not a scheme web content may load"
        if target.scheme == ITEM_SCHEME:
            mine = _target(origin) if origin else target
            if mine is None or (mine.scheme, mine.host) != (target.scheme, target.host):
                return "another item's cached files"
            return None
        if target.scheme == DISPLAY_SCHEME:
            if origin and not origin.startswith(f"{DISPLAY_SCHEME}:"):
                return "the display's own page"
            return None
        if target.scheme not in _NETWORK:
            return None
        if self._is_api(target):
            return "the display's own API"
        if not origin:
            return None
        wanted = self._space(target.host, target.port)
        if wanted is None:
            return None  # a DNS name: Chromium's Private Network Access decides
        if _RANK[wanted] < _RANK[self._origin_space(origin)]:
            return f"a {wanted} address from a less private page"
        return None

    def _space(self, host: str, port: int) -> str | None:
        return space_of(host, port, self._overrides)

    def _origin_space(self, origin: str) -> str:
        found = _target(origin)
        if found is None:
            return "public"
        if found.scheme == DISPLAY_SCHEME:
            return "local"
        if found.scheme == ITEM_SCHEME:  # a cached copy: where it came from
            return source_space(self._items.source_of(found.host) or "", self._overrides)
        # An opaque or unknown origin is trusted with nothing; a DNS name counts as public.
        return source_space(origin, self._overrides)

    def _is_api(self, target: Target) -> bool:
        if self._api_port <= 0 or target.port != self._api_port:
            return False
        host = target.host.strip("[]")
        if host in (self._api_host, self._hostname) or _is_localhost(host):
            return True
        address = _literal(host)
        if address is not None and (address.is_loopback or address.is_unspecified):
            return True
        return host in self._own_addresses()

    def _own_addresses(self) -> frozenset[str]:
        now = time.monotonic()
        if now - self._own_checked > _ADDRESSES_EVERY:
            found = QNetworkInterface.allAddresses()
            self._own = frozenset(a.toString().split("%")[0].lower() for a in found)
            self._own_checked = now
        return self._own
