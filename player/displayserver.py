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

import ctypes
import ctypes.util
import os
import re
import socket
import threading
from collections.abc import Callable

from PySide6.QtGui import QGuiApplication

_X_SOCKETS = "/tmp/.X11-unix/X{}"
#: Qt's xcb plugin: "The X11 connection broke (error 1). Did the X11 server die?" (then it
#: ends the loop); its Wayland plugin: "The Wayland connection broke. Did the Wayland compositor
#: die?" or "... experienced a fatal error: ..." (then it calls ``_exit(-1)``).
_BROKE = re.compile(r"^The (X11|Wayland) connection (broke|experienced a fatal error)\b")
_broke: list[str] = []
_on_lost: list[Callable[[str], None]] = []


def note_qt_message(message: str) -> None:
    """Read one line of Qt's log for the connection to the display server breaking.

    After the Wayland plugin's line comes its ``_exit(-1)``: no stop sequence and a status
    systemd takes for a failure of the display itself. The thread that logged it is parked
    instead, and the loss handed to :func:`on_lost`'s callback (the stop's deadline)."""
    match = _BROKE.match(message)
    if match is None:
        return
    _broke.append(message)
    if match.group(1) == "Wayland":
        _lost("the Wayland connection's loss")


def connection_broke() -> bool:
    """Qt or Xlib said the connection to the display server broke."""
    return bool(_broke)


def on_lost(callback: Callable[[str], None]) -> None:
    """``callback(why)`` when the connection to the display server breaks in a way that ends
    the process unless a thread is parked (Xlib's and the Wayland plugin's exits)."""
    _on_lost.append(callback)


def _lost(why: str) -> None:
    for callback in _on_lost:
        callback(why)
    threading.Event().wait()  # never returns: the caller would exit the process next


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


_XIOErrorHandler = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_kept: list[object] = []


def catch_xlib_exit() -> bool:
    """Xlib's own answer to a broken X connection (used by Qt's GLX and Chromium beside
    Qt's xcb) is to print "X connection to :N broken" and call ``exit()``, from whichever
    thread found it: the stop sequence would never run, and C++'s teardown may hang. This
    hands the loss to :func:`on_lost`'s callback instead, and parks the thread that found it,
    for the rest of the stop to go on without it. False where there is no Xlib."""
    name = ctypes.util.find_library("X11")
    if name is None:
        return False
    try:
        xlib = ctypes.CDLL(name)
    except OSError:
        return False

    def broken(_display: int | None) -> int:
        _broke.append("Xlib: the X connection broke")
        _lost("the X connection's loss")  # never returns: Xlib would exit() after a handler
        return 0

    handler = _XIOErrorHandler(broken)
    _kept.append(handler)  # kept alive for as long as Xlib may call it
    xlib.XSetIOErrorHandler(handler)
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
    if connection_broke():
        return False
    name = platform if platform is not None else QGuiApplication.platformName()
    paths = server_sockets(name)
    if paths is None:
        return True
    return any(_answers(path) for path in paths)
