"""The request queue's progress is written off the GUI thread (player/writer.py).

The engine stores a request's time left when its item is shown, and removes it when it ends,
on the GUI thread. With those writes made there, a slow disk (an SD card flushing, a disk others
share) held the screen for the length of each fsync. A slow disk is simulated by a store whose
writes wait.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

import pytest

from cds.playlist import Playlist
from player.engine import Engine
from player.store import DisplayStore
from player.writer import DeferredQueueStore, OrderedWriter
from tests.player.test_engine import Clock, ManualRenderer


class SlowQueueStore:
    """The display's store, with each progress write waiting ``hold`` seconds, or failing."""

    def __init__(self, store: DisplayStore, hold: float) -> None:
        self.store = store
        self.hold = hold
        self.fail = False
        self.writers: set[str] = set()

    def queued_requests(self) -> list[object]:
        return list(self.store.queued_requests())

    def push_request(self, url: str, duration: float, received: float) -> int:
        return self.store.push_request(url, duration, received)

    def update_request(self, request_id: int, remaining: float, shown_at: float | None) -> None:
        self._wait()
        self.store.update_request(request_id, remaining, shown_at)

    def remove_request(self, request_id: int) -> None:
        self._wait()
        self.store.remove_request(request_id)

    def _wait(self) -> None:
        self.writers.add(threading.current_thread().name)
        time.sleep(self.hold)
        if self.fail:
            raise OSError(28, "No space left on device")


@dataclass
class Kiosk:
    engine: Engine
    renderer: ManualRenderer
    disk: SlowQueueStore
    writer: OrderedWriter
    clock: Clock

    def show_request(self) -> None:
        """The engine shows the request it was given; the renderer reports it painted."""
        self.engine.tick()
        self.engine.item_shown(self.renderer.last.token, self.clock(), None)


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[Kiosk]:
    store = DisplayStore(tmp_path / "display.db")
    disk = SlowQueueStore(store, hold=1.0)
    writer = OrderedWriter("queue-writer")
    clock = Clock()
    renderer = ManualRenderer()
    engine = Engine(
        clock=clock,
        schedule=Playlist(UTC),
        store=DeferredQueueStore(disk, writer),
        renderer=renderer,
    )
    renderer.set_listener(engine)
    try:
        yield Kiosk(engine, renderer, disk, writer, clock)
    finally:
        writer.close()
        store.close()


def test_a_slow_disk_does_not_hold_the_screen(slow: Kiosk) -> None:
    engine, disk, writer, clock = slow.engine, slow.disk, slow.writer, slow.clock
    assert engine.request("http://example.org/r1", 5) is None
    started = time.monotonic()
    slow.show_request()  # stores its time left
    clock.advance(5)
    engine.tick()  # its end: removed from the queue
    took = time.monotonic() - started
    # Before: 2 s (two writes of 1 s each, on the thread that draws).
    assert took < 0.5, f"the engine waited {took:.2f} s for the disk"
    assert disk.store.queued_requests() != []  # not yet written

    assert writer.flush(10)
    assert disk.store.queued_requests() == []  # written, in order: updated, then removed
    assert disk.writers == {"queue-writer"}


def test_a_failed_write_is_logged_and_the_next_ones_are_made(
    slow: Kiosk, caplog: pytest.LogCaptureFixture
) -> None:
    engine, disk, writer, clock = slow.engine, slow.disk, slow.writer, slow.clock
    disk.hold = 0.0
    engine.request("http://example.org/r1", 5)
    engine.request("http://example.org/r2", 5)
    disk.fail = True
    with caplog.at_level(logging.WARNING, logger="pdn.writer"):
        slow.show_request()
        assert writer.flush(10)
    assert "could not store request" in caplog.text
    assert "No space left on device" in caplog.text
    disk.fail = False
    clock.advance(5)
    engine.tick()  # r1 ends: removed; r2 shows
    assert writer.flush(10)
    assert [request.url for request in disk.store.queued_requests()] == ["http://example.org/r2"]


def test_close_makes_the_writes_still_queued(tmp_path: Path) -> None:
    store = DisplayStore(tmp_path / "display.db")
    disk = SlowQueueStore(store, hold=0.2)
    writer = OrderedWriter("queue-writer")
    deferred = DeferredQueueStore(disk, writer)
    first = deferred.push_request("http://example.org/r1", 5, time.time())
    second = deferred.push_request("http://example.org/r2", 5, time.time())
    deferred.update_request(first, 2.5, time.time())
    deferred.remove_request(second)
    writer.close()
    queued = store.queued_requests()
    assert [(request.id, request.remaining) for request in queued] == [(first, 2.5)]
    store.close()
