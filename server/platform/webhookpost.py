"""Webhook POSTs on asyncio streams with h11: what both outboxes send (server/platform/outbox.py for
one process on SQLite, server/platform/pgoutbox.py for several on PostgreSQL).

Usage (inside an asyncio loop)::

    poster = Poster()
    result = await poster.post(uri, body, {"Content-Type": "text/xml"}, timeout=5.0)
    ...                                # result: Delivery (ok, status, error)
    await poster.aclose()

Why not httpx for every POST: measured here (tests/bench/bench_fleet_pg.py's receiver, one
host), httpx 0.28 with httpcore 1.0 spends 1.2 to 5.8 ms of CPU per POST: its pool walks every
connection, and asks each socket whether it is readable, on every request and every answer
(quadratic in the connections open to one host). This costs about 0.2 ms. With 10,000
subscribers that difference was the schedulers' whole CPU. And a display that never meets a
proxy never imports httpx (with its command line's rich and pygments, when installed: 11 MiB
of the display's memory measured in the development environment).

What it does: HTTP/1.1 POST to http and https URIs (certificates checked against the system's
store, with SNI), ``user:password@`` sent as Basic authorisation, one limit for connecting and
answering together, an answer's body read up to ``MAX_ANSWER`` bytes (beyond, the connection is
dropped), only the status counting, redirects not followed. Connections are kept alive per
origin (``idle_per_origin`` idle ones at most, ``max_idle`` in all, none older than
``IDLE_TIMEOUT``). A kept connection that turns out closed before any byte of an answer (the
receiver dropped it while idle) is replaced by a new one and the POST sent once more: the event
id is the same, so a receiver that did get it de-duplicates.

Proxies are httpx's job: when the environment names one (``HTTP_PROXY``, ``HTTPS_PROXY``,
``ALL_PROXY``, any case), every POST goes through an ``httpx.AsyncClient`` that reads the
environment (``NO_PROXY`` included), imported only then.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import ssl
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, unquote, urlsplit

import h11

from server.platform.pins import Pins, check_peer, unverified_context

if TYPE_CHECKING:
    import httpx

__all__ = ["IDLE_TIMEOUT", "MAX_ANSWER", "Delivery", "Poster", "proxy_configured"]

log = logging.getLogger("pdn.outbox")

IDLE_TIMEOUT = 15.0  # below the keep-alive timeouts of common servers (waitress: 120 s)
MAX_ANSWER = 64 * 1024  # bytes of an answer's body read (and ignored) to keep the connection
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")

Origin = tuple[str, str, int]


@dataclass(frozen=True)
class Delivery:
    """The outcome of one POST."""

    ok: bool
    status: int | None
    error: str | None


def proxy_configured() -> bool:
    return any(os.environ.get(name) or os.environ.get(name.upper()) for name in PROXY_VARIABLES)


class _StaleConnectionError(ConnectionError):
    """A kept connection was closed before any byte of the answer came back."""


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0

    def usable(self, now: float) -> bool:
        return (
            not self.reader.at_eof()
            and not self.writer.is_closing()
            and now - self.idle_since < IDLE_TIMEOUT
        )

    def close(self) -> None:
        self.writer.close()


class Poster:
    """POSTs with kept-alive connections; one per delivery loop (not thread-safe)."""

    def __init__(
        self,
        *,
        idle_per_origin: int = 32,
        max_idle: int = 256,
        fallback_connections: int = 256,
        pins: Pins | None = None,
    ) -> None:
        """``pins(url)``: the pinned certificate fingerprint of an HTTPS origin (a display's
        self-signed certificate, ``server.platform.pins``); such connections are checked by it
        alone."""
        self.pins = pins
        self.idle_per_origin = idle_per_origin
        self.max_idle = max_idle
        self._idle: dict[Origin, list[_Connection]] = {}
        self._idle_count = 0
        self._swept = time.monotonic()
        self._tls = ssl.create_default_context()
        self._fallback: httpx.AsyncClient | None = (
            proxy_client(fallback_connections) if proxy_configured() else None
        )

    async def post(
        self, uri: str, body: bytes, headers: dict[str, str], *, timeout: float
    ) -> Delivery:
        if self._fallback is not None:
            return await proxied_post(self._fallback, uri, body, headers, timeout=timeout)
        try:
            status = await asyncio.wait_for(self._exchange(uri, body, headers), timeout)
        except TimeoutError:
            return Delivery(False, None, f"no answer within {timeout:g} s")
        except (OSError, ValueError, h11.ProtocolError, ssl.SSLError) as error:
            return Delivery(False, None, f"{type(error).__name__}: {error}")
        return _answered(status)

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        # A TLS connection finishes closing on the loop: let it, before the loop may end.
        for connections in self._idle.values():
            for connection in connections:
                with contextlib.suppress(OSError, ssl.SSLError):
                    await connection.writer.wait_closed()
        self._idle.clear()
        self._idle_count = 0
        if self._fallback is not None:
            await self._fallback.aclose()

    async def _exchange(self, uri: str, body: bytes, headers: dict[str, str]) -> int:
        parts = _postable(uri)
        scheme = parts.scheme.lower()
        assert parts.hostname is not None  # _postable checked it
        origin = (scheme, parts.hostname, parts.port or (443 if scheme == "https" else 80))
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        fields = [
            ("Host", parts.netloc.rsplit("@", 1)[-1]),
            ("User-Agent", "pdn-outbox"),
            ("Accept", "*/*"),
            ("Content-Length", str(len(body))),
            *headers.items(),
        ]
        if parts.username is not None:
            secret = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            fields.append(("Authorization", "Basic " + base64.b64encode(secret.encode()).decode()))
        connection = self._take(origin)
        if connection is not None:
            try:
                return await self._send_on(connection, origin, target, fields, body)
            except _StaleConnectionError:
                pass  # closed while idle: once more on a new connection
        connection = await self._open(origin)
        return await self._send_on(connection, origin, target, fields, body)

    async def _send_on(
        self,
        connection: _Connection,
        origin: Origin,
        target: str,
        fields: list[tuple[str, str]],
        body: bytes,
    ) -> int:
        reusable = False
        try:
            status, reusable = await _send(connection, target, fields, body)
            return status
        finally:  # also when cancelled (the time limit): a half-used connection is dropped
            if reusable:
                self._keep(origin, connection)
            else:
                connection.close()

    async def _open(self, origin: Origin) -> _Connection:
        scheme, host, port = origin
        pin = self.pins(f"https://{host}:{port}/") if scheme == "https" and self.pins else None
        tls = (unverified_context() if pin else self._tls) if scheme == "https" else None
        reader, writer = await asyncio.open_connection(
            host, port, ssl=tls, server_hostname=host if tls else None
        )
        if pin:
            try:
                check_peer(writer.get_extra_info("ssl_object"), pin)
            except ssl.SSLError:
                writer.close()
                with contextlib.suppress(OSError, ssl.SSLError):
                    await writer.wait_closed()
                raise
        return _Connection(reader, writer)

    def _take(self, origin: Origin) -> _Connection | None:
        kept = self._idle.get(origin)
        now = time.monotonic()
        while kept:
            connection = kept.pop()
            self._idle_count -= 1
            if connection.usable(now):
                return connection
            connection.close()
        return None

    def _keep(self, origin: Origin, connection: _Connection) -> None:
        now = time.monotonic()
        if now - self._swept > IDLE_TIMEOUT / 3:
            self._sweep(now)
        kept = self._idle.setdefault(origin, [])
        if len(kept) >= self.idle_per_origin or self._idle_count >= self.max_idle:
            connection.close()
            return
        connection.idle_since = now
        kept.append(connection)
        self._idle_count += 1

    def _sweep(self, now: float) -> None:
        """Close kept connections gone stale (each origin's oldest come first in its list)."""
        self._swept = now
        for origin in list(self._idle):
            kept = self._idle[origin]
            fresh = []
            for connection in kept:
                if connection.usable(now):
                    fresh.append(connection)
                else:
                    connection.close()
            self._idle_count -= len(kept) - len(fresh)
            if fresh:
                self._idle[origin] = fresh
            else:
                del self._idle[origin]


def _postable(uri: str) -> SplitResult:
    """The parts of an http(s) URI a POST can go to; ValueError for any other."""
    parts = urlsplit(uri)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"cannot POST to {uri!r}")
    if any(ch in uri for ch in "\r\n \t"):
        raise ValueError("a URI with white space cannot be sent")
    return parts


def _answered(status: int) -> Delivery:
    """Only the status of an answer counts: any 2xx delivers."""
    ok = 200 <= status < 300
    return Delivery(ok, status, None if ok else f"HTTP {status}")


def proxy_client(max_connections: int) -> httpx.AsyncClient:
    """The client for POSTs through a proxy: proxies from the environment (``HTTPS_PROXY``,
    ``NO_PROXY`` ...), connections kept alive, certificates checked against the system's
    store."""
    import httpx

    return httpx.AsyncClient(
        headers={"User-Agent": "pdn-outbox"},
        verify=ssl.create_default_context(),
        limits=httpx.Limits(max_connections=max_connections),
        follow_redirects=False,
        trust_env=True,
    )


async def proxied_post(
    client: httpx.AsyncClient, uri: str, body: bytes, headers: dict[str, str], *, timeout: float
) -> Delivery:
    """``Poster.post`` through ``client`` (see ``proxy_client``)."""
    import httpx

    try:
        exchange = _proxied_exchange(client, uri, body, headers, timeout)
        status = await asyncio.wait_for(exchange, timeout)
    except (TimeoutError, httpx.TimeoutException):
        return Delivery(False, None, f"no answer within {timeout:g} s")
    except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError, ValueError) as error:
        return Delivery(False, None, f"{type(error).__name__}: {error}")
    return _answered(status)


async def _proxied_exchange(
    client: httpx.AsyncClient, uri: str, body: bytes, headers: dict[str, str], timeout: float
) -> int:
    _postable(uri)
    async with client.stream(
        "POST", uri, content=body, headers=headers, timeout=timeout
    ) as response:
        # A short answer is read so that the connection can be reused; a long one is not
        # wanted (closing the response then closes its connection).
        read = 0
        async for chunk in response.aiter_raw():
            read += len(chunk)
            if read > MAX_ANSWER:
                break
        return response.status_code


async def _send(
    connection: _Connection, target: str, fields: list[tuple[str, str]], body: bytes
) -> tuple[int, bool]:
    """One POST on ``connection``: (status, whether the connection can carry another)."""
    protocol = h11.Connection(h11.CLIENT)
    data = protocol.send(h11.Request(method="POST", target=target, headers=fields))
    data = (data or b"") + (protocol.send(h11.Data(data=body)) or b"")
    data += protocol.send(h11.EndOfMessage()) or b""
    answered = False
    try:
        connection.writer.write(data)
        await connection.writer.drain()
        status = 0
        read = 0
        while True:
            event = protocol.next_event()
            if event is h11.NEED_DATA:
                chunk = await connection.reader.read(65536)
                if not chunk and not answered:
                    raise _StaleConnectionError("connection closed before an answer")
                answered = True
                protocol.receive_data(chunk)
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                read += len(event.data)
                if read > MAX_ANSWER:
                    return status, False
            elif isinstance(event, h11.EndOfMessage):
                return status, protocol.our_state is h11.DONE and protocol.their_state is h11.DONE
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("connection closed before the answer ended")
            # h11.InformationalResponse (100 Continue): wait for the real answer
    except ConnectionError as error:
        if answered or isinstance(error, _StaleConnectionError):
            raise
        raise _StaleConnectionError(str(error)) from error
