"""HTTPS on waitress's loop (server/platform/tls.py): a real server on loopback, real TLS
clients, the certificate pinned by fingerprint, and the flood guards kept over TLS."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from flask import Flask, Response, request

from server.platform.http import create_base_app, json_response, read_raw_body
from server.platform.limits import Limits
from server.platform.tls import ensure_certificate, fingerprint, server_context
from server.platform.webhookpost import Delivery, Poster
from server.platform.wsgi import WsgiServer
from tests.support.floods import connect_from, cut_off_count, drip_fed, probe


def make_app() -> Flask:
    app = create_base_app("tls-test")

    @app.post("/echo")
    def echo() -> Response:
        return json_response({"bytes": len(read_raw_body(8 << 20))})

    @app.get("/big")
    def big() -> Response:
        return Response(b"x" * int(request.args.get("n", "0")), mimetype="text/plain")

    return app


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return ensure_certificate(tmp_path_factory.mktemp("tls"), "127.0.0.1")


@pytest.fixture
def server(certificate: tuple[Path, Path]) -> Iterator[WsgiServer]:
    bounds = Limits(max_connections=20, max_connections_per_client=100, header_timeout=1.0)
    served = WsgiServer(
        make_app(), "127.0.0.1", 0, bounds=bounds, tls=server_context(*certificate)
    ).start()
    yield served
    served.stop()


def pinned(cert: Path) -> ssl.SSLContext:
    """A client context that trusts exactly this certificate (as pinning by fingerprint)."""
    context = ssl.create_default_context(cafile=str(cert))
    context.check_hostname = False
    return context


def test_the_certificate_is_made_once_private_and_fingerprinted(
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    assert key.stat().st_mode & 0o777 == 0o600
    assert ensure_certificate(cert.parent) == (cert, key)  # kept, not made again
    found = fingerprint(cert)
    der = ssl.PEM_cert_to_DER_cert(cert.read_text())
    assert found == "sha256:" + hashlib.sha256(der).hexdigest()
    assert len(found) == len("sha256:") + 64 and found == found.lower()


def test_https_serves_with_the_pinned_certificate(
    server: WsgiServer, certificate: tuple[Path, Path]
) -> None:
    assert server.url.startswith("https://")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        loose = ssl.create_default_context()
        loose.check_hostname = False
        loose.verify_mode = ssl.CERT_NONE
        with loose.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    assert "sha256:" + hashlib.sha256(der).hexdigest() == fingerprint(certificate[0])
    with httpx.Client(base_url=server.url, verify=pinned(certificate[0]), timeout=10) as client:
        for _ in range(50):  # one kept-alive connection
            assert client.get("/big", params={"n": "10"}).text == "x" * 10
        body = b'{"a": "' + b"y" * (1 << 20) + b'"}'
        answer = client.post("/echo", content=body, headers={"Content-Type": "application/json"})
        assert answer.json() == {"bytes": len(body)}
        assert len(client.get("/big", params={"n": str(3 << 20)}).content) == 3 << 20


def test_another_certificate_is_refused_by_a_pinning_client(
    server: WsgiServer, tmp_path: Path
) -> None:
    other, _key = ensure_certificate(tmp_path, "127.0.0.1")
    with (
        httpx.Client(base_url=server.url, verify=pinned(other), timeout=10) as client,
        pytest.raises(httpx.ConnectError),
    ):
        client.get("/big")


def test_stalled_handshakes_are_closed_and_never_lock_clients_out(
    server: WsgiServer, certificate: tuple[Path, Path]
) -> None:
    stalled = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(40)]
    try:
        # Twice the connection bound, none handshaking: a real client still gets in at once
        # (the idle ones are evicted for it).
        with httpx.Client(base_url=server.url, verify=pinned(certificate[0]), timeout=5) as client:
            assert client.get("/big", params={"n": "1"}).status_code == 200
        # Plain HTTP to the HTTPS port gets no answer, only a closed connection.
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as plain:
            plain.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            with contextlib.suppress(ConnectionResetError):
                assert b"HTTP/1.1 200" not in plain.recv(1000)
        # The header deadline (1 s here) closes those that never handshake.
        time.sleep(2.5)
        closed = 0
        for sock in stalled:
            sock.settimeout(0.5)
            try:
                closed += sock.recv(1) == b""
            except ConnectionResetError:
                closed += 1
            except TimeoutError:
                pass  # still open: counted as not closed
        assert closed == len(stalled)
        assert server.stats()["open"] <= 1
    finally:
        for sock in stalled:
            sock.close()


def test_a_handshake_cut_off_by_the_deadline_is_logged_with_its_peer_a_few_times_a_minute(
    server: WsgiServer, certificate: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """A client slower than the header deadline between its connect and its ClientHello (pdn
    ctl in an emulated Pi at load 15) sees only an EOF: SSL UNEXPECTED_EOF_WHILE_READING. The
    display's log says who and why, 5 times a minute at most however many there are."""
    with caplog.at_level(logging.WARNING, logger="pdn.wsgi"):
        late = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(8)]
        ports = [sock.getsockname()[1] for sock in late]
        time.sleep(2.5)  # past the 1 s deadline, checked every second
        try:
            # An EOF in the handshake: UNEXPECTED_EOF, or a clean close (SSLZeroReturnError)
            # or a reset, as the close reaches this client (seen on a fresh Debian root).
            with pytest.raises((ssl.SSLError, ConnectionError)):
                pinned(certificate[0]).wrap_socket(late[0])
        finally:
            for sock in late:
                sock.close()
    lines = [r.getMessage() for r in caplog.records if "TLS handshake" in r.getMessage()]
    assert len(lines) == 5, lines
    assert all(
        line.startswith("closed the connection from 127.0.0.1:")
        and line.endswith("within 1 s of the connect (PDN_HEADER_TIMEOUT)")
        for line in lines
    ), lines
    assert {int(line.split(":")[1]) for line in lines} <= set(ports)
    assert server.stats()["timed-out"] >= len(late)


def tls_probe(port: int, cert: Path) -> float:
    """Seconds for one GET on a new TLS connection from another client address (127.0.0.2)."""
    return probe(port, "/big?n=1", pinned(cert))


def test_idle_and_drip_fed_floods_leave_the_https_api_answering(
    certificate: tuple[Path, Path],
) -> None:
    """tests/server/platform/test_endurance.py's flood, over TLS: 300 connections that never start
    their handshake and 100 that handshake and then drip header bytes, against a bound of 128."""
    cert = certificate[0]
    bounds = Limits(max_connections=128, header_timeout=2.0)
    server = WsgiServer(
        make_app(), "127.0.0.1", 0, bounds=bounds, tls=server_context(*certificate)
    ).start()
    idle = [connect_from(f"127.0.1.{i % 20 + 1}", server.port) for i in range(300)]
    drip = [
        pinned(cert).wrap_socket(connect_from(f"127.0.2.{i % 10 + 1}", server.port))
        for i in range(100)
    ]
    for conn in drip:
        conn.sendall(b"GET /big HTTP/1.1\r\n")
    try:
        with drip_fed(drip):
            latencies = [tls_probe(server.port, cert) for _ in range(20)]
            assert max(latencies) < 2.0, latencies
            # Drip-fed connections are answered 408 (over TLS) and closed after the deadline.
            cut_off = (ConnectionResetError, TimeoutError, ssl.SSLError)
            assert cut_off_count(drip, bounds.header_timeout + 5, cut_off) == len(drip)
            stats = server.stats()
            assert stats["timed-out"] >= 1 and stats["evicted"] >= 1
            assert tls_probe(server.port, cert) < 2.0
    finally:
        for sock in idle:
            sock.close()
        for tls in drip:
            tls.close()
        server.stop()


def test_one_client_gets_at_most_its_share_over_tls(certificate: tuple[Path, Path]) -> None:
    """The per-client bound holds over TLS; the refusal comes before any handshake, so a TLS
    client sees its connection closed (not the JSON 429 a plain client reads)."""
    bounds = Limits(max_connections_per_client=8)
    server = WsgiServer(
        make_app(), "127.0.0.1", 0, bounds=bounds, tls=server_context(*certificate)
    ).start()
    held = [connect_from("127.0.3.1", server.port) for _ in range(8)]
    try:
        extra = connect_from("127.0.3.1", server.port)
        with pytest.raises((ssl.SSLError, OSError)):
            pinned(certificate[0]).wrap_socket(extra).sendall(b"GET / HTTP/1.1\r\n\r\n")
        extra.close()
        assert tls_probe(server.port, certificate[0]) < 2.0  # another client is not affected
    finally:
        for conn in held:
            conn.close()
        server.stop()


def test_the_webhook_poster_takes_only_the_pinned_certificate(
    server: WsgiServer, certificate: tuple[Path, Path]
) -> None:
    """server.platform.webhookpost.Poster with pins (the scheduler's pushes to HTTPS displays)."""
    right = fingerprint(certificate[0])
    wrong = "sha256:" + "0" * 64

    async def post(pin: str | None) -> Delivery:
        poster = Poster(pins=lambda url: pin)
        try:
            return await poster.post(
                f"{server.url}/echo", b"{}", {"Content-Type": "application/json"}, timeout=5
            )
        finally:
            await poster.aclose()

    assert asyncio.run(post(right)).ok
    refused = asyncio.run(post(wrong))
    assert not refused.ok and "not the one pinned" in (refused.error or "")
    # Without a pin, the certificate authorities decide: a self-signed certificate fails.
    assert not asyncio.run(post(None)).ok
