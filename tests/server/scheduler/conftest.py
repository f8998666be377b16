"""Fixtures of the scheduler tests: schedulers in this process (stopped at the end), the
fleet's scheduler and its displays (``tests.support.fleet``), and a display playing the lobby.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from server.scheduler.service import SchedulerService
from tests.support.factories import started_by
from tests.support.fleet import Screen, put_schedule, start_screen
from tests.support.inprocess_display import cds
from tests.support.lan import ENROLMENT, OPERATOR, Scheduler, start_lan_scheduler
from tests.support.scheduler import start

LOBBY_ITEM = "http://127.0.0.1:9/lobby.html"


@pytest.fixture
def run_scheduler(tmp_path: Path) -> Iterator[Callable[..., SchedulerService]]:
    """``run_scheduler(name, schedules_dir=None, **options)``: a scheduler in this process,
    its data in ``tmp_path/name/data``, serving on a free port; every one is stopped at the
    end of the test."""

    def run(name: str, schedules_dir: Path | None = None, **options: Any) -> SchedulerService:
        return start(tmp_path / name, schedules_dir, **options)

    yield from started_by(run, SchedulerService.stop)


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[SchedulerService]:
    """The fleet's scheduler: a schedules folder of its own, displays read every 0.3 s."""
    schedules = tmp_path / "schedules"
    schedules.mkdir()
    service = start(tmp_path / "scheduler", schedules, refresh_interval=0.3)
    yield service
    service.stop()


@pytest.fixture
def make_screen(tmp_path: Path, scheduler: SchedulerService) -> Iterator[Callable[..., Screen]]:
    """``make_screen(name, groups=None, clock_sync=None, token=None, painted=False)``: a
    display of the fleet (``tests.support.fleet.start_screen``) registered with ``scheduler``;
    all closed at the end. (The scheduler's own fleet: not the in-process display plugin's
    ``make_screen``.)"""

    def make(
        name: str,
        groups: list[str] | None = None,
        clock_sync: Any = None,
        token: str | None = None,
        painted: bool = False,
    ) -> Screen:
        folder = tmp_path / f"display-{name}"
        return start_screen(folder, scheduler, name, groups, clock_sync, token, painted)

    yield from started_by(make, Screen.close)


@pytest.fixture
def lobby_screen(scheduler: SchedulerService, make_screen: Callable[..., Screen]) -> Screen:
    """A display of the fleet, and the schedule ``lobby`` (one item, ``LOBBY_ITEM``) stored
    on the scheduler, not assigned yet."""
    put_schedule(scheduler.url, "lobby", cds("lobby", LOBBY_ITEM))
    return make_screen("lobby")


#: The operator token of ``locked_scheduler``.
TOKEN = "t0k"


@pytest.fixture
def locked_scheduler(
    run_scheduler: Callable[..., SchedulerService], tmp_path: Path
) -> SchedulerService:
    """A scheduler with the operator token ``TOKEN`` and an empty schedules folder."""
    schedules = tmp_path / "s"
    schedules.mkdir()
    return run_scheduler("d", schedules, token=TOKEN)


@pytest.fixture
def make_scheduler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Scheduler]]:
    """``make_scheduler(token=OPERATOR, enrolment=ENROLMENT, name=None, **options)``: a
    scheduler beyond loopback (``tests.support.lan``) with that operator token, displays
    enrolled with that token (none if None), its data in ``tmp_path/<name>`` (by default
    ``scheduler<n>``, the n-th made; a name made before again: a restart) and displays read
    every second unless ``options`` say otherwise; all closed at the end."""
    numbers = itertools.count()

    def make(
        token: str | None = OPERATOR,
        enrolment: str | None = ENROLMENT,
        name: str | None = None,
        **options: Any,
    ) -> Scheduler:
        if enrolment:
            monkeypatch.setenv("PDN_ENROLMENT_TOKEN", enrolment)
        else:
            monkeypatch.delenv("PDN_ENROLMENT_TOKEN", raising=False)
        folder = tmp_path / (name or f"scheduler{next(numbers)}")
        return start_lan_scheduler(folder, token, **{"refresh_interval": 1.0, **options})

    yield from started_by(make, Scheduler.close)
