"""The PostgreSQL outbox's HTTP client (server/platform/webhookpost.py) against a small asyncio
HTTP/1.1
server of the test's own: kept-alive connections, a kept connection closed by the receiver,
long answers, Basic authorisation from the URI, failures as results, proxies through httpx."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from server.platform.webhookpost import MAX_ANSWER, Delivery, Poster
from tests.support.pages import PageServer


@dataclass
class Request:
    connection: int
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    """Answers 204, except: /close (204, then closes the connection), /big (200 and a body
    longer than MAX_ANSWER), /unavailable (503), /silent (never answers)."""

    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = {
                    name.strip().lower(): value.strip()
                    for name, value in (line.split(":", 1) for line in lines[1:] if ":" in line)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests.append(Request(number, path, headers, body))
                if path == "/silent":
                    await reader.read()  # until the sender gives up
                    return
                if path == "/big":
                    answer = b"x" * (MAX_ANSWER + 10)
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(answer))
                    writer.write(answer)
                else:
                    status = b"503 Unavailable" if path == "/unavailable" else b"204 No Content"
                    writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                if path == "/close":
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def run(scenario: Callable[[Poster, Server], Awaitable[None]]) -> Server:
    server = Server()

    async def main() -> None:
        listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        server.port = listening.sockets[0].getsockname()[1]
        poster = Poster()
        try:
            await scenario(poster, server)
        finally:
            await poster.aclose()
            listening.close()
            await listening.wait_closed()

    asyncio.run(main())
    return server


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def test_posts_to_one_receiver_share_a_kept_alive_connection() -> None:
    results: list[Delivery] = []

    async def scenario(poster: Poster, server: Server) -> None:
        for n in range(3):
            results.append(
                await poster.post(
                    f"http://127.0.0.1:{server.port}/hook?n={n}",
                    f"{n}".encode(),
                    {"Content-Type": "text/plain", "X-PDN-Event-Id": f"e{n}"},
                    timeout=5.0,
                )
            )

    server = run(scenario)
    assert results == [Delivery(True, 204, None)] * 3
    assert [r.body for r in server.requests] == [b"0", b"1", b"2"]
    assert [r.path for r in server.requests] == ["/hook?n=0", "/hook?n=1", "/hook?n=2"]
    assert {r.connection for r in server.requests} == {1}
    first = server.requests[0].headers
    assert first["host"] == f"127.0.0.1:{server.port}"
    assert first["user-agent"] == "pdn-outbox"
    assert first["content-type"] == "text/plain" and first["x-pdn-event-id"] == "e0"


def test_user_and_password_in_the_uri_are_sent_as_basic_authorisation() -> None:
    async def scenario(poster: Poster, server: Server) -> None:
        uri = f"http://display:p%40ss@127.0.0.1:{server.port}/hook"
        assert (await poster.post(uri, b"x", {}, timeout=5.0)).ok

    (request,) = run(scenario).requests
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"display:p@ss").decode()
    assert request.headers["host"].startswith("127.0.0.1:")  # no credentials in Host


def test_a_kept_connection_the_receiver_closed_is_replaced() -> None:
    async def scenario(poster: Poster, server: Server) -> None:
        base = f"http://127.0.0.1:{server.port}"
        assert (await poster.post(f"{base}/close", b"1", {}, timeout=5.0)).ok
        await asyncio.sleep(0.1)  # the receiver's close arrives while the connection is kept
        assert (await poster.post(f"{base}/hook", b"2", {}, timeout=5.0)).ok

    server = run(scenario)
    assert [(r.connection, r.body) for r in server.requests] == [(1, b"1"), (2, b"2")]


def test_a_long_answer_counts_by_its_status_and_its_connection_is_dropped() -> None:
    async def scenario(poster: Poster, server: Server) -> None:
        base = f"http://127.0.0.1:{server.port}"
        assert await poster.post(f"{base}/big", b"1", {}, timeout=5.0) == Delivery(True, 200, None)
        assert (await poster.post(f"{base}/hook", b"2", {}, timeout=5.0)).ok

    server = run(scenario)
    assert [r.connection for r in server.requests] == [1, 2]


def test_failures_are_results_that_say_what_went_wrong() -> None:
    outcomes: dict[str, Delivery] = {}

    async def scenario(poster: Poster, server: Server) -> None:
        base = f"http://127.0.0.1:{server.port}"
        outcomes["503"] = await poster.post(f"{base}/unavailable", b"", {}, timeout=5.0)
        outcomes["silent"] = await poster.post(f"{base}/silent", b"", {}, timeout=0.3)
        outcomes["scheme"] = await poster.post("ftp://127.0.0.1/x", b"", {}, timeout=5.0)
        outcomes["header"] = await poster.post(f"{base}/h", b"", {"X-Bad": "a\r\nb"}, timeout=5.0)
        closed = asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        probe = await closed
        port = probe.sockets[0].getsockname()[1]
        probe.close()
        await probe.wait_closed()
        outcomes["refused"] = await poster.post(f"http://127.0.0.1:{port}/", b"", {}, timeout=5.0)

    run(scenario)
    assert outcomes["503"] == Delivery(False, 503, "HTTP 503")
    assert outcomes["silent"] == Delivery(False, None, "no answer within 0.3 s")
    assert not outcomes["scheme"].ok and "cannot POST" in str(outcomes["scheme"].error)
    assert not outcomes["header"].ok and outcomes["header"].status is None
    assert not outcomes["refused"].ok and "Refused" in str(outcomes["refused"].error)


def test_a_proxy_in_the_environment_sends_through_httpx(
    peer: PageServer, no_proxy_env: pytest.MonkeyPatch
) -> None:
    no_proxy_env.setenv("HTTP_PROXY", peer.url)

    async def scenario(poster: Poster, server: Server) -> None:
        # Only the proxy can reach this name (.invalid never resolves).
        assert (await poster.post("http://subscriber.invalid/hook", b"via", {}, timeout=5.0)).ok

    assert run(scenario).requests == []
    (request,) = peer.received()
    assert request.path == "http://subscriber.invalid/hook"  # absolute form: sent to a proxy
    assert request.body == b"via"


def test_without_a_proxy_nothing_imports_httpx() -> None:
    # httpx brings its command line's rich and pygments when they are installed: 11 MiB of a
    # display's memory for a client it uses only through a proxy.
    script = (
        "import sys, player.app, server.platform.standalone, server.scheduler.service;"
        "sys.exit('httpx' in sys.modules)"
    )
    environment = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    done = subprocess.run([sys.executable, "-c", script], env=environment, check=False)
    assert done.returncode == 0, "httpx was imported"
