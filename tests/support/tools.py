"""Helpers for tests that need programs from the system (Xvfb, xset, systemd-analyze ...).

`bash packaging/dev.sh test` installs every one of them, so a missing program is a broken
set-up, not a limit of the platform: the test fails, naming what to run.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest


def require_tools(*names: str) -> None:
    missing = [name for name in names if shutil.which(name) is None]
    if not missing:
        return
    pytest.fail(f"{', '.join(missing)} not installed (bash packaging/dev.sh setup installs it)")


@contextmanager
def xvfb(width: int, height: int, detached: bool = False) -> Iterator[str]:
    """A real X server of its own on a free display number; yields the DISPLAY value.

    ``detached``: the server is not a child of this process (a shell starts it in the
    background and exits), so the test process's own tree holds no X server."""
    require_tools("Xvfb")
    read, write = os.pipe()
    command = ["Xvfb", "-displayfd", str(write), "-screen", "0", f"{width}x{height}x24",
               "-nolisten", "tcp", "-noreset"]  # fmt: skip
    if detached:
        shell = f"{shlex.join(command)} >/dev/null 2>&1 </dev/null & echo $!"
        launcher = subprocess.run(
            ["sh", "-c", shell], pass_fds=(write,), capture_output=True, text=True, check=True
        )
        pid = int(launcher.stdout.strip())
    else:
        server = subprocess.Popen(
            command, pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        pid = server.pid
    os.close(write)
    with os.fdopen(read) as stream:
        number = stream.readline().strip()
    try:
        assert number, "Xvfb did not start"
        yield f":{number}"
    finally:
        if detached:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        else:
            server.terminate()
            server.wait(10)


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
