"""Several schedulers on one PostgreSQL share the background reads of the displays:
each display is read by one of them per round, a process killed with ``kill -9`` leaves its
displays to the others, every process answers ``GET /x/fleet`` alike, and what was written
through one is answered by another at once (no 404 while a notification is on its way)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from server.scheduler.service import SchedulerService
from tests.support.fleet import put_schedule
from tests.support.inprocess_display import cds
from tests.support.pages import PageServer
from tests.support.scheduler import SchedulerProcess
from tests.support.waiting import wait_until

LOCATION = {"latitude": "N54.0104", "longitude": "W2.7883"}


def health_reads(peer: PageServer) -> Counter[str]:
    """Reads of each display's /x/health (displays are paths /d<n> of the peer)."""
    return Counter(
        r.path.split("/x/health")[0] for r in peer.received(method="GET") if "/x/health" in r.path
    )


def subscribers(peer: PageServer) -> list[str]:
    """The scheduler (its base URL) behind each playback subscription, in order."""
    return [
        r.json()["subscriber-uri"].split("/x/ingest")[0]
        for r in peer.received()
        if r.path.endswith("/playback/subscribe/")
    ]


def register(base: str, url: str) -> None:
    answer = requests.post(f"{base}/displays", json={"url": url, "location": LOCATION}, timeout=5)
    assert answer.status_code == 201, answer.text


@pytest.fixture
def three(
    postgres_url: str, run_scheduler: Callable[..., SchedulerService]
) -> list[SchedulerService]:
    return [
        run_scheduler(f"data{n}", None, database=postgres_url, refresh_interval=0.5)
        for n in range(3)
    ]


def test_each_display_is_read_once_a_round_by_one_of_three(
    three: list[SchedulerService], peer: PageServer
) -> None:
    displays = [f"/d{n}" for n in range(4)]
    for n, path in enumerate(displays):
        register(three[n % 3].url, f"{peer.url}{path}")
    wait_until(lambda: set(health_reads(peer)) == set(displays))
    before = health_reads(peer)
    time.sleep(3.0)
    reads = health_reads(peer) - before
    # Rounds of 0.5 s: about 6 reads each in 3 s; each of three processes reading each
    # display every round would make about 18.
    for path in displays:
        assert 2 <= reads[path] <= 9, reads


def test_fleet_status_is_the_same_from_every_process(
    three: list[SchedulerService], peer: PageServer
) -> None:
    peer.route("GET", "/d0/x/health", body={"status": "degraded", "version": "9.9"})
    peer.route("GET", "/d1/x/health", status=500)
    register(three[0].url, f"{peer.url}/d0")
    register(three[1].url, f"{peer.url}/d1")

    def summary(base: str) -> list[tuple[Any, ...]]:
        return [
            (e["display"], e["online"], e["health"]["status"], e["version"])
            for e in requests.get(f"{base}/x/fleet", timeout=5).json()
        ]

    expected = [(f"{peer.url}/d0", True, "degraded", "9.9"), (f"{peer.url}/d1", False, None, None)]
    for service in three:
        base = service.url
        wait_until(lambda: summary(base) == expected)  # noqa: B023 (called at once)
    # The thumbnail taken by whichever process read the display is served by all (it is taken
    # a moment after the display's health is stored: a fresh-root run saw it missing).
    for service in three:

        def thumbnail(base: str = service.url) -> requests.Response:
            params = {"display": f"{peer.url}/d0"}
            return requests.get(f"{base}/x/displays/thumbnail", params=params, timeout=5)

        wait_until(lambda: thumbnail().status_code == 200)
        assert thumbnail().headers["Content-Type"].startswith("image/")


def test_written_through_one_answered_at_once_by_another(
    three: list[SchedulerService], peer: PageServer
) -> None:
    first, second, _third = three
    for n in range(5):
        # The second learns of the schedule by a notification; it asks the database first.
        assert put_schedule(first.url, f"s{n}", cds(f"s{n}", "http://127.0.0.1:9/a.html")).ok
        answer = requests.post(
            f"{second.url}/schedule/s{n}/subscribe/",
            json={"subscriber-uri": f"{peer.url}/sub{n}"},
            timeout=5,
        )
        assert answer.status_code == 201, answer.text
        assert requests.get(f"{second.url}/schedule/s{n}/", timeout=5).status_code == 200
        # A display registered through one is known to the other at once.
        register(first.url, f"{peer.url}/r{n}")
        shot = requests.get(
            f"{second.url}/x/displays/thumbnail", params={"display": f"{peer.url}/r{n}"}, timeout=5
        )
        # 404 no-thumbnail (not read yet) or 200 (read already): never unknown-display.
        assert shot.status_code == 200 or shot.json()["error"] == "no-thumbnail", shot.text
        assert f"{peer.url}/r{n}" in [
            e["display"] for e in requests.get(f"{second.url}/x/fleet", timeout=5).json()
        ]


def test_a_killed_process_leaves_its_displays_to_the_other(
    tmp_path: Path, postgres_url: str, peer: PageServer
) -> None:
    started: list[SchedulerProcess] = []
    try:
        for n in range(2):
            process = SchedulerProcess(
                tmp_path / f"p{n}", ["--refresh", "1"], database=postgres_url,
                env={"PDN_PROBE_LEASE": "3"},
            )  # fmt: skip
            started.append(process.start())
        for process in started:
            process.wait_ready()
        displays = [f"/d{n}" for n in range(6)]
        for n, path in enumerate(displays):
            register(started[n % 2].url, f"{peer.url}{path}")
        wait_until(lambda: set(health_reads(peer)) == set(displays))
        # Kill the one that read a display last (its reads must be taken over).
        wait_until(lambda: len(subscribers(peer)) >= len(displays))
        busy = subscribers(peer)[-1]
        victim = next(p for p in started if p.url == busy)
        survivor = next(p for p in started if p is not victim)
        victim.kill()
        time.sleep(4.0)  # the claims it held run out (PDN_PROBE_LEASE=3)
        before = health_reads(peer)
        took_over = len(subscribers(peer))
        time.sleep(4.0)
        reads = health_reads(peer) - before
        # Every display still read every round (1 s), now by the survivor alone.
        for path in displays:
            assert reads[path] >= 2, reads
        assert set(subscribers(peer)[took_over:]) == {survivor.url}
        fleet = requests.get(f"{survivor.url}/x/fleet", timeout=5).json()
        assert [e["online"] for e in fleet] == [True] * len(displays)
    finally:
        # stop(): None when it was still there 20 s after SIGTERM (then killed).
        stubborn = [process.url for process in started if process.stop() is None]
    assert not stubborn, f"did not stop within 20 s of SIGTERM (killed): {stubborn}"
