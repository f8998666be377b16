"""The Display Segment's HTTP face (Flask), served by waitress inside ``pdn display``.

It knows a display only through :class:`server.display.port.DisplayPort`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask

from server.display.api import api
from server.display.port import DisplayPort
from server.http import create_base_app, require_token

__all__ = ["DisplayPort", "create_app"]


def create_app(display: DisplayPort) -> Flask:
    """The Display Segment app for one display."""
    app = create_base_app("pdn.display", openapi="display")
    app.extensions["pdn.display"] = display
    # Read through the app, so the display can be swapped (tests reuse one server).
    require_token(
        app,
        lambda: app.extensions["pdn.display"].api_token,
        service="display",
        protect_reads=lambda: bool(getattr(app.extensions["pdn.display"], "protect_reads", False)),
    )
    app.register_blueprint(api)
    app.wsgi_app = PlaybackFastPath(app.wsgi_app, app)  # type: ignore[method-assign]
    return app


class PlaybackFastPath:
    """WSGI middleware answering ``GET /playback/`` from the pre-encoded record.

    Controllers poll this endpoint far more than any other; on a Pi-class CPU Flask's
    per-request machinery costs several times what waitress itself does, so the answer (the
    same bytes and headers as the Flask route) is served here, unless reads need the token
    (``protect_reads``): then Flask answers, with its token check.
    """

    PATHS = frozenset(("/playback/", "/playback"))

    def __init__(self, wrapped: Callable[..., Iterable[bytes]], app: Flask) -> None:
        self.wrapped = wrapped
        self.app = app

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        display = self.app.extensions["pdn.display"]
        if (
            environ.get("REQUEST_METHOD") == "GET"
            and environ.get("PATH_INFO") in self.PATHS
            and not (getattr(display, "protect_reads", False) and display.api_token)
        ):
            body: bytes = display.playback_json()
            start_response(
                "200 OK",
                [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
            )
            return [body]
        return self.wrapped(environ, start_response)
