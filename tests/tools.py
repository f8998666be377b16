"""Helpers for tests that need programs from the system (Xvfb, xset, systemd-analyze ...).

`bash packaging/dev.sh test` installs every one of them, so a missing program is a broken
set-up, not a limit of the platform: the test fails, naming what to run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def require_tools(*names: str) -> None:
    missing = [name for name in names if shutil.which(name) is None]
    if not missing:
        return
    pytest.fail(f"{', '.join(missing)} not installed (bash packaging/dev.sh setup installs it)")


@contextmanager
def xvfb(width: int, height: int) -> Iterator[str]:
    """A real X server of its own on a free display number; yields the DISPLAY value."""
    require_tools("Xvfb")
    read, write = os.pipe()
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", f"{width}x{height}x24",
         "-nolisten", "tcp", "-noreset"],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    os.close(write)
    with os.fdopen(read) as stream:
        number = stream.readline().strip()
    try:
        assert number, "Xvfb did not start"
        yield f":{number}"
    finally:
        server.terminate()
        server.wait(10)


@contextmanager
def detached_xvfb(width: int, height: int) -> Iterator[str]:
    """Like :func:`xvfb`, but the server is not a child of this process (a shell starts it in
    the background and exits): the test process's own tree holds no X server."""
    require_tools("Xvfb")
    read, write = os.pipe()
    launcher = subprocess.run(
        ["sh", "-c", f'Xvfb -displayfd {write} -screen 0 {width}x{height}x24 -nolisten tcp '
         '-noreset >/dev/null 2>&1 </dev/null & echo $!'],
        pass_fds=(write,),
        capture_output=True,
        text=True,
        check=True,
    )  # fmt: skip
    os.close(write)
    pid = int(launcher.stdout.strip())
    with os.fdopen(read) as stream:
        number = stream.readline().strip()
    try:
        assert number, "Xvfb did not start"
        yield f":{number}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
