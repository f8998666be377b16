"""Running a segment service (scheduler, content, sensor) in the foreground until told to stop.

The WSGI server runs in its own thread; the main thread waits for SIGTERM (systemd) or SIGINT
(Ctrl-C) and then stops the server and every background part in reverse order of starting.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from server.wsgi import WsgiServer

log = logging.getLogger("pdn.service")

#: Exit codes shared by the segment services.
EXIT_OK = 0
EXIT_USAGE = 2
EXIT_START_FAILED = 3


def api_token() -> str | None:
    """The API token from the environment (never a command-line flag: it would show in ps)."""
    token = os.environ.get("PDN_API_TOKEN", "").strip()
    return token or None


def default_data_dir(service: str) -> Path:
    """Where a service keeps its state when --data-dir is not given."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "pdn" / service


def serve_until_stopped(
    server: WsgiServer,
    *,
    on_stop: Sequence[Callable[[], None]] = (),
    ready_message: str = "",
) -> int:
    """Serve until SIGTERM or SIGINT, then call ``on_stop`` in order and close the server."""
    stopping = threading.Event()

    def _request_stop(signum: int, frame: FrameType | None) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stopping.set()

    previous = {sig: signal.signal(sig, _request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.start()
        if ready_message:
            log.info("%s", ready_message)
        while not stopping.wait(1.0):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stop()
        for stop in on_stop:
            try:
                stop()
            except Exception:
                log.exception("error while stopping")
    return EXIT_OK


def local_address_towards(host: str) -> str | None:
    """This machine's address on the route to ``host``, bracketed if IPv6 (no packet is sent).

    What a peer can use to reach us back, when we listen on every address.
    """
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((host, 9))
            address = str(probe.getsockname()[0])
    except OSError:
        return None
    return f"[{address}]" if ":" in address else address
