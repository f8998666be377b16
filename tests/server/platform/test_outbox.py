"""The outbox's HTTP client (httpx): kept-alive connections and proxies from the environment.
Delivery semantics are tested in tests/server/platform/test_webhooks.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from server.platform.outbox import Outbox
from tests.support.pages import PageServer
from tests.support.waiting import wait_until


class Recorder:
    """An HTTP/1.1 server (keeps connections open) that records what it is sent."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with recorder.lock:
                    recorder.requests.append(
                        {
                            "peer": self.client_address,
                            "user-agent": self.headers.get("User-Agent"),
                            "body": body,
                        }
                    )
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def seen(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.requests)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    made = Recorder()
    yield made
    made.close()


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def test_events_to_one_subscriber_share_a_kept_alive_connection(
    tmp_path: Path, recorder: Recorder, no_proxy_env: pytest.MonkeyPatch
) -> None:
    box = Outbox(tmp_path / "o.db", name="test")
    box.start()
    try:
        box.subscribe("t", f"http://127.0.0.1:{recorder.port}/hook")
        for n in range(3):
            box.publish("t", str(n).encode(), "text/plain")
        wait_until(lambda: len(recorder.seen()) == 3)
    finally:
        box.stop()
    seen = recorder.seen()
    assert [r["body"] for r in seen] == [b"0", b"1", b"2"]
    assert len({r["peer"] for r in seen}) == 1  # one connection for the three
    assert {r["user-agent"] for r in seen} == {"pdn-outbox"}


def test_proxy_from_the_environment_is_used(
    tmp_path: Path, peer: PageServer, no_proxy_env: pytest.MonkeyPatch
) -> None:
    no_proxy_env.setenv("HTTP_PROXY", peer.url)
    box = Outbox(tmp_path / "o.db", name="test")
    box.start()
    try:
        # Only the proxy can reach this name (.invalid never resolves).
        box.subscribe("t", "http://subscriber.invalid/hook")
        box.publish("t", b"via proxy", "text/plain")
        wait_until(lambda: box.stats()["pending-events"] == 0)
    finally:
        box.stop()
    (request,) = peer.received()
    assert request.path == "http://subscriber.invalid/hook"  # absolute form: sent to a proxy
    assert request.headers["Host"] == "subscriber.invalid"
    assert request.body == b"via proxy"
