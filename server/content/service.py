"""The content server's parts wired together: the application catalog, forwarder, API server."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from server.content.app import AppCatalog, DisplayForwarder, advertised_base, create_app
from server.displaycreds import DisplayCredentials
from server.standalone import SegmentService, display_token


class ContentService(SegmentService):
    """One content server: ``start()`` it, read ``url``, ``stop()`` it (the CLI uses this)."""

    def __init__(
        self,
        directories: Sequence[Path],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        public_url: str | None = None,
        token: str | None = None,
    ) -> None:
        super().__init__("content")
        self.catalog = AppCatalog(directories)
        # The displays' tokens and certificates, by pairing or configuration (issue 22).
        self.forwarder = DisplayForwarder(token=display_token(), credentials=DisplayCredentials())
        base_url_for = advertised_base(public_url, host, lambda: self.server.port)
        self.app = create_app(self.catalog, self.forwarder, base_url_for, token=token)
        self._listen(self.app, host, port)

    def stop(self) -> None:
        super().stop()
        self.forwarder.close()
