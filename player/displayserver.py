"""Whether the display server the process draws on (an X server or a Wayland compositor) is
still there, asked of its socket rather than of Qt.

Qt cannot be asked: with the server gone, Qt Quick's render thread can hang in a call to it, and
hiding or deleting a window then waits for that thread for good. What talks to the server at
stop (``player.renderer.stage.Stage.close``, Qt's own teardown) is skipped when this says the
server is gone.

Two signs, either enough: Qt said its connection broke (Qt's xcb and Wayland plugins say so in
their log before they end the loop or the process: :func:`note_qt_message` reads it), or the
server's listening socket refuses a connection (the probe closes at once, without a word of
the server's protocol; a server that is gone refuses, its socket file left behind, or has no
socket at all). The first comes while a server that is stopping still accepts connections.
Platforms with no server (``offscreen``, ``minimal``) always count as there.
"""

from __future__ import annotations

import os
import re
import socket

from PySide6.QtGui import QGuiApplication

_X_SOCKETS = "/tmp/.X11-unix/X{}"
#: Qt's xcb plugin: "The X11 connection broke (error 1). Did the X11 server die?"; its Wayland
#: plugin: "The Wayland connection broke. Did the Wayland compositor die?".
_BROKE = re.compile(r"^The (X11|Wayland) connection broke\b")
_broke: list[str] = []


def note_qt_message(message: str) -> None:
    """Read one line of Qt's log for the connection to the display server breaking."""
    if _BROKE.match(message):
        _broke.append(message)


_X_DISPLAY = re.compile(r"^(?:unix)?:(\d+)(?:\.\d+)?$")


def x_socket_paths(display: str) -> list[str]:
    """Where the local X server of ``display`` (``:1``, ``:1.0``, ``unix:1``) listens: its
    abstract socket (Linux), then its socket file; none for a remote or unknown display."""
    match = _X_DISPLAY.match(display)
    if match is None:
        return []
    path = _X_SOCKETS.format(match.group(1))
    return ["\0" + path, path]


def wayland_socket_path(display: str, runtime_dir: str | None) -> str | None:
    """The compositor's socket: ``WAYLAND_DISPLAY`` itself when absolute, else in
    ``XDG_RUNTIME_DIR``."""
    if os.path.isabs(display):
        return display
    return os.path.join(runtime_dir, display) if runtime_dir else None


def _answers(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(path)
        except OSError:
            return False
    return True


def server_sockets(platform: str, environ: dict[str, str] | None = None) -> list[str] | None:
    """The sockets of the server behind Qt ``platform``, any one of which answering is
    enough; None where there is no local server to ask (no server at all, or a remote X)."""
    env = os.environ if environ is None else environ
    if platform == "xcb":
        paths = x_socket_paths(env.get("DISPLAY", ""))
        return paths or None
    if platform.startswith("wayland"):
        path = wayland_socket_path(
            env.get("WAYLAND_DISPLAY", "wayland-0"), env.get("XDG_RUNTIME_DIR")
        )
        return [path] if path else None
    return None


def server_alive(platform: str | None = None) -> bool:
    """Whether the display server of the running application (or of ``platform``) still
    accepts connections; True where this cannot be known."""
    if _broke:
        return False
    name = platform if platform is not None else QGuiApplication.platformName()
    paths = server_sockets(name)
    if paths is None:
        return True
    return any(_answers(path) for path in paths)
