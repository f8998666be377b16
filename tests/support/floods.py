"""Floods for the HTTP servers' guards: connections from chosen loopback addresses (other
clients, to the server), header bytes dripped one at a time, and reading what a server
answers until it closes the connection.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Sequence

#: What reading a connection the server cut off, or that never answered, may raise.
CUT_OFF: tuple[type[BaseException], ...] = (ConnectionResetError, TimeoutError)


def connect_from(source: str, port: int) -> socket.socket:
    """A connection to 127.0.0.1:``port`` from the loopback address ``source``."""
    conn = socket.socket()
    conn.bind((source, 0))
    conn.connect(("127.0.0.1", port))
    return conn


def probe(port: int, path: str, context: ssl.SSLContext | None = None) -> float:
    """Seconds for one GET of ``path`` (which must answer 200) on a new connection from
    another client address (127.0.0.2): over TLS with ``context``, else plain HTTP."""
    began = time.monotonic()
    conn = (
        http.client.HTTPSConnection(
            "127.0.0.1", port, timeout=5, source_address=("127.0.0.2", 0), context=context
        )
        if context is not None
        else http.client.HTTPConnection(
            "127.0.0.1", port, timeout=5, source_address=("127.0.0.2", 0)
        )
    )
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        answer.read()
        assert answer.status == 200
    finally:
        conn.close()
    return time.monotonic() - began


def read_all(
    conn: socket.socket, wait: float, cut_off: tuple[type[BaseException], ...] = CUT_OFF
) -> bytes:
    """Everything the server sends on ``conn`` until it closes it (or ``wait`` seconds pass
    with nothing)."""
    conn.settimeout(wait)
    data = b""
    try:
        while chunk := conn.recv(65536):
            data += chunk
    except cut_off:
        pass
    return data


@contextlib.contextmanager
def drip_fed(conns: Sequence[socket.socket], every: float = 0.5) -> Iterator[None]:
    """While inside: one more header byte on each of ``conns`` every ``every`` seconds, a
    request that never ends (a slowloris)."""
    stop = threading.Event()

    def feed() -> None:
        while not stop.wait(every):
            for conn in conns:
                with contextlib.suppress(OSError):
                    conn.send(b"X")

    feeder = threading.Thread(target=feed, name="drip-feed", daemon=True)
    feeder.start()
    try:
        yield
    finally:
        stop.set()
        feeder.join()


def cut_off_count(
    conns: Sequence[socket.socket], wait: float, cut_off: tuple[type[BaseException], ...] = CUT_OFF
) -> int:
    """How many of ``conns`` the server answered 408 and closed, or closed without a word,
    within ``wait`` seconds each."""
    return sum(
        (data := read_all(conn, wait, cut_off)).startswith(b"HTTP/1.1 408") or data == b""
        for conn in conns
    )
