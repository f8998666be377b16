"""A real Wayland compositor for the tests: sway, headless, and ``grim`` to read its output.

Why sway: it is a wlroots compositor like cage (the kiosk PC's), with the same wlr-screencopy
(``grim``) and output management (``wlr-randr``), and its headless backend with the pixman
renderer shows a Qt client's frames as they come. Measured here (Debian bookworm, no GPU):
cage 0.1.4's headless output keeps the first frame a client commits and shows no later one
(an all-black screen for the display, whose first frame is black), and Weston 10's headless
backend has no wlr-screencopy (its kiosk shell also stops sending frame callbacks after the
first frame). wlroots compositors refuse to run as root: sway runs as ``nobody``, in a runtime
directory of its own; clients (the display, grim) connect by the socket's absolute path.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import requests

from tests.support.display import DisplayProcess
from tests.support.process import CREDENTIALS
from tests.support.tools import require_tools
from tests.support.waiting import wait_until

COMPOSITOR_USER = "nobody"


class Compositor:
    """A wlroots compositor running as ``nobody``, its socket in a runtime folder of its own."""

    def __init__(self, runtime: Path, process: subprocess.Popen[bytes], log: Path) -> None:
        self.runtime = runtime
        self.process = process
        self.log = log
        self.socket = runtime / "wayland-?"  # named by the compositor once it listens

    def env(self) -> dict[str, str]:
        """The environment of a client: this compositor, no X display."""
        env = dict(os.environ, WAYLAND_DISPLAY=str(self.socket), QT_QPA_PLATFORM="wayland")
        env.pop("DISPLAY", None)
        return env

    def grim(self) -> bytes:
        """What the compositor shows, as a binary PPM (wlr-screencopy)."""
        command = ["grim", "-t", "ppm", "-"]
        done = subprocess.run(command, env=self.env(), capture_output=True, timeout=10, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return done.stdout

    def ready(self) -> bool:
        sockets = [path for path in self.runtime.glob("wayland-*") if path.suffix != ".lock"]
        if sockets:
            self.socket = sockets[0]
        return bool(sockets)


class Sway(Compositor):
    def ready(self) -> bool:
        return super().ready() and bool(list(self.runtime.glob("sway-ipc.*.sock")))

    def swaymsg(self, *command: str) -> str:
        sockets = list(self.runtime.glob("sway-ipc.*.sock"))
        assert sockets, "sway has no IPC socket"
        done = subprocess.run(
            ["swaymsg", "-s", str(sockets[0]), *command],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return done.stdout


class CompositorDisplay(DisplayProcess):
    """``pdn display`` as a client of ``compositor``, with a data and runtime directory of its
    own in ``folder``; up when it returns. ``screen``: lines for its config's ``[screen]``."""

    def __init__(self, compositor: Compositor, folder: Path, screen: str = "") -> None:
        runtime = folder / "runtime"
        runtime.mkdir(mode=0o700)
        # A look at the compositor every second: the tests wait seconds, not half a minute.
        config = f'name = "Wayland"\n[screen]\ncompositor-check = 1\n{screen}'
        env = {**compositor.env(), "XDG_RUNTIME_DIR": str(runtime)}
        super().__init__(folder, config=config, env=env, unset=(*CREDENTIALS, "DISPLAY"))
        self.start().wait_ready()

    def screen(self) -> dict[str, Any]:
        """The screen part of its health."""
        health = requests.get(self.url + "/x/health", timeout=10).json()  # a busy machine
        screen: dict[str, Any] = health["renderer"].get("screen") or {}
        return screen

    def show(self, url: str, seconds: float = 60) -> None:
        """Request ``url`` (first come, first served: it waits for the requests before it)."""
        item = {"content-item": url, "preferred-duration": f"{seconds:g} s"}
        assert requests.post(self.url + "/schedule", json=item, timeout=5).status_code == 202


def ppm_pixel(data: bytes, x: int, y: int) -> tuple[int, int, int]:
    """One pixel of grim's PPM (its header: ``P6\\n<w> <h>\\n255\\n``)."""
    magic, size, depth, pixels = data.split(b"\n", 3)
    assert magic == b"P6" and depth == b"255", data[:32]
    width = int(size.split()[0])
    at = (y * width + x) * 3
    r, g, b = pixels[at : at + 3]
    return (r, g, b)


def ppm_size(data: bytes) -> tuple[int, int]:
    width, height = data.split(b"\n", 2)[1].split()
    return int(width), int(height)


C = TypeVar("C", bound=Compositor)


@contextmanager
def sway(width: int, height: int) -> Iterator[Sway]:
    """A headless sway of ``width`` x ``height`` (pixman renderer), as ``nobody``."""
    require_tools("sway", "swaymsg", "grim", "wlr-randr", "runuser")
    config = (
        f"output HEADLESS-1 mode {width}x{height}\n"
        "xwayland disable\n"
        "default_border none\n"  # the empty output is black: no swaybg
    )
    with _as_nobody(Sway, "sway", config, ["sway", "-c", "{config}"]) as compositor:
        yield compositor


@contextmanager
def cage() -> Iterator[Compositor]:
    """Debian's cage (the kiosk PC's compositor), headless at its fixed 1280x720 (pixman), as
    ``nobody``; its own client is a ``sleep``, the display connects to it from outside."""
    require_tools("cage", "grim", "runuser")
    with _as_nobody(Compositor, "cage", "", ["cage", "--", "sleep", "3600"]) as compositor:
        yield compositor


@contextmanager
def _as_nobody(kind: type[C], name: str, config_text: str, command: list[str]) -> Iterator[C]:
    with tempfile.TemporaryDirectory(prefix=f"pdn-{name}-") as folder:
        base = Path(folder)
        base.chmod(0o755)
        runtime = base / "runtime"
        runtime.mkdir(mode=0o700)
        os.chown(runtime, *_ids(COMPOSITOR_USER))
        config = base / f"{name}.conf"
        config.write_text(config_text)
        config.chmod(0o644)
        log = base / f"{name}.log"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "XDG_RUNTIME_DIR": str(runtime),
            "WLR_BACKENDS": "headless",
            "WLR_RENDERER": "pixman",
            "WLR_LIBINPUT_NO_DEVICES": "1",
        }
        with log.open("wb") as out:
            runuser = ["runuser", "-u", COMPOSITOR_USER, "--", "env", *_assign(env)]
            process = subprocess.Popen(
                [*runuser, *(part.format(config=config) for part in command)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own group: stopped with everything it started
            )
        compositor = kind(runtime, process, log)
        try:

            def started() -> bool:
                assert process.poll() is None, log.read_text(errors="replace")
                return compositor.ready()

            wait_until(started, 15, f"{name} started", step=0.05)
            yield compositor
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


def _ids(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def _assign(env: dict[str, str]) -> list[str]:
    return [f"{key}={value}" for key, value in env.items()]
