"""The PostgreSQL outbox's HTTP client (server/platform/webhookpost.py) against an HTTP/1.1
page server that keeps connections open: kept-alive connections, a kept connection closed by
the receiver, long answers, Basic authorisation from the URI, failures as results, proxies
through httpx."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable

import pytest

from server.platform.webhookpost import MAX_ANSWER, Delivery, Poster
from tests.support.pages import PageServer, Reply, Request
from tests.support.ports import free_port

pytestmark = pytest.mark.usefixtures("no_proxy_env")


def receiver() -> PageServer:
    """An HTTP/1.1 server that keeps connections open and answers 204, except: /close (204,
    then closes the connection), /big (200 and a body longer than MAX_ANSWER), /unavailable
    (503), /silent (no answer within any sender's timeout here)."""
    server = PageServer(default=Reply(204), keep_alive=True)
    server.reply("/close", Reply(204, headers={"Connection": "close"}))
    server.reply("/big", Reply(200, b"x" * (MAX_ANSWER + 10)))
    server.reply("/unavailable", Reply(503))
    server.reply("/silent", Reply(204, delay=5.0))
    return server


def headers(request: Request) -> dict[str, str]:
    """The request's headers by their lower-case names."""
    return {name.lower(): value for name, value in request.headers.items()}


def run(scenario: Callable[[Poster, PageServer], Awaitable[None]]) -> PageServer:
    """Run ``scenario`` with a Poster against a fresh ``receiver()``; the receiver, closed,
    with what it was sent."""

    async def main(server: PageServer) -> None:
        poster = Poster()
        try:
            await scenario(poster, server)
        finally:
            await poster.aclose()

    with receiver() as server:
        asyncio.run(main(server))
    return server


def test_posts_to_one_receiver_share_a_kept_alive_connection() -> None:
    results: list[Delivery] = []

    async def scenario(poster: Poster, server: PageServer) -> None:
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
    assert len({r.client for r in server.requests}) == 1  # one connection
    first = headers(server.requests[0])
    assert first["host"] == f"127.0.0.1:{server.port}"
    assert first["user-agent"] == "pdn-outbox"
    assert first["content-type"] == "text/plain" and first["x-pdn-event-id"] == "e0"


def test_user_and_password_in_the_uri_are_sent_as_basic_authorisation() -> None:
    async def scenario(poster: Poster, server: PageServer) -> None:
        uri = f"http://display:p%40ss@127.0.0.1:{server.port}/hook"
        assert (await poster.post(uri, b"x", {}, timeout=5.0)).ok

    (request,) = run(scenario).requests
    sent = headers(request)
    assert sent["authorization"] == "Basic " + base64.b64encode(b"display:p@ss").decode()
    assert sent["host"].startswith("127.0.0.1:")  # no credentials in Host


def test_a_kept_connection_the_receiver_closed_is_replaced() -> None:
    async def scenario(poster: Poster, server: PageServer) -> None:
        base = f"http://127.0.0.1:{server.port}"
        assert (await poster.post(f"{base}/close", b"1", {}, timeout=5.0)).ok
        await asyncio.sleep(0.1)  # the receiver's close arrives while the connection is kept
        assert (await poster.post(f"{base}/hook", b"2", {}, timeout=5.0)).ok

    server = run(scenario)
    assert [r.body for r in server.requests] == [b"1", b"2"]
    assert server.requests[0].client != server.requests[1].client  # a new connection


def test_a_long_answer_counts_by_its_status_and_its_connection_is_dropped() -> None:
    async def scenario(poster: Poster, server: PageServer) -> None:
        base = f"http://127.0.0.1:{server.port}"
        assert await poster.post(f"{base}/big", b"1", {}, timeout=5.0) == Delivery(True, 200, None)
        assert (await poster.post(f"{base}/hook", b"2", {}, timeout=5.0)).ok

    server = run(scenario)
    assert len(server.requests) == 2
    assert server.requests[0].client != server.requests[1].client  # a new connection


def test_failures_are_results_that_say_what_went_wrong() -> None:
    outcomes: dict[str, Delivery] = {}

    async def scenario(poster: Poster, server: PageServer) -> None:
        base = f"http://127.0.0.1:{server.port}"
        outcomes["503"] = await poster.post(f"{base}/unavailable", b"", {}, timeout=5.0)
        outcomes["silent"] = await poster.post(f"{base}/silent", b"", {}, timeout=0.3)
        outcomes["scheme"] = await poster.post("ftp://127.0.0.1/x", b"", {}, timeout=5.0)
        outcomes["header"] = await poster.post(f"{base}/h", b"", {"X-Bad": "a\r\nb"}, timeout=5.0)
        port = free_port()  # nothing listens there
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

    async def scenario(poster: Poster, server: PageServer) -> None:
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
