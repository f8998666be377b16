"""The probe queues (server/scheduler/probes.py, pgfleet.py) on both backends: while the health
read finds a display unreachable its info read waits, the display's first answer makes the info
read due at once (counted as back), each read's last failure comes back with its next claim,
and many finished reads are recorded by one call. Also the cheap connect check."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server.platform.sql import SqliteDatabase
from server.scheduler.probes import (
    Finished,
    MemoryProbeQueue,
    ProbeQueue,
    connect_problem,
)
from server.scheduler.storage import SchedulerStorage
from tests.support.ports import free_port

LOCATION = {"latitude": "N54.0104", "longitude": "W2.7883"}
LEASE = 60.0


@pytest.fixture(params=["memory", "postgresql"])
def queue_and_storage(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[ProbeQueue, SchedulerStorage]]:
    storage: SchedulerStorage
    if request.param == "postgresql":
        from server.platform.pg import PgDatabase, open_pool
        from server.scheduler.pgfleet import PgProbeQueue

        pool = open_pool(request.getfixturevalue("postgres_url"), name="test", max_size=2)
        storage = SchedulerStorage(PgDatabase(pool, own_pool=True))
        yield PgProbeQueue(pool), storage
    else:
        storage = SchedulerStorage(SqliteDatabase(tmp_path / "scheduler.sqlite3"))
        yield MemoryProbeQueue(storage), storage
    storage.close()


def registered(queue: ProbeQueue, storage: SchedulerStorage, *urls: str) -> None:
    for url in urls:
        storage.upsert_display(url, LOCATION, None)
        queue.due_now(url)


def unreachable(url: str, failures: int = 1) -> Finished:
    return Finished(url, failures, 0.0, "cannot connect: Connection refused", True)


def test_info_waits_while_health_finds_the_display_unreachable(
    queue_and_storage: tuple[ProbeQueue, SchedulerStorage],
) -> None:
    queue, storage = queue_and_storage
    off, on = "http://192.0.2.1:8080/", "http://192.0.2.2:8080/"
    registered(queue, storage, off, on)
    assert queue.claim("info", 10, LEASE) == []  # GET / waits for the first health read
    assert {c.url for c in queue.claim("health", 10, LEASE)} == {off, on}
    queue.done("health", [unreachable(off), Finished(on, 0, 0.0, None, False)])
    [info] = queue.claim("info", 10, LEASE)  # off's info read stays parked
    assert info.url == on and info.failures == 0
    # The health read says the same again, quickly: still only it is read.
    health = {c.url: c for c in queue.claim("health", 10, LEASE)}
    assert health[off].failures == 1
    assert health[off].last_error == "cannot connect: Connection refused"
    assert health[on].last_error is None
    queue.done("health", [unreachable(off, 2)])
    assert queue.claim("info", 10, LEASE) == []
    # It answers: its info read is due at once, and counted as back after failures.
    assert off in {c.url for c in queue.claim("health", 10, LEASE)}
    queue.done("health", [Finished(off, 0, 0.0, None, False)])
    [info] = queue.claim("info", 10, LEASE)
    assert info.url == off and info.failures >= 1


def test_an_info_read_under_way_when_its_display_goes_off_stays_parked(
    queue_and_storage: tuple[ProbeQueue, SchedulerStorage],
) -> None:
    queue, storage = queue_and_storage
    url = "http://192.0.2.3:8080/"
    registered(queue, storage, url)
    assert len(queue.claim("health", 10, LEASE)) == 1
    queue.done("health", [Finished(url, 0, 0.0, None, False)])
    assert len(queue.claim("info", 10, LEASE)) == 1  # under way
    assert len(queue.claim("health", 10, LEASE)) == 1
    queue.done("health", [unreachable(url)])
    queue.done("info", [Finished(url, 1, 0.0, "cannot connect: Connection refused", True)])
    assert queue.claim("info", 10, LEASE) == []
    # A failure that is an answer (HTTP 500) is no reason to stop reading GET /.
    queue.claim("health", 10, LEASE)
    queue.done("health", [Finished(url, 2, 0.0, "/x/health answered 500", False)])
    assert [c.url for c in queue.claim("info", 10, LEASE)] == [url]


def test_registering_again_starts_afresh(
    queue_and_storage: tuple[ProbeQueue, SchedulerStorage],
) -> None:
    queue, storage = queue_and_storage
    url = "http://192.0.2.4:8080/"
    registered(queue, storage, url)
    queue.claim("health", 10, LEASE)
    queue.done("health", [unreachable(url)])
    registered(queue, storage, url)
    [health] = queue.claim("health", 10, LEASE)
    assert (health.url, health.failures, health.last_error) == (url, 0, None)
    assert health.first  # a bare connect first
    queue.done("health", [Finished(url, 0, 0.0, None, False)])
    [info] = queue.claim("info", 10, LEASE)
    assert (info.url, info.failures, info.first) == (url, 0, False)  # health found it there
    queue.done("health", [Finished(url, 0, 0.0, None, False)])
    [again] = queue.claim("health", 10, LEASE)
    assert not again.first and not again.doubtful


def test_many_finished_reads_are_recorded_at_once(
    queue_and_storage: tuple[ProbeQueue, SchedulerStorage],
) -> None:
    queue, storage = queue_and_storage
    urls = [f"http://192.0.2.10:{8000 + n}/" for n in range(50)]
    registered(queue, storage, *urls)
    assert len(queue.claim("health", 100, LEASE)) == 50
    queue.done("health", [Finished(u, 3, 300.0, "gone", True) for u in urls])
    assert queue.claim("health", 100, LEASE) == []  # due in 300 s, not at the lease's end


def test_connect_problem() -> None:
    port = free_port()
    assert connect_problem(f"http://127.0.0.1:{port}/", 5.0) == "cannot connect: Connection refused"
    assert connect_problem("http://127.0.0.1:notaport/", 5.0) is not None
