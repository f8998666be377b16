"""Free TCP ports on loopback, for servers a test starts on a port it must name in advance
(a ``pdn`` process's ``--port``, a config file's ``[listen]``)."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on at ``host`` now: the kernel's choice for a socket bound to 0."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
