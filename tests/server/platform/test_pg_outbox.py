"""The PostgreSQL outbox (server/platform/pgoutbox.py) and migrations (server/platform/pg.py) on a
real PostgreSQL
(tests/support/pgserver.py): delivery rules as the SQLite outbox's, then two and three delivery
processes (real subprocesses, tests/support/pgworker.py) on one database: every change acknowledged
exactly once per subscriber in total, one process killed with SIGKILL mid-delivery included."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from server.platform.db import SchemaTooNewError
from server.platform.limits import SubscriptionLimitError
from server.platform.pg import Connection, migrate, open_pool, schema_version, transaction
from server.platform.pgoutbox import PgOutbox
from tests.support.pgworker import PgWorker
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import Receiver


@pytest.fixture
def pool(postgres_url: str) -> Iterator[ConnectionPool[Connection]]:
    opened = open_pool(postgres_url, name="test", max_size=4)
    yield opened
    opened.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver().start_thread()
    yield made
    made.release()
    made.close()


def test_migrations_run_once_when_several_processes_start_together(postgres_url: str) -> None:
    steps = (("CREATE TABLE once (n INTEGER)", "INSERT INTO once VALUES (1)"), ("SELECT 1",))
    errors: list[BaseException] = []
    found: list[int] = []

    def start() -> None:
        try:
            with ConnectionPool(postgres_url, min_size=1, max_size=1, open=True) as own:
                own.wait()
                found.append(migrate(own, steps, component="t"))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert sorted(found) == [0, 2, 2, 2, 2, 2]
    with psycopg.connect(postgres_url) as connection:
        assert connection.execute("SELECT COUNT(*) FROM once").fetchone() == (1,)
        assert schema_version(connection, "t") == 2
    with (
        ConnectionPool(postgres_url, min_size=1, max_size=1, open=True) as own,
        pytest.raises(SchemaTooNewError),
    ):
        migrate(own, steps[:1], component="t")


def test_events_go_out_in_order_with_retries_and_a_stable_event_id(
    pool: ConnectionPool[Connection], receiver: Receiver
) -> None:
    box = PgOutbox(pool, name="t", first_retry=0.1, timeout=2.0)
    box.start()
    try:
        assert box.subscribe("topic", f"{receiver.url}/a") is True
        assert box.subscribe("topic", f"{receiver.url}/a") is False
        receiver.dead.add("/a")
        for n in range(5):
            assert box.publish("topic", f"{n}".encode(), "text/plain") == 1
        wait_until(lambda: len(receiver.records()) >= 3)
        receiver.dead.clear()
        wait_until(lambda: len(receiver.acknowledged().get("/a", [])) == 5)
        bodies = [r.body for r in receiver.records() if r.acknowledged]
        assert bodies == [b"0", b"1", b"2", b"3", b"4"]
        first = {r.event_id for r in receiver.records() if r.body == b"0"}
        assert len(first) == 1  # every retry carries the same X-PDN-Event-Id
        wait_until(lambda: box.stats()["pending-events"] == 0)
        assert box.stats()["delivered"] == 5
    finally:
        box.stop()


def test_publish_joins_the_callers_transaction(
    pool: ConnectionPool[Connection], receiver: Receiver
) -> None:
    box = PgOutbox(pool, name="t")
    box.start()
    try:
        box.subscribe("topic", f"{receiver.url}/a")
        with pytest.raises(RuntimeError), transaction(pool) as connection:
            box.publish("topic", b"rolled back", "text/plain", connection=connection)
            raise RuntimeError("the caller's change fails")
        with transaction(pool) as connection:
            box.publish("topic", b"committed", "text/plain", connection=connection)
        wait_until(lambda: receiver.acknowledged().get("/a"))
        time.sleep(0.3)
        assert [r.body for r in receiver.records()] == [b"committed"]
    finally:
        box.stop()


def test_bounds_unsubscribe_and_expiry(
    pool: ConnectionPool[Connection], receiver: Receiver
) -> None:
    box = PgOutbox(
        pool, name="t", max_subscriptions=2, max_backlog=3, first_retry=0.05, give_up_after=1.0
    )
    box.subscribe("topic", f"{receiver.url}/a")
    box.subscribe("topic", f"{receiver.url}/b")
    with pytest.raises(SubscriptionLimitError):
        box.subscribe("topic", f"{receiver.url}/c")
    for n in range(5):
        box.publish("topic", f"{n}".encode(), "text/plain")
    assert box.stats()["pending-events"] == 6  # three each: the two oldest of each dropped
    assert box.unsubscribe("topic", f"{receiver.url}/b") is True
    assert box.unsubscribe("topic", f"{receiver.url}/b") is False
    assert box.stats()["pending-events"] == 3
    receiver.dead.add("/a")
    box.start()
    try:
        wait_until(lambda: box.stats()["subscriptions"] == 0, timeout=20)
        assert box.stats()["expired-subscriptions"] == 1
        assert box.stats()["pending-events"] == 0
    finally:
        box.stop()


def test_latest_only_keeps_the_newest_for_a_failing_subscriber(
    pool: ConnectionPool[Connection], receiver: Receiver
) -> None:
    box = PgOutbox(pool, name="t", first_retry=0.2, max_backoff=0.5)
    box.subscribe("sensor", f"{receiver.url}/a")
    receiver.dead.add("/a")
    box.start()
    try:
        box.publish("sensor", b"0", "text/plain", latest_only=True)
        wait_until(receiver.records)
        for n in range(1, 6):
            box.publish("sensor", f"{n}".encode(), "text/plain", latest_only=True)
        assert box.stats()["pending-events"] == 1
        receiver.dead.clear()
        wait_until(lambda: receiver.acknowledged().get("/a"))
        assert [r.body for r in receiver.records() if r.acknowledged] == [b"5"]
    finally:
        box.stop()


# Several processes on one database


@pytest.fixture
def workers() -> Iterator[list[PgWorker]]:
    started: list[PgWorker] = []
    yield started
    for worker in started:
        if worker.process.poll() is None:
            worker.kill()


@pytest.mark.slow
@pytest.mark.parametrize("processes", [2, 3])
def test_a_change_is_pushed_once_in_total_by_several_processes(
    postgres_url: str,
    pool: ConnectionPool[Connection],
    receiver: Receiver,
    workers: list[PgWorker],
    processes: int,
) -> None:
    subscribers = 60
    publisher = PgOutbox(pool, name="api")  # an API process: publishes, delivers nothing
    for n in range(subscribers):
        publisher.subscribe("schedule:s", f"{receiver.url}/d{n}")
    workers.extend(PgWorker(postgres_url, 10.0, 5.0) for _ in range(processes))
    for change in range(3):
        assert publisher.publish("schedule:s", f"v{change}".encode(), "text/xml") == subscribers
    wait_until(lambda: sum(map(len, receiver.acknowledged().values())) >= 3 * subscribers)
    time.sleep(0.5)  # any duplicate would arrive by now
    records = receiver.records()
    assert len(records) == 3 * subscribers and all(r.acknowledged for r in records)
    for path, events in receiver.acknowledged().items():
        bodies = [r.body for r in records if r.path == path]
        assert bodies == [b"v0", b"v1", b"v2"], path  # per subscriber, in order
        assert len(set(events)) == 3
    stats = [worker.stop() for worker in workers]
    delivered = [s["delivered"] for s in stats if s is not None]
    assert sum(delivered) == 3 * subscribers
    assert publisher.stats()["pending-events"] == 0


@pytest.mark.slow
def test_a_process_killed_mid_delivery_loses_nothing_and_nothing_goes_twice(
    postgres_url: str,
    pool: ConnectionPool[Connection],
    receiver: Receiver,
    workers: list[PgWorker],
) -> None:
    subscribers = 60
    publisher = PgOutbox(pool, name="api")
    for n in range(subscribers):
        publisher.subscribe("schedule:s", f"{receiver.url}/d{n}")
    lease = 6.0
    workers.extend(PgWorker(postgres_url, lease, 5.0) for _ in range(3))
    receiver.hold()  # every POST stays in flight until released
    publisher.publish("schedule:s", b"change", "text/xml")
    wait_until(lambda: receiver.in_flight == subscribers)
    with transaction(pool) as connection:  # owner: host:pid:nonce
        owners = connection.execute(
            "SELECT split_part(owner, ':', 2)::int, COUNT(*) FROM pdn_outbox_subscriptions"
            " GROUP BY 1 ORDER BY 2 DESC"
        ).fetchall()
    killed = next(w for w in workers if w.process.pid == owners[0][0])
    killed.kill()  # kill -9 with its POSTs in flight
    time.sleep(0.5)
    receiver.release()
    # The dead process's claims run out after the lease; the others deliver its share.
    wait_until(lambda: len(receiver.acknowledged()) == subscribers, timeout=lease * 3)
    time.sleep(1.0)
    records = receiver.records()
    lost = [r for r in records if not r.acknowledged]
    assert lost, "the killed process had nothing in flight: nothing was tested"
    acknowledged = receiver.acknowledged()
    assert all(len(events) == 1 for events in acknowledged.values()), acknowledged
    for record in lost:  # sent again, by another process, with the same event id
        assert acknowledged[record.path] == [record.event_id]
    stats = [worker.stop() for worker in workers if worker is not killed]
    assert sum(s["delivered"] for s in stats if s is not None) == subscribers
    assert publisher.stats()["pending-events"] == 0


def test_a_receiver_that_never_answers_does_not_hold_up_live_ones(
    pool: ConnectionPool[Connection], receiver: Receiver
) -> None:
    """Four POSTs in flight at most, six subscribers that accept and never answer, claimed
    first: the live ones are all delivered while every silent one is still unanswered (each
    POST is allowed 60 s), because a POST unanswered after ``slow_after`` leaves the live
    subscribers' share of the slots."""
    box = PgOutbox(pool, name="t", max_connections=4, slow_after=0.2, timeout=60.0)
    silent = [f"/silent{n}" for n in range(6)]
    live = [f"/live{n}" for n in range(30)]
    receiver.silent.update(silent)
    for path in silent + live:  # the silent ones first: the lowest ids, claimed first
        box.subscribe("topic", f"{receiver.url}{path}")
    box.start()
    try:
        assert box.publish("topic", b"change", "text/plain") == len(silent) + len(live)
        wait_until(lambda: len(receiver.acknowledged()) == len(live), timeout=30)
        assert receiver.unanswered == len(silent)  # none given up, none answered
        assert not [r for r in receiver.records() if r.path in silent]
        assert sorted(receiver.acknowledged()) == sorted(live)
    finally:
        box.stop(timeout=2.0)


@pytest.mark.slow
def test_batch_claims_by_two_processes_deliver_each_event_once_in_order(
    postgres_url: str,
    pool: ConnectionPool[Connection],
    receiver: Receiver,
    workers: list[PgWorker],
) -> None:
    """More subscribers than one claim takes (server.platform.delivery.CLAIM_BATCH): the two
    processes claim batch after batch side by side, and still every subscriber gets every
    change once, in publication order."""
    subscribers = 1200
    publisher = PgOutbox(pool, name="api", max_subscriptions=subscribers)
    for n in range(subscribers):
        publisher.subscribe("schedule:s", f"{receiver.url}/d{n}")
    workers.extend(PgWorker(postgres_url, 10.0, 5.0) for _ in range(2))
    for change in range(2):
        assert publisher.publish("schedule:s", f"v{change}".encode(), "text/xml") == subscribers
    wait_until(
        lambda: sum(map(len, receiver.acknowledged().values())) >= 2 * subscribers, timeout=60
    )
    time.sleep(0.5)  # any duplicate would arrive by now
    records = receiver.records()
    assert len(records) == 2 * subscribers and all(r.acknowledged for r in records)
    by_path: dict[str, list[bytes]] = {}
    for record in records:
        by_path.setdefault(record.path, []).append(record.body)
    assert len(by_path) == subscribers
    assert all(bodies == [b"v0", b"v1"] for bodies in by_path.values())
    stats = [worker.stop() for worker in workers]
    delivered = [s["delivered"] for s in stats if s is not None]
    assert sum(delivered) == 2 * subscribers
    assert all(count > 0 for count in delivered), delivered  # both took part
    assert publisher.stats()["pending-events"] == 0
