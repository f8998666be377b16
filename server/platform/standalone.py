"""Running a segment service (scheduler, content, sensor) in the foreground until told to stop.

What the three segments' ``pdn`` subcommands share lives here, so each ``cli.py`` says only what
is particular to its segment:

- ``add_segment_parser``: the subcommand with ``--host``, ``--port`` (and ``--data-dir``) and the
  exit codes in its epilog;
- ``SegmentService``: a segment's parts (outbox, watchers, the API server) started in order and
  stopped in reverse;
- ``run_service``: build the service (exit 1 when it cannot start), then ``serve_until_stopped``.

Exit codes are in ``server.platform.exitcodes``, ``local_address`` in ``server.platform.net``.
Light to import (no
Flask; waitress and the outbox only when a service is built), so ``pdn --help`` stays fast.

The WSGI server runs in its own thread; the main thread waits for SIGTERM (systemd) or SIGINT
(Ctrl-C) and then stops the server and every background part in reverse order of starting.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from server.platform.exitcodes import EPILOG, EXIT_OK, EXIT_START_FAILED

if TYPE_CHECKING:
    from server.platform.outbox import Outbox
    from server.platform.pins import Pins
    from server.platform.wsgi import WsgiServer

log = logging.getLogger("pdn.service")


def api_token() -> str | None:
    """The API token from the environment (never a command-line flag: it would show in ps)."""
    token = os.environ.get("PDN_API_TOKEN", "").strip()
    return token or None


def enrolment_token() -> str | None:
    """The scheduler's enrolment token (PDN_ENROLMENT_TOKEN): a display registering with it
    as bearer is approved at once (``server.scheduler.enrol``)."""
    token = os.environ.get("PDN_ENROLMENT_TOKEN", "").strip()
    return token or None


def display_token() -> str | None:
    """The token to send to displays that need one (PDN_DISPLAY_TOKEN), with pushed updates."""
    return os.environ.get("PDN_DISPLAY_TOKEN") or None


def default_data_dir(service: str) -> Path:
    """Where a service keeps its state when --data-dir is not given."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "pdn" / service


# -- the subcommand ----------------------------------------------------------------------------


def add_segment_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    *,
    port: int,
    run: Callable[[argparse.Namespace], int],
    help: str,
    description: str,
    data_dir: str | None = None,
) -> argparse.ArgumentParser:
    """The segment's subcommand ``pdn <name>``, which calls ``run``, with the shared options.

    ``--host`` and ``--port`` (default ``port``), and ``--data-dir`` when ``data_dir`` says what
    lives there; the exit codes go in the epilog.
    """
    parser = subparsers.add_parser(name, help=help, description=description, epilog=EPILOG)
    parser.set_defaults(func=run)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument("--port", type=int, default=port, help=f"port to listen on ({port})")
    if data_dir is not None:
        parser.add_argument("--data-dir", type=Path, default=None, help=data_dir)
    return parser


# -- the service -------------------------------------------------------------------------------


class Part(Protocol):
    """A background part of a service: started before serving, stopped after."""

    def start(self) -> object: ...

    def stop(self) -> object: ...


class SegmentService:
    """One segment: ``start()`` it, read ``url``, ``stop()`` it (the CLI and tests use this).

    A subclass builds its parts and its Flask app, then calls ``_listen`` with the app and the
    parts in the order they start.
    """

    server: WsgiServer

    def __init__(self, name: str) -> None:
        self.name = name
        self._parts: tuple[Part, ...] = ()

    def _outbox(
        self,
        data_dir: Path,
        pins: Pins | None = None,
        tokens: Pins | None = None,
        *,
        bearer_token: str | None = None,
    ) -> Outbox:
        """The segment's durable outbox, in ``data_dir`` (created if need be); ``pins``: the
        certificates of HTTPS subscribers, pinned (``server.platform.pins``); ``tokens``: each
        display's own token, by its URL; ``bearer_token``: the token for every other
        subscriber (none by default: a token goes only where it was made for)."""
        from server.platform.outbox import Outbox

        data_dir.mkdir(parents=True, exist_ok=True)
        return Outbox(
            data_dir / "outbox.sqlite3",
            name=self.name,
            bearer_token=bearer_token,
            pins=pins,
            tokens=tokens,
        )

    def _listen(
        self, app: Any, host: str, port: int, *parts: Part, max_body: int | None = None
    ) -> None:
        """Bind the API server (OSError when the port is taken) and remember the parts.
        ``max_body``: the largest request body it takes, when not the platform's default."""
        from server.platform.wsgi import MAX_BODY, WsgiServer

        self._parts = parts
        self.server = WsgiServer(app, host, port, name=self.name, max_body=max_body or MAX_BODY)

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> Self:
        """Start every part, but not the API server's loop (serve it with ``server``)."""
        for part in self._parts:
            part.start()
        return self

    def stop(self) -> None:
        """Stop the API server, then the parts in reverse order of starting."""
        self.server.stop()
        for part in reversed(self._parts):
            part.stop()


class Service(Protocol):
    @property
    def server(self) -> WsgiServer: ...

    def start(self) -> object: ...

    def stop(self) -> None: ...


ServiceT = TypeVar("ServiceT", bound=Service)


def run_service(
    args: argparse.Namespace,
    build: Callable[..., ServiceT],
    *,
    logger: logging.Logger,
    ready: Callable[[ServiceT], str],
    data_dir: Path | None = None,
) -> int:
    """Build and start the service, serve until stopped; EXIT_START_FAILED if it cannot start.

    ``build`` gets what every segment shares as keywords: ``host`` and ``port`` (from ``args``),
    ``token`` (PDN_API_TOKEN) and, when given, ``data_dir``. Failing to start is logged to the
    segment's ``logger``; ``ready`` is the line logged once the service is up.
    """
    where = f"{args.host}:{args.port}"
    shared: dict[str, Any] = {"host": args.host, "port": args.port, "token": api_token()}
    if data_dir is not None:
        shared["data_dir"] = data_dir
    try:
        service = build(**shared)
    except OSError as error:
        if data_dir is None:
            logger.error("cannot listen on %s: %s", where, error)
        else:
            logger.error("cannot start on %s with data in %s: %s", where, data_dir, error)
        return EXIT_START_FAILED
    service.start()
    return serve_until_stopped(service.server, on_stop=[service.stop], ready_message=ready(service))


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
