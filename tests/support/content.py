"""The content server for tests: its Flask app in this process (served by the test on a real
waitress server), with the builtin applications and the displays it may forward to.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from flask import Flask

from server.content.app import BUILTIN_APPS, AppCatalog, DisplayForwarder, create_app
from server.content.displays import DisplayDirectory
from server.platform.displaycreds import DisplayCredentials


def content_app(
    forwarder: DisplayForwarder,
    displays: DisplayDirectory | DisplayCredentials | Path,
    *,
    apps: Sequence[Path] = (BUILTIN_APPS,),
    public: str = "http://c.example",
    token: str | None = None,
) -> Flask:
    """The content server's app: ``apps`` (folders of applications), forwarding through
    ``forwarder`` to ``displays`` (a directory, the credentials of one, or a displays file),
    naming its pages under ``public``, with the operator ``token`` if given."""
    if isinstance(displays, Path):
        displays = DisplayCredentials(displays)
    if isinstance(displays, DisplayCredentials):
        displays = DisplayDirectory(displays)
    return create_app(
        AppCatalog(list(apps)), forwarder, lambda _display: public, displays=displays, token=token
    )
