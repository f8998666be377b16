"""systemd's notification socket, stood in for by a real datagram socket (a pytest plugin:
the ``notify_listener`` and ``abstract_notify_listener`` fixtures)."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from collections.abc import Iterator

import pytest


class NotifyListener:
    """A real datagram socket standing in for systemd's notification socket."""

    def __init__(self, sock: socket.socket, address: str) -> None:
        self.sock = sock
        self.address = address  # the $NOTIFY_SOCKET value
        self.messages: list[tuple[float, str]] = []

    def receive(self, timeout: float) -> str | None:
        """The next datagram within ``timeout`` seconds, or None."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096)
        except TimeoutError:
            return None
        text = data.decode()
        self.messages.append((time.monotonic(), text))
        return text

    def wait_for(self, assignment: str, timeout: float) -> str:
        """Read datagrams until one contains ``assignment`` as a line; fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            message = self.receive(left)
            if message is not None and assignment in message.split("\n"):
                return message
        raise AssertionError(f"no {assignment!r} within {timeout} s; got {self.messages!r}")


@pytest.fixture
def notify_listener() -> Iterator[NotifyListener]:
    # A short directory: AF_UNIX paths are limited to 108 bytes, pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="pdn-notify-") as directory:
        path = os.path.join(directory, "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        try:
            yield NotifyListener(sock, path)
        finally:
            sock.close()


@pytest.fixture
def abstract_notify_listener() -> Iterator[NotifyListener]:
    name = f"pdn-test-notify-{os.getpid()}-{time.monotonic_ns()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    try:
        yield NotifyListener(sock, "@" + name)
    finally:
        sock.close()
