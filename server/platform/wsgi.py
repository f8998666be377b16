"""Serve a WSGI app with waitress, in a thread of its own or in the foreground.

waitress is a production server (bounded worker threads, request size limits, no debug
console), pure Python so it installs on a Pi without a compiler. Port 0 picks a free port,
which tests use; ``server.port`` tells the one bound.

Floods. Plain waitress is unreachable after ~100 idle connections: at ``connection_limit`` its
listener stops accepting, and ``channel_timeout`` counts from a connection's *last byte*, so a
client that drips one header byte every few seconds is never closed. Its worker threads are
not the problem (a request reaches a worker only once complete). So waitress stays, with its
loop guarded here (:class:`GuardedServer`, bounds from :mod:`server.platform.limits`):

- a *request deadline*: the headers must arrive within ``header_timeout`` and the whole request
  within ``body_timeout`` of its first byte, however slowly it drips; a late one is answered
  408 and closed (checked every second); over TLS the handshake too must finish within
  ``header_timeout`` of the connect, or the connection is closed (no answer can be sent). Each
  such close is logged with the peer and the reason, a few a minute at most;
- idle kept-alive connections are closed after ``idle_timeout``;
- at most ``max_connections_per_client`` connections from one address (more: 429, closed);
- at most ``max_connections`` in all; at the bound a new connection closes the one idle
  longest (no request in progress), so idle connections can never lock the API out, and only
  when every connection is busy is the new one refused (503).

Every error waitress answers by itself (400 malformed request, 413 body over its limit, 431
headers over its limit, 500) is the JSON error body (docs/interface.md, "Errors";
:class:`JsonErrorTask`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import ssl
import threading
import time
from typing import Any

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask, ThreadedTaskDispatcher

from server.platform.limits import Limits, limits
from server.platform.logrepeat import RepeatFilter
from server.platform.tls import TlsChannelMixin

log = logging.getLogger("pdn.wsgi")


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host`` (a name or an address) and ``port`` (0: any free one).

    Binding before the app exists lets a process learn its own URL first (the display's idle
    page and webhooks carry it) and fail fast on a taken port. Raises OSError."""
    family, kind, proto, _name, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(1024)
    except OSError:
        listener.close()
        raise
    return listener


_CODES = {
    400: "bad-request",
    408: "request-timeout",
    413: "payload-too-large",
    429: "too-many-connections",
    431: "request-header-fields-too-large",
    500: "internal-error",
    501: "not-implemented",
    503: "unavailable",
}
_MESSAGES = {
    400: "The request is not valid HTTP: {detail}.",
    413: "The request body is over this server's limit of {detail}.",
    431: "The request headers are over this server's limit of {detail}.",
    500: "The server failed; the error is logged.",
    501: "This server does not implement that: {detail}.",
}


def error_response(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 error response with the JSON error body, closing the connection."""
    body = (
        json.dumps(
            {"error": _CODES.get(status, "error"), "message": message},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        + "\n"
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


class JsonErrorTask(ErrorTask):
    """waitress's own error answers (400, 413, 431, 500...) as the JSON error body."""

    def execute(self) -> None:
        request: Any = self.request
        error: Any = request.error
        status = int(error.code)
        detail = str(error.body).strip().rstrip(".") or error.reason
        limit = re.fullmatch(r"exceeds max_\w+ of (\d+)", detail)
        if limit:
            detail = f"{limit.group(1)} bytes"
        message = _MESSAGES.get(status, "{detail}.").format(detail=detail)
        body = (
            json.dumps(
                {"error": _CODES.get(status, "error"), "message": message},
                ensure_ascii=False,
                separators=(",", ":"),
            ).encode()
            + b"\n"
        )
        self.status = f"{status} {error.reason}"
        headers: Any = self.response_headers
        headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class GuardedChannel(HTTPChannel):
    """A connection that remembers when its request in progress began (monotonic)."""

    error_task_class = JsonErrorTask
    request_began: float | None = None
    accepted_at = 0.0  # time.monotonic() of the accept

    def received(self, data: bytes) -> bool:
        if self.request is None and data:
            self.request_began = time.monotonic()
        result: bool = super().received(data)
        if self.request is None:
            self.request_began = None
        return result

    def del_channel(self, map: Any = None) -> None:
        server: Any = self.server
        counted = getattr(self, "_fileno", None) in server.active_channels
        super().del_channel(map)
        if counted:
            server.forget_client(self.addr)


class TlsGuardedChannel(TlsChannelMixin, GuardedChannel):
    """A guarded connection over TLS (``server.platform.tls``)."""


class GuardedServer(TcpWSGIServer):
    """waitress's TCP server with request deadlines and connection bounds (module docstring)."""

    channel_class = GuardedChannel

    def __init__(
        self, *args: Any, bounds: Limits, tls: ssl.SSLContext | None = None, **kwargs: Any
    ) -> None:
        self.bounds = bounds
        self.tls = tls
        if tls is not None:
            self.channel_class = TlsGuardedChannel
        self.per_client: dict[str, int] = {}
        self.refused = 0
        self.evicted = 0
        self.timed_out = 0
        # A connection closed for its deadline is logged (a client that gets only an EOF, a TLS
        # handshake cut off, has nothing else to go by), 5 of each kind a minute per server at
        # most: a scanner opening connections by the thousand must not flood the journal.
        self.close_log = RepeatFilter(burst=5, window=60.0)
        super().__init__(*args, **kwargs)

    def _log_close(self, message: str, *args: Any) -> None:
        if not log.isEnabledFor(logging.WARNING):
            return
        record = log.makeRecord(log.name, logging.WARNING, __file__, 0, message, args, None)
        if self.close_log.filter(record):
            log.handle(record)

    def _open(self) -> dict[int, Any]:
        """The open connections (waitress's ``active_channels``), by file descriptor."""
        channels: dict[int, Any] = getattr(self, "active_channels")  # noqa: B009
        return channels

    def forget_client(self, addr: Any) -> None:
        host = _host(addr)
        left = self.per_client.get(host, 0) - 1
        if left > 0:
            self.per_client[host] = left
        else:
            self.per_client.pop(host, None)

    def handle_accept(self) -> None:
        try:
            accepted = self.accept()
            if accepted is None:
                return
            conn, addr = accepted
            self.set_socket_options(conn)
        except OSError:
            return
        addr = self.fix_addr(addr)
        host = _host(addr)
        if self.per_client.get(host, 0) >= self.bounds.max_connections_per_client:
            self._refuse(
                conn, 429, "Too Many Requests",
                f"This client has {self.bounds.max_connections_per_client} connections open"
                " already, the most one client may; reuse one of them.",
            )  # fmt: skip
            return
        if len(self._open()) >= self.bounds.max_connections and not self._evict_idle():
            self._refuse(
                conn, 503, "Service Unavailable",
                "Every connection this server allows is busy; try again in a moment.",
            )  # fmt: skip
            return
        if self.tls is not None:
            try:  # the handshake runs on this loop later (server.platform.tls), never blocking it
                conn = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
            except (ssl.SSLError, OSError):
                with contextlib.suppress(OSError):
                    conn.close()
                return
        self.per_client[host] = self.per_client.get(host, 0) + 1
        channel = self.channel_class(self, conn, addr, self.adj, map=getattr(self, "_map"))  # noqa: B009
        channel.accepted_at = time.monotonic()

    def _refuse(self, conn: socket.socket, status: int, reason: str, message: str) -> None:
        self.refused += 1
        with contextlib.suppress(OSError):
            conn.setblocking(False)
            conn.send(error_response(status, reason, message))
            conn.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            conn.close()

    def _evict_idle(self) -> bool:
        """Close the connection idle longest that has no request in progress; False if none."""
        idle = [
            channel
            for channel in self._open().values()
            if not channel.requests
            and channel.request is None
            and not channel.total_outbufs_len
            and not channel.will_close
        ]
        if not idle:
            return False
        oldest = min(idle, key=lambda channel: channel.last_activity)
        self.evicted += 1
        oldest.handle_close()
        return True

    def maintenance(self, now: Any) -> None:
        """Close idle connections (``channel_timeout``) and requests past their deadline."""
        super().maintenance(now)
        clock = time.monotonic()
        for channel in list(self._open().values()):
            if getattr(channel, "handshaken", True) is False:
                # A TLS handshake is bounded like request headers (a drip-fed handshake too).
                if clock - channel.accepted_at > self.bounds.header_timeout:
                    self.timed_out += 1
                    self._log_close(
                        "closed the connection from %s: its TLS handshake did not finish within"
                        " %g s of the connect (PDN_HEADER_TIMEOUT)",
                        _peer(channel.addr), self.bounds.header_timeout,
                    )  # fmt: skip
                    channel.handle_close()
                continue
            began = channel.request_began
            request = channel.request
            if began is None or request is None or channel.requests or channel.will_close:
                continue
            deadline = (
                self.bounds.body_timeout + _slow_body_allowance(request)
                if request.headers_finished
                else self.bounds.header_timeout
            )
            if clock - began <= deadline:
                continue
            self.timed_out += 1
            what = "request" if request.headers_finished else "request headers"
            variable = "PDN_BODY_TIMEOUT" if request.headers_finished else "PDN_HEADER_TIMEOUT"
            self._log_close(
                "answered 408 and closed the connection from %s: the %s did not arrive within"
                " %g s (%s)",
                _peer(channel.addr), what, deadline, variable,
            )  # fmt: skip
            channel.request = None
            channel.request_began = None
            try:
                channel.write_soon(
                    error_response(
                        408, "Request Timeout", f"The {what} did not arrive within {deadline:g} s."
                    )
                )
                channel.close_when_flushed = True
            except Exception:
                channel.will_close = True

    def stats(self) -> dict[str, int]:
        return {
            "open": len(self._open()),
            "refused": self.refused,
            "evicted": self.evicted,
            "timed-out": self.timed_out,
        }


def _host(addr: Any) -> str:
    return str(addr[0]) if isinstance(addr, tuple) and addr else str(addr)


def _peer(addr: Any) -> str:
    """``host:port`` of a connection's peer (for the log)."""
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr)


#: The largest request body a server takes unless told otherwise (an 8 MiB CDS, and room).
MAX_BODY = 9 << 20
#: A body larger than ``MAX_BODY`` (a server told to take one: the scheduler's media uploads)
#: gets one more second of ``PDN_BODY_TIMEOUT`` for each of these bytes past it.
LARGE_BODY_RATE = 1 << 20


def _slow_body_allowance(request: Any) -> float:
    length = getattr(request, "content_length", 0) or 0
    return max(0, length - MAX_BODY) / LARGE_BODY_RATE


class WsgiServer:
    """One listening waitress server."""

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        sock: socket.socket | None = None,
        threads: int = 8,
        name: str = "api",
        bounds: Limits | None = None,
        tls: ssl.SSLContext | None = None,
        max_body: int = MAX_BODY,
    ):
        """Listen on ``host``:``port``, or on ``sock`` when one was bound already (:func:`bind`).
        ``max_body``: the largest request body taken (waitress answers 413 past it).

        The socket is always bound first, so a taken port raises OSError before waitress has
        made any thread or pipe that would then leak. ``tls``: serve HTTPS
        (``server.platform.tls``)."""
        self.name = name
        self.tls = tls
        if sock is None:
            sock = bind(host, port)
        self.bounds = bounds or limits()
        adj = Adjustments(
            sockets=[sock],
            threads=threads,
            ident="pdn",
            # Idle kept-alive connections are closed after this; slow requests are bounded
            # by GuardedServer's deadlines, checked every second.
            channel_timeout=self.bounds.idle_timeout,
            cleanup_interval=1,
            # GuardedServer keeps the bound itself (closing idle connections for new ones);
            # waitress's own limit, which stops accepting altogether, is never reached.
            connection_limit=self.bounds.max_connections + 64,
            # Bodies beyond the largest we accept (an 8 MiB CDS, unless told) are cut off early.
            max_request_body_size=max_body,
            clear_untrusted_proxy_headers=True,
            asyncore_use_poll=True,
        )
        dispatcher = ThreadedTaskDispatcher()
        dispatcher.set_thread_count(adj.threads)
        self._server: Any = GuardedServer(
            app,
            {},
            True,
            sock,
            dispatcher=dispatcher,
            adj=adj,
            bind_socket=False,
            sockinfo=(sock.family, sock.type, sock.proto, sock.getsockname()),
            bounds=self.bounds,
            tls=tls,
        )
        self._thread: threading.Thread | None = None

    def stats(self) -> dict[str, int]:
        """Open connections, and how many were refused, evicted for others, or timed out."""
        stats: dict[str, int] = self._server.stats()
        return stats

    @property
    def host(self) -> str:
        return str(self._server.effective_host)

    @property
    def port(self) -> int:
        return int(self._server.effective_port)

    @property
    def url(self) -> str:
        host = self.host
        if ":" in host:
            host = f"[{host}]"
        return f"{'https' if self.tls is not None else 'http'}://{host}:{self.port}"

    def start(self) -> WsgiServer:
        """Serve in a daemon thread (the display's GUI owns the main thread)."""
        self._thread = threading.Thread(target=self.serve_forever, name=f"wsgi-{self.name}")
        self._thread.daemon = True
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        log.info("%s listening on %s", self.name, self.url)
        try:
            self._server.run()
        except OSError:
            # close() from another thread ends the loop with a closed-socket error.
            log.debug("%s server loop ended", self.name)

    def stop(self) -> None:
        """Stop at once: close the listener and every open connection, end the workers.

        Closing only the listener would leave kept-alive connections answering (and the loop
        running) for seconds; the closing runs on the server's own loop thread, through the
        trigger, because waitress's socket map is not thread-safe.
        """
        if self._thread is None or not self._thread.is_alive():
            self._close_everything()
            return
        try:
            self._server.trigger.pull_trigger(self._close_everything)
        except OSError as error:
            # The wake-up pipe is gone (seen once in a long test run: EBADF); close from here.
            log.warning(
                "%s: cannot wake the server loop (%s); closing from this thread", self.name, error
            )
            self._close_everything()
        self._thread.join(timeout=5)

    def _close_everything(self) -> None:
        server = self._server
        for dispatcher in list(server._map.values()):
            if dispatcher is not server and dispatcher is not server.trigger:
                # handle_close, not close: it also closes the connection's output buffers,
                # which hold a large answer in a temporary file; and a body half received.
                request = getattr(dispatcher, "request", None)
                with contextlib.suppress(OSError):
                    if request is not None:
                        request.close()
                    dispatcher.handle_close()
        with contextlib.suppress(OSError):
            server.close()  # the listener and the trigger; the loop ends with an empty map
        server.task_dispatcher.shutdown(cancel_pending=True, timeout=2)
