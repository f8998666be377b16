"""The content server's parts wired together: the application catalog, forwarder, API server."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from server.content.app import AppCatalog, DisplayForwarder, advertised_base, create_app
from server.content.displays import DisplayDirectory, SchedulerRegistry, scheduler_token
from server.platform.displaycreds import DisplayCredentials
from server.platform.standalone import SegmentService, display_token


class ContentService(SegmentService):
    """One content server: ``start()`` it, read ``url``, ``stop()`` it (the CLI uses this).

    ``displays``: the display URLs it forwards to besides those of the displays file;
    ``scheduler``: a scheduler whose registered displays it forwards to as well.
    """

    def __init__(
        self,
        directories: Sequence[Path],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        public_url: str | None = None,
        token: str | None = None,
        displays: Sequence[str] = (),
        scheduler: str | None = None,
    ) -> None:
        super().__init__("content")
        self.catalog = AppCatalog(directories)
        # The displays' own tokens and certificates (pairing or the displays file); the shared
        # PDN_DISPLAY_TOKEN for the listed ones only.
        credentials = DisplayCredentials(shared_token=display_token(), listed=displays)
        registry = SchedulerRegistry(scheduler, token=scheduler_token()) if scheduler else None
        self.displays = DisplayDirectory(credentials, registry)
        self.forwarder = DisplayForwarder(credentials=credentials)
        base_url_for = advertised_base(public_url, host, lambda: self.server.port)
        self.app = create_app(
            self.catalog, self.forwarder, base_url_for, displays=self.displays, token=token
        )
        self._listen(self.app, host, port)

    def stop(self) -> None:
        super().stop()
        self.forwarder.close()
