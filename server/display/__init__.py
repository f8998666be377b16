"""The Display Segment's HTTP API (Flask), served by waitress inside ``pdn display``."""

from __future__ import annotations

from flask import Flask

from server.display.api import api
from server.display.service import DisplayService
from server.http import create_base_app, require_token

__all__ = ["DisplayService", "create_app"]


def create_app(service: DisplayService) -> Flask:
    """The Display Segment app for one display."""
    app = create_base_app("pdn.display")
    app.extensions["pdn.display"] = service
    # Read through the app, so the service can be swapped (tests reuse one server).
    require_token(app, lambda: app.extensions["pdn.display"].config.api_token)
    app.register_blueprint(api)
    return app
