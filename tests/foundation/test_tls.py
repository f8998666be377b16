"""HTTPS on waitress's loop (server/tls.py, issue 22): a real server on loopback, real TLS
clients, the certificate pinned by fingerprint, and the flood guards kept over TLS."""

from __future__ import annotations

import contextlib
import hashlib
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from flask import Flask, Response, request

from server.http import create_base_app, json_response, read_raw_body
from server.limits import Limits
from server.tls import ensure_certificate, fingerprint, server_context
from server.wsgi import WsgiServer


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
