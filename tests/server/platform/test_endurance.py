"""Every segment under stress: floods, hostile JSON, the HTTP server's own errors, bounded
subscriptions and protected reads, against real servers on 127.0.0.1 and raw sockets."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask, Response

from server.platform.http import create_base_app, json_response, read_json_body, require_token
from server.platform.limits import Limits, limits
from server.platform.outbox import Outbox
from server.platform.wsgi import WsgiServer
from tests.support import floods
from tests.support.factories import started_by
from tests.support.floods import connect_from, cut_off_count, drip_fed, read_all
from tests.support.pages import HookReceiver
from tests.support.ports import free_port
from tests.support.scheduler import start as start_scheduler
from tests.support.waiting import wait_until


def echo_app(token: str | None = None) -> Flask:
    app = create_base_app("test")
    require_token(app, lambda: token, service="widget")

    @app.get("/ping")
    def ping() -> Response:
        return json_response({"ok": True})

    @app.post("/echo")
    def echo() -> Response:
        return json_response({"got": read_json_body()})

    return app


@pytest.fixture
def serve() -> Iterator[Callable[..., WsgiServer]]:
    def start(app: Flask, **kwargs: Any) -> WsgiServer:
        return WsgiServer(app, "127.0.0.1", 0, **kwargs).start()

    yield from started_by(start, WsgiServer.stop)


def raw(port: int, data: bytes, *, wait: float = 5.0) -> bytes:
    """Send ``data`` on a new connection; everything answered until the server closes."""
    with socket.create_connection(("127.0.0.1", port)) as conn:
        # The server may answer and close before the whole body is sent.
        with contextlib.suppress(OSError):
            conn.sendall(data)
        return read_all(conn, wait)


def parse(answer: bytes) -> tuple[int, dict[str, str], Any]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", len(body)))
    return int(lines[0].split()[1]), headers, json.loads(body[:length])


# -- 4: the HTTP server's own errors are the JSON error body ------------------------------------


@pytest.mark.parametrize(
    ("request_bytes", "status", "error"),
    [
        (
            b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n",
            431,
            "request-header-fields-too-large",
        ),
        (
            b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 30000000\r\n\r\n" + b"a" * 65536,
            413,
            "payload-too-large",
        ),
        (
            b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + (b"100000\r\n" + b"a" * 0x100000 + b"\r\n") * 10,
            413,
            "payload-too-large",
        ),
        (b"NONSENSE\r\n\r\n", 400, "bad-request"),
    ],
    ids=["header-1MB", "body-20MB", "chunked-10MB", "malformed"],
)
def test_the_servers_own_errors_are_json(
    serve: Callable[..., WsgiServer], request_bytes: bytes, status: int, error: str
) -> None:
    server = serve(echo_app())
    got, headers, body = parse(raw(server.port, request_bytes))
    assert got == status
    assert headers["content-type"] == "application/json"
    assert body["error"] == error
    assert body["message"]


# -- 3: nesting depth bounded before parsing ----------------------------------------------------


@pytest.mark.parametrize("opener", [b"[", b'{"a":'])
def test_deep_nesting_is_400_not_500(serve: Callable[..., WsgiServer], opener: bytes) -> None:
    server = serve(echo_app())
    closer = b"]" if opener == b"[" else b"}"
    for content_type in ("application/json", None):
        headers = {"Content-Type": content_type} if content_type else {}
        answer = requests.post(
            server.url + "/echo",
            data=opener * 100_000 + closer * 100_000,
            headers=headers,
            timeout=10,
        )
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == "too-deep"
    ok = requests.post(server.url + "/echo", json=[[[1]], {"s": "[[[[[[[["}], timeout=10)
    assert ok.status_code == 200


def test_deep_nesting_on_the_schedulers_displays(tmp_path: Path) -> None:
    service = start_scheduler(tmp_path, tmp_path / "schedules")
    try:
        for method in ("GET", "POST"):
            answer = requests.request(
                method,
                service.url + "/displays",
                data=b"[" * 100_000 + b"]" * 100_000,
                headers={"Content-Type": "application/json"},
                timeout=10,
            )
            assert answer.status_code == 400, (method, answer.text)
            assert answer.json()["error"] == "too-deep"
    finally:
        service.stop()


# -- 2: floods ----------------------------------------------------------------------------------


def probe(port: int) -> float:
    """Seconds for one GET on a new connection from another client address (127.0.0.2)."""
    return floods.probe(port, "/ping")


def test_idle_and_drip_fed_floods_leave_the_api_answering(
    serve: Callable[..., WsgiServer],
) -> None:
    bounds = Limits(max_connections=128, header_timeout=2.0)
    server = serve(echo_app(), bounds=bounds)
    idle = [connect_from(f"127.0.1.{i % 20 + 1}", server.port) for i in range(300)]
    drip = [connect_from(f"127.0.2.{i % 10 + 1}", server.port) for i in range(100)]
    for conn in drip:
        conn.sendall(b"GET /ping HTTP/1.1\r\n")
    try:
        with drip_fed(drip):
            latencies = [probe(server.port) for _ in range(20)]
            assert max(latencies) < 1.0, latencies
            # Drip-fed connections are answered 408 and closed after the header deadline.
            assert cut_off_count(drip, bounds.header_timeout + 5) == len(drip)
            assert server.stats()["timed-out"] >= 1
            assert server.stats()["evicted"] >= 1  # 300 idle > 128: the idle longest made room
            assert probe(server.port) < 1.0
    finally:
        for conn in idle + drip:
            conn.close()


def test_one_client_gets_at_most_its_share(serve: Callable[..., WsgiServer]) -> None:
    server = serve(echo_app(), bounds=Limits(max_connections_per_client=8))
    held = [connect_from("127.0.3.1", server.port) for _ in range(8)]
    try:
        status, _headers, body = parse(raw_from("127.0.3.1", server.port))
        assert status == 429
        assert body["error"] == "too-many-connections"
        assert probe(server.port) < 1.0  # another client is not affected
    finally:
        for conn in held:
            conn.close()


def raw_from(source: str, port: int) -> bytes:
    with connect_from(source, port) as conn:
        return read_all(conn, 5)


def test_limits_come_from_the_environment() -> None:
    got = limits({"PDN_MAX_CONNECTIONS": "50", "PDN_HEADER_TIMEOUT": "2.5"})
    assert (got.max_connections, got.header_timeout) == (50, 2.5)
    with pytest.raises(ValueError, match="PDN_MAX_BACKLOG"):
        limits({"PDN_MAX_BACKLOG": "0"})
    # A display's [screen] timeout-factor stretches the default header deadline (the TLS
    # handshake's too), never one set in the environment.
    assert limits({}, slowness=20).header_timeout == 200.0
    assert limits({"PDN_HEADER_TIMEOUT": "2.5"}, slowness=20).header_timeout == 2.5
    assert limits({}, slowness=20).body_timeout == Limits().body_timeout


# -- 6: bounded subscriptions -------------------------------------------------------------------


@pytest.fixture
def dead_port() -> int:
    return free_port()  # nothing listens there afterwards


@pytest.fixture
def failing_box(tmp_path: Path) -> Iterator[Callable[..., Outbox]]:
    """``failing_box(**options)``: an outbox in ``tmp_path/o.db`` that retries every 0.05 to
    0.1 s, with ``options`` over that, started; stopped at the end of the test."""

    def make(**options: Any) -> Outbox:
        box = Outbox(
            tmp_path / "o.db", name="test", **{"first_retry": 0.05, "max_backoff": 0.1, **options}
        )
        box.start()
        return box

    yield from started_by(make, Outbox.stop)


def test_subscriptions_per_resource_are_capped(tmp_path: Path) -> None:
    box = Outbox(tmp_path / "o.db", name="test", max_subscriptions=3)
    try:
        for n in range(3):
            assert box.subscribe("t", f"http://127.0.0.1:9/{n}")
        assert box.subscribe("t", "http://127.0.0.1:9/0") is False  # idempotent, no error
        from server.platform.limits import SubscriptionLimitError

        with pytest.raises(SubscriptionLimitError):
            box.subscribe("t", "http://127.0.0.1:9/3")
        assert box.subscribe("other", "http://127.0.0.1:9/3")  # per resource
    finally:
        box.stop()


def test_dead_subscribers_expire_and_backlogs_are_bounded(
    failing_box: Callable[..., Outbox], dead_port: int
) -> None:
    box = failing_box(timeout=0.5, give_up_after=1.5, max_backlog=5)
    dead = f"http://127.0.0.1:{dead_port}/hook"
    box.subscribe("t", dead)
    for n in range(50):
        box.publish("t", str(n).encode(), "text/plain")
    assert box.stats()["pending-events"] <= 5
    assert box.stats()["dropped-events"] >= 45
    wait_until(lambda: box.subscribers("t") == [], timeout=10)
    assert box.stats()["pending-events"] == 0
    assert box.stats()["expired-subscriptions"] == 1


def test_a_dead_sensor_subscriber_keeps_the_newest_reading_alone(
    failing_box: Callable[..., Outbox], dead_port: int
) -> None:
    receiver = HookReceiver(port=dead_port, answer=lambda n: 503)
    box = failing_box(give_up_after=30)
    try:
        box.subscribe("sensor", receiver.url())
        box.publish("sensor", b"0", "application/json", latest_only=True)
        # A second attempt comes only after the first failure was stored: now it is failing
        # (after the first attempt alone, readings published before the outbox stored the 503
        # would still queue behind it).
        wait_until(lambda: receiver.attempts >= 2)
        for n in range(1, 200):
            box.publish("sensor", str(n).encode(), "application/json", latest_only=True)
        assert box.stats()["pending-events"] == 1
        receiver.answer = lambda n: 200  # it comes back: it gets the newest reading alone
        wait_until(lambda: receiver.bodies() != [])
        time.sleep(0.3)
        # The newest reading, after at most the one POST that was in flight when it came back.
        assert receiver.bodies()[-1] == b"199"
        assert len(receiver.bodies()) <= 2
    finally:
        receiver.close()


def test_expiry_survives_collapsed_backlogs(
    failing_box: Callable[..., Outbox], dead_port: int
) -> None:
    """Collapsing keeps since-when the subscriber fails: it still expires on time."""
    box = failing_box(timeout=0.5, give_up_after=1.0)
    box.subscribe("sensor", f"http://127.0.0.1:{dead_port}/hook")

    def expired() -> bool:
        """Gone; until then, one more reading for it (collapsed into the one pending)."""
        if not box.subscribers("sensor"):
            return True
        box.publish("sensor", b"1", "application/json", latest_only=True)
        return False

    wait_until(expired, timeout=10, what="the failing subscriber expired", step=0.05)
    assert box.subscribers("sensor") == []


# -- 7: protected reads, WWW-Authenticate --------------------------------------------------------


def test_401_says_www_authenticate_and_names_the_service(serve: Callable[..., WsgiServer]) -> None:
    server = serve(echo_app("s3cret"))
    answer = requests.post(server.url + "/echo", json={}, timeout=10)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert "This widget needs" in answer.json()["message"]
    assert requests.get(server.url + "/ping", timeout=10).status_code == 200


def test_reads_can_need_the_token(
    serve: Callable[..., WsgiServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PDN_PROTECT_READS", "true")
    server = serve(echo_app("s3cret"))
    answer = requests.get(server.url + "/ping", timeout=10)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert "for reading too" in answer.json()["message"]
    good = {"Authorization": "Bearer s3cret"}
    assert requests.get(server.url + "/ping", headers=good, timeout=10).status_code == 200
