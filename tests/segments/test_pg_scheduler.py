"""Several schedulers on one PostgreSQL database act as one (issue 14): what one registers the
others list, each display is read (probed) by one of them, and the storage is PostgreSQL's."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from server.scheduler.pgstorage import PgStorage
from server.scheduler.service import SchedulerService
from tests.segments.conftest import HttpPeer, wait_until

LOCATION = {"latitude": "N54.0104", "longitude": "W2.7883"}


@pytest.fixture
def schedulers(tmp_path: Path, postgres_url: str) -> Iterator[list[SchedulerService]]:
    started: list[SchedulerService] = []
    for n in range(3):
        schedules = tmp_path / f"schedules{n}"
        schedules.mkdir()
        service = SchedulerService(
            data_dir=tmp_path / f"data{n}",
            schedules_dir=schedules,
            database=postgres_url,
            refresh_interval=0.5,
        )
        service.start()
        service.server.start()
        started.append(service)
    yield started
    for service in started:
        service.stop()


def test_a_registration_on_one_is_seen_on_the_others(schedulers: list[SchedulerService]) -> None:
    assert all(isinstance(s.storage, PgStorage) for s in schedulers)
    first, *others = schedulers
    answer = requests.post(
        f"{first.url}/displays",
        json={"url": "http://192.0.2.7:8080", "location": LOCATION},
        timeout=5,
    )
    assert answer.status_code == 201
    for other in others:
        listing = requests.get(f"{other.url}/displays", timeout=5).json()
        assert [d["url"] for d in listing] == ["http://192.0.2.7:8080"]


def test_each_display_is_read_by_one_scheduler(
    schedulers: list[SchedulerService], peer: HttpPeer
) -> None:
    peer.route("GET", "/", body={"name": "hall"})
    requests.post(
        f"{schedulers[1].url}/displays", json={"url": peer.url, "location": LOCATION}, timeout=5
    )
    wait_until(lambda: peer.received("/", method="GET"))
    # Read again every refresh (0.5 s) by whichever scheduler claims it first: never by two
    # at once, so the reads stay about one per refresh in total, not one per scheduler.
    before = len(peer.received("/", method="GET"))
    time.sleep(3.0)
    reads = len(peer.received("/", method="GET")) - before
    assert 2 <= reads <= 9, reads
