"""systemd service notifications (the sd_notify protocol) in pure Python.

systemd hands a service the address of a datagram socket in ``$NOTIFY_SOCKET`` and, when the unit
has ``WatchdogSec=``, the watchdog period in ``$WATCHDOG_USEC`` (and the process meant to ping in
``$WATCHDOG_PID``). The service sends newline-separated ``KEY=value`` assignments to that socket.
This module is Qt-free: the display pings :meth:`SdNotifier.watchdog` from a timer on the GUI
thread, so a frozen GUI stops the pings and systemd kills and restarts the kiosk.

Every method is a no-op returning ``False`` when there is no socket (not started by systemd), and
never raises or blocks: a notification must not be able to stall the screen.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Mapping, MutableMapping

logger = logging.getLogger("pdn.systemd")

NOTIFY_SOCKET = "NOTIFY_SOCKET"
WATCHDOG_USEC = "WATCHDOG_USEC"
WATCHDOG_PID = "WATCHDOG_PID"


def socket_address(value: str) -> str | bytes | None:
    """The ``sendto`` address for a ``$NOTIFY_SOCKET`` value, or None if unusable.

    ``@name`` is a Linux abstract socket (a leading NUL byte on the wire); anything else must be
    an absolute filesystem path. Other schemes (``vsock:``, relative paths) are not supported.
    """
    if value.startswith("@") and len(value) > 1:
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None


def watchdog_usec_from(environ: Mapping[str, str], pid: int) -> int | None:
    """The watchdog period in microseconds meant for process ``pid``, or None.

    Like libsystemd's ``sd_watchdog_enabled``: ``$WATCHDOG_USEC`` must be a positive integer, and
    when ``$WATCHDOG_PID`` is set it must name this process (a child must not ping for its parent).
    """
    raw = environ.get(WATCHDOG_USEC, "").strip()
    if not raw:
        return None
    try:
        usec = int(raw)
    except ValueError:
        logger.warning("ignoring %s=%r: not an integer", WATCHDOG_USEC, raw)
        return None
    if usec <= 0:
        return None
    owner = environ.get(WATCHDOG_PID, "").strip()
    if owner:
        try:
            if int(owner) != pid:
                return None
        except ValueError:
            logger.warning("ignoring %s=%r: not a process id", WATCHDOG_PID, owner)
            return None
    return usec


class SdNotifier:
    """Sends notifications to the service manager; harmless when there is none."""

    def __init__(self, address: str | bytes | None, watchdog_usec: int | None = None) -> None:
        self._address = address
        self._watchdog_usec = watchdog_usec
        self._socket: socket.socket | None = None
        self._socket_lock = threading.Lock()
        self._failure_logged = False

    @classmethod
    def from_environment(
        cls,
        environ: MutableMapping[str, str] | None = None,
        *,
        pid: int | None = None,
        unset: bool = False,
    ) -> SdNotifier:
        """A notifier configured from ``$NOTIFY_SOCKET``, ``$WATCHDOG_USEC`` and ``$WATCHDOG_PID``.

        With ``unset=True`` the three variables are removed from ``environ`` afterwards, so child
        processes (Qt WebEngine's render processes, commands we run) do not inherit them.
        """
        env: MutableMapping[str, str] = os.environ if environ is None else environ
        raw = env.get(NOTIFY_SOCKET, "")
        address = socket_address(raw) if raw else None
        if raw and address is None:
            logger.warning("ignoring %s=%r: unsupported address", NOTIFY_SOCKET, raw)
        usec = watchdog_usec_from(env, os.getpid() if pid is None else pid)
        if unset:
            for name in (NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID):
                env.pop(name, None)
        return cls(address, usec if address is not None else None)

    @property
    def enabled(self) -> bool:
        """True when a service manager is listening."""
        return self._address is not None

    def watchdog_interval(self) -> float | None:
        """Seconds between watchdog pings (half the watchdog period), or None when not asked for."""
        if self._watchdog_usec is None:
            return None
        return self._watchdog_usec / 2_000_000

    def notify(self, *assignments: str) -> bool:
        """Send ``KEY=value`` assignments in one datagram. True if it was handed to the socket."""
        if self._address is None or not assignments:
            return False
        payload = "\n".join(assignments).encode()
        try:
            with self._socket_lock:  # pings may come from several threads; one socket suffices
                if self._socket is None:
                    self._socket = socket.socket(
                        socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC
                    )
                sock = self._socket
            # MSG_DONTWAIT: a full receive queue must never block the GUI thread.
            sock.sendto(payload, socket.MSG_DONTWAIT, self._address)
        except OSError as error:
            if not self._failure_logged:
                # Logged once: a missing manager would otherwise flood the journal every ping.
                logger.warning("cannot notify the service manager: %s", error)
                self._failure_logged = True
            return False
        self._failure_logged = False
        return True

    def ready(self, status: str | None = None) -> bool:
        """Startup is complete (for the display: the first frame is on screen)."""
        if status is None:
            return self.notify("READY=1")
        return self.notify("READY=1", _status_line(status))

    def watchdog(self) -> bool:
        """Keep-alive ping; call it every :meth:`watchdog_interval` seconds from the GUI thread."""
        if self._watchdog_usec is None:
            return False
        return self.notify("WATCHDOG=1")

    def status(self, text: str) -> bool:
        """A one-line status shown by ``systemctl status``."""
        return self.notify(_status_line(text))

    def stopping(self) -> bool:
        """Shutdown has begun."""
        return self.notify("STOPPING=1")

    def extend_timeout(self, seconds: float) -> bool:
        """Ask for more time to finish starting or stopping (``EXTEND_TIMEOUT_USEC``)."""
        return self.notify(f"EXTEND_TIMEOUT_USEC={max(0, int(seconds * 1_000_000))}")

    def close(self) -> None:
        with self._socket_lock:
            if self._socket is not None:
                self._socket.close()
                self._socket = None

    def __enter__(self) -> SdNotifier:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _status_line(text: str) -> str:
    # The protocol is line based: a newline in the text would start a new assignment.
    return "STATUS=" + " ".join(text.split())
