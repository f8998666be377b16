"""The durable outbox and playback webhooks, with real HTTP receivers on loopback."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from server.platform.db import connect, transaction
from server.platform.outbox import Outbox, backoff
from tests.support.inprocess_display import Display
from tests.support.pages import HookReceiver
from tests.support.ports import free_port
from tests.support.waiting import wait_until


@pytest.fixture
def receivers() -> Iterator[Callable[..., HookReceiver]]:
    made: list[HookReceiver] = []

    def make(**kwargs: Any) -> HookReceiver:
        receiver = HookReceiver(**kwargs)
        made.append(receiver)
        return receiver

    yield make
    for receiver in made:
        receiver.close()


@pytest.fixture
def outbox(tmp_path: Path) -> Iterator[Outbox]:
    box = Outbox(tmp_path / "outbox.db", name="test", first_retry=0.1, max_backoff=0.4, timeout=0.5)
    box.start()
    yield box
    box.stop()


def test_backoff_schedule() -> None:
    assert backoff(1) <= 2.0  # the first retry within 2 s
    assert [backoff(n, first=1, cap=300) for n in (1, 2, 3, 4)] == [1, 2, 4, 8]
    assert backoff(30) == 300.0


def test_delivers_in_order_with_headers(
    outbox: Outbox, receivers: Callable[..., HookReceiver]
) -> None:
    receiver = receivers()
    assert outbox.subscribe("playback", receiver.url()) is True
    assert outbox.subscribe("playback", receiver.url()) is False
    for n in range(5):
        assert outbox.publish("playback", json.dumps({"n": n}).encode(), "application/json") == 1
    wait_until(lambda: len(receiver.received) == 5)
    assert [json.loads(b)["n"] for b in receiver.bodies()] == [0, 1, 2, 3, 4]
    ids = [r["event-id"] for r in receiver.received]
    assert len(set(ids)) == 5 and all(ids)
    assert {r["topic"] for r in receiver.received} == {"playback"}
    assert {r["content-type"] for r in receiver.received} == {"application/json"}
    wait_until(lambda: outbox.stats()["pending-events"] == 0)


def test_bearer_token_reaches_token_protected_subscribers(
    tmp_path: Path, receivers: Callable[..., HookReceiver]
) -> None:
    box = Outbox(tmp_path / "outbox.db", name="test", bearer_token="s3cret")
    box.start()
    try:
        plain = receivers()
        box.subscribe("schedule:lobby", plain.url())
        # Credentials in the subscriber-uri win: they are that subscriber's own.
        box.subscribe("schedule:lobby", plain.url().replace("//", "//ops:pw@") + "?basic")
        box.publish("schedule:lobby", b"<content-set/>", "text/xml")
        wait_until(lambda: len(plain.received) == 2)
        by_path = {r["path"]: r["authorization"] for r in plain.received}
        assert by_path["/hook"] == "Bearer s3cret"
        assert by_path["/hook?basic"].startswith("Basic ")
    finally:
        box.stop()


def test_500_is_retried_with_the_same_event_id_and_order_kept(
    outbox: Outbox, receivers: Callable[..., HookReceiver]
) -> None:
    receiver = receivers(answer=lambda n: 500 if n <= 3 else 204)
    outbox.subscribe("t", receiver.url())
    for n in range(3):
        outbox.publish("t", str(n).encode(), "text/plain")
    wait_until(lambda: len(receiver.received) == 3)
    assert receiver.bodies() == [b"0", b"1", b"2"]
    assert receiver.attempts == 6  # three failures of the first event, then one each


def test_subscriber_down_then_back_gets_everything_in_order(
    outbox: Outbox, receivers: Callable[..., HookReceiver]
) -> None:
    port = free_port()  # nothing listens there yet
    outbox.subscribe("t", f"http://127.0.0.1:{port}/hook")
    for n in range(10):
        outbox.publish("t", str(n).encode(), "text/plain")
    time.sleep(1.0)  # several failed attempts
    assert outbox.stats()["pending-events"] == 10
    receiver = receivers(port=port)
    wait_until(lambda: len(receiver.received) == 10)
    assert receiver.bodies() == [str(n).encode() for n in range(10)]


def test_slow_and_dead_subscribers_do_not_delay_a_live_one(
    outbox: Outbox, receivers: Callable[..., HookReceiver]
) -> None:
    slow = receivers(delay=2.0)  # longer than the 0.5 s timeout
    live = receivers()
    dead_port = free_port()
    outbox.subscribe("t", slow.url())
    outbox.subscribe("t", f"http://127.0.0.1:{dead_port}/")
    outbox.subscribe("t", live.url())
    started = time.monotonic()
    for n in range(3):
        assert outbox.publish("t", str(n).encode(), "text/plain") == 3
    wait_until(lambda: len(live.received) == 3)
    assert live.received[-1]["at"] - started < 0.4
    assert live.bodies() == [b"0", b"1", b"2"]


def test_subscription_dropped_after_failing_too_long(
    tmp_path: Path, receivers: Callable[..., HookReceiver], caplog: pytest.LogCaptureFixture
) -> None:
    box = Outbox(
        tmp_path / "o.db", name="test", first_retry=0.05, max_backoff=0.1, give_up_after=0.5
    )
    box.start()
    try:
        failing = receivers(answer=lambda n: 503)
        box.subscribe("t", failing.url())
        with caplog.at_level(logging.WARNING, logger="pdn.outbox"):
            box.publish("t", b"x", "text/plain")
            wait_until(lambda: box.subscribers("t") == [])
        assert any("dropped the subscription" in r.getMessage() for r in caplog.records)
        assert box.stats()["pending-events"] == 0
    finally:
        box.stop()


def test_events_survive_a_restart(tmp_path: Path, receivers: Callable[..., HookReceiver]) -> None:
    receiver = receivers()
    path = tmp_path / "o.db"
    first = Outbox(path, name="test")
    first.subscribe("t", receiver.url())
    first.publish("t", b"kept", "text/plain")  # not started: nothing is sent
    first.stop()
    assert receiver.received == []
    second = Outbox(path, name="test")
    second.start()
    try:
        wait_until(lambda: receiver.bodies() == [b"kept"])
    finally:
        second.stop()


def test_publish_joins_the_callers_transaction(
    outbox: Outbox, receivers: Callable[..., HookReceiver]
) -> None:
    receiver = receivers()
    outbox.subscribe("t", receiver.url())
    connection = connect(outbox.db_path)
    with pytest.raises(RuntimeError), transaction(connection):
        outbox.publish("t", b"rolled back", "text/plain", connection=connection)
        raise RuntimeError("the caller's change failed")
    with transaction(connection):
        outbox.publish("t", b"committed", "text/plain", connection=connection)
    outbox.notify()
    wait_until(lambda: receiver.bodies() == [b"committed"])
    connection.close()


def test_unsubscribe_drops_pending_events(outbox: Outbox) -> None:
    dead = f"http://127.0.0.1:{free_port()}/"
    outbox.subscribe("t", dead)
    outbox.publish("t", b"x", "text/plain")
    assert outbox.unsubscribe("t", dead) is True
    assert outbox.unsubscribe("t", dead) is False
    assert outbox.stats()["pending-events"] == 0


def test_playback_updates_reach_subscribers(
    display: Display, receivers: Callable[..., HookReceiver]
) -> None:
    receiver = receivers()
    assert (
        display.post("/playback/subscribe/", json={"subscriber-uri": receiver.url()}).status_code
        == 201
    )
    display.post(
        "/schedule", json={"content-item": "http://example.org/a", "preferred-duration": "1 min"}
    )
    record = display.wait_playback(lambda r: r["content-item"] == "http://example.org/a")
    wait_until(
        lambda: any(json.loads(b)["sequence"] == record["sequence"] for b in receiver.bodies())
    )
    update = json.loads(receiver.bodies()[-1])
    assert update == {**record, "display": display.url}
    assert receiver.received[-1]["event-id"]
