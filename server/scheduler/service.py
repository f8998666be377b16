"""The scheduler's parts wired together: storage, outbox, schedules watcher, prober, API server."""

from __future__ import annotations

import os
from pathlib import Path

from server.outbox import Outbox
from server.scheduler.app import create_app, schedule_topic
from server.scheduler.registry import DisplayProber
from server.scheduler.schedules import ScheduleLibrary
from server.scheduler.storage import SchedulerStorage, SqliteStorage
from server.wsgi import WsgiServer


class SchedulerService:
    """One scheduler: ``start()`` it, read ``url``, ``stop()`` it (the CLI and tests use this)."""

    def __init__(
        self,
        *,
        data_dir: Path,
        schedules_dir: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        refresh_interval: float = 300.0,
        storage: SchedulerStorage | None = None,
    ) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.storage = storage or SqliteStorage(data_dir / "scheduler.sqlite3")
        self.outbox = Outbox(
            data_dir / "outbox.sqlite3",
            name="scheduler",
            # Displays with an API token refuse unauthenticated updates.
            bearer_token=os.environ.get("PDN_DISPLAY_TOKEN") or None,
        )
        self.library = ScheduleLibrary(schedules_dir, self.storage, self._publish)
        self.prober = DisplayProber(self.storage, refresh_interval=refresh_interval)
        self.app = create_app(
            self.storage, self.library, self.outbox, on_register=self.prober.poke, token=token
        )
        self.server = WsgiServer(self.app, host, port, name="scheduler")

    def _publish(self, schedule_id: str, body: bytes) -> None:
        self.outbox.publish(schedule_topic(schedule_id), body, "text/xml")

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> SchedulerService:
        """Start everything but the API server's loop (serve it with ``server``)."""
        self.outbox.start()
        self.library.start()
        self.prober.start()
        return self

    def stop(self) -> None:
        self.server.stop()
        self.library.stop()
        self.prober.stop()
        self.outbox.stop()
        self.storage.close()
