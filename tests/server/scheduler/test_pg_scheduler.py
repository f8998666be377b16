"""Several schedulers on one PostgreSQL database act as one: what one registers the
others list, each display is read (probed) by one of them, the schedules are the database's
(written through one, served by all) and a change is pushed once per subscriber in total."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from server.scheduler.service import SchedulerService
from tests.support.fleet import put_schedule
from tests.support.inprocess_display import cds
from tests.support.pages import PageServer
from tests.support.waiting import wait_until

LOCATION = {"latitude": "N54.0104", "longitude": "W2.7883"}


@pytest.fixture
def schedulers(
    tmp_path: Path, postgres_url: str, run_scheduler: Callable[..., SchedulerService]
) -> list[SchedulerService]:
    """Three schedulers on one database, each with a schedules folder of its own."""
    started = []
    for n in range(3):
        schedules = tmp_path / f"schedules{n}"
        schedules.mkdir()
        started.append(
            run_scheduler(f"data{n}", schedules, database=postgres_url, refresh_interval=0.5)
        )
    return started


def test_a_registration_on_one_is_seen_on_the_others(schedulers: list[SchedulerService]) -> None:
    assert all(s.storage.database.dialect == "postgresql" for s in schedulers)
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
    schedulers: list[SchedulerService], peer: PageServer
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


@pytest.fixture
def two_without_folders(
    postgres_url: str, run_scheduler: Callable[..., SchedulerService]
) -> list[SchedulerService]:
    return [run_scheduler(f"solo{n}", None, database=postgres_url) for n in range(2)]


def _events(peer: PageServer, path: str) -> list[str]:
    return [r.headers["X-PDN-Event-Id"] for r in peer.received(path)]


def test_a_schedule_put_through_one_is_served_by_the_other_and_pushed_once(
    two_without_folders: list[SchedulerService], peer: PageServer
) -> None:
    first, second = two_without_folders
    assert first.library.directory is None  # --schedules is optional
    assert put_schedule(first.url, "hall", cds("hall", "http://127.0.0.1:9/a.html")).ok
    # Served by the other at once (its copy is refreshed by NOTIFY; the database is the source).
    served = wait_until(
        lambda: (r := requests.get(f"{second.url}/schedule/hall/", timeout=5)).ok and r
    )
    assert b"a.html" in served.content
    # Subscribers on both processes; the change goes through the second one.
    for n in range(4):
        target = first if n % 2 else second
        answer = requests.post(
            f"{target.url}/schedule/hall/subscribe/",
            json={"subscriber-uri": f"{peer.url}/s{n}"},
            timeout=5,
        )
        assert answer.status_code == 201
    changed = put_schedule(second.url, "hall", cds("hall", "http://127.0.0.1:9/b.html"))
    assert changed.status_code == 204
    wait_until(lambda: b"b.html" in requests.get(f"{first.url}/schedule/hall/", timeout=5).content)
    for n in range(4):
        peer.wait_for(1, f"/s{n}")
    # The same document again changes nothing and pushes nothing.
    assert put_schedule(first.url, "hall", cds("hall", "http://127.0.0.1:9/b.html")).ok
    time.sleep(1.5)
    for n in range(4):
        received = peer.received(f"/s{n}")
        assert len(received) == 1, (n, len(received))
        assert b"b.html" in received[0].body
    # A removal through one: gone from both, pushed once as an empty set.
    assert requests.delete(f"{first.url}/x/schedules/hall", timeout=5).status_code == 204
    wait_until(lambda: requests.get(f"{second.url}/schedule/hall/", timeout=5).status_code == 404)
    for n in range(4):
        peer.wait_for(2, f"/s{n}")
    time.sleep(1.0)
    assert all(len(peer.received(f"/s{n}")) == 2 for n in range(4))


def test_processes_watching_one_folder_push_a_file_change_once(
    tmp_path: Path,
    postgres_url: str,
    peer: PageServer,
    run_scheduler: Callable[..., SchedulerService],
) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "foyer.xml").write_bytes(cds("foyer", "http://127.0.0.1:9/a.html"))
    schedulers = [
        run_scheduler(f"solo{n}", watched, database=postgres_url)
        for n, watched in enumerate([folder, folder, None])
    ]
    for n, service in enumerate(schedulers):
        answer = requests.post(
            f"{service.url}/schedule/foyer/subscribe/",
            json={"subscriber-uri": f"{peer.url}/s{n}"},
            timeout=5,
        )
        assert answer.status_code == 201
    # Both watchers see the change; the one whose transaction stores it publishes it.
    (folder / "foyer.xml").write_bytes(cds("foyer", "http://127.0.0.1:9/b.html"))
    for n in range(3):
        peer.wait_for(1, f"/s{n}")
    (folder / "foyer.xml").unlink()
    for n in range(3):
        peer.wait_for(2, f"/s{n}")
    time.sleep(2.0)
    for n in range(3):
        got = peer.received(f"/s{n}")
        assert len(got) == 2, (n, [(r.headers["X-PDN-Event-Id"], r.body[-60:]) for r in got])
    # The third (no folder) serves what the database holds: nothing now.
    third = schedulers[2]
    assert requests.get(f"{third.url}/schedule/foyer/", timeout=5).status_code == 404
