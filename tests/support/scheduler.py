"""The scheduler for tests: in this process on a real waitress server (``start``), or as a
``pdn scheduler`` process of its own (``SchedulerProcess``: one a test can kill), and the
small schedules the tests assign.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from server.scheduler.service import SchedulerService
from tests.support.process import CREDENTIALS, PDN_MODULE, PdnProcess

LOBBY = b"""<?xml version="1.0" encoding="UTF-8"?>
<content-set name="lobby" type="inline">
  <content-item content-type="text/html">
    <requires-file><sources><uri>http://127.0.0.1:9/one.html</uri></sources></requires-file>
  </content-item>
</content-set>
"""
LOBBY_V2 = LOBBY.replace(b"one.html", b"two.html")


def start(tmp_path: Path, schedules_dir: Path | None, **options: object) -> SchedulerService:
    """A scheduler in this process, its data under ``tmp_path/data``, serving on a free port
    of 127.0.0.1 (``service.url``); the caller stops it."""
    service = SchedulerService(
        data_dir=tmp_path / "data",
        schedules_dir=schedules_dir,
        **options,  # type: ignore[arg-type]
    )
    service.start()
    service.server.start()
    return service


def lobby_folder(tmp_path: Path) -> Path:
    """``tmp_path/schedules``, a schedules folder holding ``lobby.xml`` (``LOBBY``)."""
    folder = tmp_path / "schedules"
    folder.mkdir()
    (folder / "lobby.xml").write_bytes(LOBBY)
    return folder


def write(path: Path, data: bytes) -> None:
    """Write so the scheduler's watcher sees a new mtime even within one clock tick."""
    path.write_bytes(data)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


class SchedulerProcess(PdnProcess):
    """``pdn scheduler --data-dir <folder>/data [args]``, up once ``GET /x/schedules``
    answers. ``database``: a PostgreSQL URL (``PDN_DATABASE_URL``); SQLite files otherwise;
    ``program``: what runs ``pdn`` (a profiler wrapped around it, say)."""

    def __init__(
        self,
        folder: Path,
        args: Sequence[str] = (),
        *,
        database: str | None = None,
        env: Mapping[str, str] | None = None,
        unset: Iterable[str] = (*CREDENTIALS, "PDN_DATABASE_URL"),
        port: int | None = None,
        program: Sequence[str] = PDN_MODULE,
    ) -> None:
        settings = dict(env or {})
        if database is not None:
            settings["PDN_DATABASE_URL"] = database
        self.data_dir = folder / "data"
        super().__init__(
            "scheduler",
            folder,
            ["--data-dir", str(self.data_dir), *args],
            port=port,
            probe="/x/schedules",
            env=settings,
            unset=unset,
            program=program,
        )
