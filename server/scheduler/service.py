"""The scheduler's parts wired together: storage, outbox, schedules watcher, prober, API server."""

from __future__ import annotations

from pathlib import Path

from server.scheduler.app import create_app, schedule_topic
from server.scheduler.fleet import Fleet
from server.scheduler.registry import DisplayProber
from server.scheduler.schedules import ScheduleLibrary
from server.scheduler.storage import SchedulerStorage, SqliteStorage
from server.standalone import SegmentService


class SchedulerService(SegmentService):
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
        super().__init__("scheduler")
        self.outbox = self._outbox(data_dir)
        self.storage = storage or SqliteStorage(data_dir / "scheduler.sqlite3")
        self.library = ScheduleLibrary(schedules_dir, self.storage, self._publish)
        self.fleet = Fleet(self.storage, self.library, self.outbox)
        self.library.on_change = self.fleet.schedule_changed
        self.prober = DisplayProber(
            self.storage,
            refresh_interval=refresh_interval,
            on_back=self.fleet.reachable_again,
        )
        self.app = create_app(
            self.storage,
            self.library,
            self.outbox,
            on_register=self._registered,
            token=token,
            fleet=self.fleet,
        )
        self._listen(self.app, host, port, self.outbox, self.library, self.prober)

    def _registered(self, url: str, groups: list[str] | None) -> None:
        self.fleet.registered(url, groups)
        self.prober.poke(url)

    def _publish(self, schedule_id: str, body: bytes) -> None:
        self.outbox.publish(schedule_topic(schedule_id), body, "text/xml")

    def stop(self) -> None:
        super().stop()
        self.storage.close()
