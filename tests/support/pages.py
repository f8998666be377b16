"""A loopback page server: serves the pages, files and handlers a test gives it, on 127.0.0.1
or another loopback address (another machine, to the code under test), and records every
request it is sent.

It stands in for a content server (pages and files a display shows), webhook subscribers,
displays a segment talks to (``route`` answers JSON) and anything else a test must watch
from the other end of a connection.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

from tests.support.waiting import wait_for_value


@dataclass
class Request:
    """One request the server was sent."""

    method: str
    path: str  # with its query string
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)
    client: tuple[str, int] = ("", 0)  # the (address, port) it came from: one per connection

    @property
    def route(self) -> str:
        """The path without its query string."""
        return self.path.split("?")[0]

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    """What the server answers: ``delay`` seconds first; ``drop`` closes the connection
    without an answer (a server that died mid-request). A ``body`` given in chunks is sent
    chunk by chunk, each flushed (the iterator may wait between them); its headers must then
    say its Content-Length."""

    status: int = 200
    body: bytes | Iterable[bytes] = b""
    content_type: str = "text/html"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False


def json_reply(body: Any, status: int = 200, delay: float = 0.0) -> Reply:
    return Reply(status, json.dumps(body).encode(), "application/json", delay=delay)


Handler = Callable[[Request], Reply | None]
NOT_FOUND = Reply(404, b"not found", "text/plain")


class PageServer:
    """An HTTP server on ``host`` (a loopback address) in threads of its own.

    Answers, first match wins: a reply set for the method and path, then for the path (any
    method), then the handlers in the order added (the first that returns a reply), then
    ``default`` (404 unless given). ``keep_alive``: HTTP/1.1 connections that stay open, as a
    real web server's; otherwise each answer closes its connection.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        default: Reply = NOT_FOUND,
        keep_alive: bool = False,
    ) -> None:
        self.requests: list[Request] = []
        self.default = default
        self._replies: dict[tuple[str | None, str], Reply] = {}
        self._handlers: list[Handler] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer((host, port), self._handler_class(keep_alive))
        self.server.daemon_threads = True
        self.host = host
        self.port = int(self.server.server_address[1])
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, args=(0.05,), name=f"pages-{self.port}", daemon=True
        )
        self._thread.start()
        self._closed = False

    # -- what it serves ----------------------------------------------------------------------

    def page(
        self,
        path: str,
        body: bytes | str,
        content_type: str = "text/html",
        status: int = 200,
        method: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> str:
        """Serve ``body`` at ``path``; returns its URL."""
        data = body.encode() if isinstance(body, str) else body
        self.reply(path, Reply(status, data, content_type, dict(headers or {})), method)
        return self.url + path

    def route(
        self, method: str, path: str, status: int = 200, body: Any = None, delay: float = 0.0
    ) -> None:
        """Answer ``method path`` with ``body`` as JSON (``{}`` if None)."""
        self.reply(path, json_reply({} if body is None else body, status, delay), method)

    def reply(self, path: str, reply: Reply, method: str | None = None) -> None:
        with self._lock:
            self._replies[(method, path)] = reply

    def handle(self, handler: Handler) -> None:
        """Ask ``handler`` for the requests no set reply answers (None: the next one)."""
        with self._lock:
            self._handlers.append(handler)

    # -- what it was sent --------------------------------------------------------------------

    def received(self, path: str | None = None, method: str | None = "POST") -> list[Request]:
        """The requests for ``path`` (any path if None) with ``method`` (any if None)."""
        with self._lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and (path is None or r.route == path)
            ]

    def wait_for(
        self,
        count: int,
        path: str | None = None,
        timeout: float = 15.0,
        method: str | None = "POST",
    ) -> list[Request]:
        """The requests ``received`` lists, once there are ``count`` of them."""
        return wait_for_value(
            lambda: self.received(path, method),
            lambda found: len(found) >= count,
            timeout,
            f"{count} {method or 'requests'} {path or ''} at {self.url}",
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.server.shutdown()
            self.server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the HTTP side -----------------------------------------------------------------------

    def _answer(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            set_reply = self._replies.get((request.method, request.route)) or self._replies.get(
                (None, request.route)
            )
            handlers = list(self._handlers)
        if set_reply is not None:
            return set_reply
        for handler in handlers:
            reply = handler(request)
            if reply is not None:
                return reply
        return self.default

    def _handler_class(self, keep_alive: bool) -> type[BaseHTTPRequestHandler]:
        pages = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = Request(
                    self.command, self.path, dict(self.headers.items()), body,
                    client=self.client_address[:2],
                )  # fmt: skip
                reply = pages._answer(request)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.drop:
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.close()
                    return
                # The client may have gone (a renderer drops loads it replaced): no traceback.
                chunks = [reply.body] if isinstance(reply.body, bytes) else reply.body
                with contextlib.suppress(OSError):
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    if isinstance(reply.body, bytes):
                        self.send_header("Content-Length", str(len(reply.body)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if self.command == "HEAD":
                        return
                    for chunk in chunks:
                        self.wfile.write(chunk)
                        self.wfile.flush()

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _serve  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return _Handler


class HookReceiver:
    """A webhook subscriber on a page server: records each POST it acknowledges (2xx);
    ``answer(n)`` gives the status of the n-th attempt, ``delay`` slows every answer."""

    def __init__(
        self, port: int = 0, answer: Callable[[int], int] = lambda n: 200, delay: float = 0.0
    ) -> None:
        self.received: list[dict[str, Any]] = []
        self.attempts = 0
        self.answer = answer
        self.delay = delay
        self.lock = threading.Lock()
        self.pages = PageServer(port=port)
        self.pages.handle(self._hook)
        self.port = self.pages.port

    def _hook(self, request: Request) -> Reply | None:
        if request.method != "POST":
            return None
        with self.lock:
            self.attempts += 1
            status = self.answer(self.attempts)
        if 200 <= status < 300:
            with self.lock:
                self.received.append(
                    {
                        "path": request.path,
                        "event-id": request.headers.get("X-PDN-Event-Id"),
                        "topic": request.headers.get("X-PDN-Topic"),
                        "content-type": request.headers.get("Content-Type"),
                        "authorization": request.headers.get("Authorization"),
                        "body": request.body,
                        "at": time.monotonic(),
                    }
                )
        return Reply(status, delay=self.delay)

    def url(self, path: str = "/hook") -> str:
        return f"{self.pages.url}{path}"

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [r["body"] for r in self.received]

    def close(self) -> None:
        self.pages.close()


#: A small green page with a heading: what a display shows when the content does not matter.
GREEN_PAGE = b"<!doctype html><html><body style='background:#0a0'><h1>hello</h1></body></html>"


def one_page(body: bytes = GREEN_PAGE, host: str = "127.0.0.1") -> PageServer:
    """A page server that answers ``body`` (HTML) at every path: a content server."""
    return PageServer(host, default=Reply(200, body, "text/html"))
