"""Serve a WSGI app with waitress, in a thread of its own or in the foreground.

waitress is a production server (bounded worker threads, request size limits, no debug
console), pure Python so it installs on a Pi without a compiler. Port 0 picks a free port,
which tests use; ``server.port`` tells the one bound.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from typing import Any

from waitress.server import create_server

log = logging.getLogger("pdn.wsgi")


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host`` (a name or an address) and ``port`` (0: any free one).

    Binding before the app exists lets a process learn its own URL first (the display's idle
    page and webhooks carry it) and fail fast on a taken port. Raises OSError."""
    family, kind, proto, _name, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(1024)
    except OSError:
        listener.close()
        raise
    return listener


class WsgiServer:
    """One listening waitress server."""

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        sock: socket.socket | None = None,
        threads: int = 8,
        name: str = "api",
    ):
        """Listen on ``host``:``port``, or on ``sock`` when one was bound already (:func:`bind`).

        The socket is always bound first, so a taken port raises OSError before waitress has
        made any thread or pipe that would then leak."""
        self.name = name
        if sock is None:
            sock = bind(host, port)
        # With one socket waitress makes a single-socket server (effective_host/port).
        self._server: Any = create_server(
            app,
            sockets=[sock],
            threads=threads,
            ident="pdn",
            # Readers behind a slow link must not pin a worker thread forever.
            channel_timeout=30,
            # Bodies beyond the largest we accept (an 8 MiB CDS) are cut off early.
            max_request_body_size=9 << 20,
            clear_untrusted_proxy_headers=True,
            asyncore_use_poll=True,
        )
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._server.effective_host)

    @property
    def port(self) -> int:
        return int(self._server.effective_port)

    @property
    def url(self) -> str:
        host = self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def start(self) -> WsgiServer:
        """Serve in a daemon thread (the display's GUI owns the main thread)."""
        self._thread = threading.Thread(target=self.serve_forever, name=f"wsgi-{self.name}")
        self._thread.daemon = True
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        log.info("%s listening on %s", self.name, self.url)
        try:
            self._server.run()
        except OSError:
            # close() from another thread ends the loop with a closed-socket error.
            log.debug("%s server loop ended", self.name)

    def stop(self) -> None:
        """Stop at once: close the listener and every open connection, end the workers.

        Closing only the listener would leave kept-alive connections answering (and the loop
        running) for seconds; the closing runs on the server's own loop thread, through the
        trigger, because waitress's socket map is not thread-safe.
        """
        if self._thread is None or not self._thread.is_alive():
            self._close_everything()
            return
        try:
            self._server.trigger.pull_trigger(self._close_everything)
        except OSError as error:
            # The wake-up pipe is gone (seen once in a long test run: EBADF); close from here.
            log.warning(
                "%s: cannot wake the server loop (%s); closing from this thread", self.name, error
            )
            self._close_everything()
        self._thread.join(timeout=5)

    def _close_everything(self) -> None:
        server = self._server
        for dispatcher in list(server._map.values()):
            if dispatcher is not server and dispatcher is not server.trigger:
                with contextlib.suppress(OSError):
                    dispatcher.close()
        with contextlib.suppress(OSError):
            server.close()  # the listener and the trigger; the loop ends with an empty map
        server.task_dispatcher.shutdown(cancel_pending=True, timeout=2)
