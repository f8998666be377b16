"""Helpers for tests that need programs from the system (xset, systemd-analyze ...), and
clients of one server from several loopback addresses.

`bash packaging/dev.sh test` installs every one of them, so a missing program is a broken
set-up, not a limit of the platform: the test fails, naming what to run.
"""

from __future__ import annotations

import shutil

import httpx
import pytest


def require_tools(*names: str) -> None:
    missing = [name for name in names if shutil.which(name) is None]
    if not missing:
        return
    pytest.fail(f"{', '.join(missing)} not installed (bash packaging/dev.sh setup installs it)")


class SourceClients:
    """httpx clients of one server, one per loopback source address: to the server, each
    address is another client (a lock-out of one leaves the others alone)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._clients: dict[str, httpx.Client] = {}

    def client(self, source: str = "127.0.0.2") -> httpx.Client:
        if source not in self._clients:
            self._clients[source] = httpx.Client(
                base_url=self.url,
                transport=httpx.HTTPTransport(local_address=source),
                timeout=10,
            )
        return self._clients[source]

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
