"""A small HTTP server on loopback that records what it is sent (webhook subscribers, fake
displays), and the ``peer`` fixture (a pytest plugin)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Route:
    status: int = 200
    body: Any = field(default_factory=dict)
    delay: float = 0.0


class HttpPeer:
    """A small HTTP server on 127.0.0.1 (or ``host``, another loopback address: another
    machine) that records every request and answers per path.

    It stands in for webhook subscribers and for displays (``GET /``, ``POST /schedule``).
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.requests: list[Received] = []
        self.routes: dict[tuple[str, str], Route] = {}
        self._lock = threading.Lock()
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                path = self.path.split("?")[0]
                with peer._lock:
                    peer.requests.append(
                        Received(self.command, self.path, dict(self.headers.items()), body)
                    )
                    route = peer.routes.get((self.command, path), Route())
                if route.delay:
                    time.sleep(route.delay)
                payload = json.dumps(route.body).encode()
                try:
                    self.send_response(route.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass

            do_GET = do_POST = do_DELETE = do_PUT = _handle  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def route(
        self, method: str, path: str, status: int = 200, body: Any = None, delay: float = 0.0
    ) -> None:
        self.routes[(method, path)] = Route(status, {} if body is None else body, delay)

    def received(self, path: str | None = None, method: str = "POST") -> list[Received]:
        with self._lock:
            return [
                r
                for r in self.requests
                if r.method == method and (path is None or r.path.split("?")[0] == path)
            ]

    def wait_for(
        self, count: int, path: str | None = None, timeout: float = 15.0, method: str = "POST"
    ) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.received(path, method)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise AssertionError(
            f"expected {count} {method} {path or ''} within {timeout} s, got "
            f"{len(self.received(path, method))}"
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def peer() -> Iterator[HttpPeer]:
    server = HttpPeer()
    yield server
    server.close()


def wait_until(predicate: Callable[[], Any], timeout: float = 15.0, step: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(step)
