"""Xvfb: a real X server of its own for a test (the run's shared one is tests/conftest.py's)."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.tools import require_tools


@contextmanager
def xvfb(width: int, height: int, detached: bool = False) -> Iterator[str]:
    """A real X server of its own on a free display number; yields the DISPLAY value.

    ``detached``: the server is not a child of this process (a shell starts it in the
    background and exits), so the test process's own tree holds no X server."""
    with xvfb_server(width, height, detached) as (display, _pid):
        yield display


@contextmanager
def xvfb_server(width: int, height: int, detached: bool = False) -> Iterator[tuple[str, int]]:
    """:func:`xvfb`, yielding the DISPLAY value and the server's process id (a test that
    kills the server)."""
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
        yield f":{number}", pid
    finally:
        if detached:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        else:
            server.terminate()
            server.wait(10)
