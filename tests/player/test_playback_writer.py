"""The playback record is committed off the caller's thread (player/playback.py).

The engine reports an item shown from the GUI thread, on the instant it is shown. With the
commit (an fsync, ``synchronous=FULL``) made there, a disk that takes seconds to flush froze
the screen for as long: in a benchmark three displays on one machine stopped together
for 38 s (their GUI threads in this commit; the health request, waiting for the engine's lock,
timed out). A slow disk is simulated here by a store whose commit waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from player.engine import Playback
from player.playback import PlaybackRecord
from player.store import DisplayStore
from server.platform.outbox import Outbox


class SlowDisk:
    """A store whose playback commits wait until ``release`` (at most ``hold`` seconds)."""

    def __init__(self, store: DisplayStore, hold: float) -> None:
        self._store = store
        self.hold = hold
        self.release = threading.Event()
        self.committed: list[int] = []

    def playback(self) -> tuple[int, dict[str, Any] | None]:
        return self._store.playback()

    def save_playback(
        self,
        fields: dict[str, Any],
        publish: Callable[..., None] | None = None,
        *,
        sequence: int | None = None,
    ) -> dict[str, Any]:
        self.release.wait(self.hold)
        record = self._store.save_playback(fields, publish, sequence=sequence)
        self.committed.append(int(record["sequence"]))
        return record


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[tuple[PlaybackRecord, SlowDisk, DisplayStore]]:
    store = DisplayStore(tmp_path / "display.db")
    outbox = Outbox(store.path, name="display")
    disk = SlowDisk(store, hold=2.0)
    record = PlaybackRecord(
        store=disk,  # type: ignore[arg-type]  # the two methods it uses
        outbox=outbox,
        display_url=lambda: "http://127.0.0.1:1",
        clock=lambda: datetime.now(UTC),
    )
    try:
        yield record, disk, store
    finally:
        disk.release.set()
        record.close()
        store.close()


def shown(name: str) -> Playback:
    return Playback(
        f"http://example.org/{name}", "text/html", "schedule", "lobby", datetime.now(UTC), 2.0
    )


def test_a_slow_disk_does_not_hold_the_caller(
    slow: tuple[PlaybackRecord, SlowDisk, DisplayStore],
) -> None:
    record, disk, store = slow
    before = record.current()["sequence"]
    started = time.monotonic()
    for name in "abc":
        record.changed(shown(name))
    took = time.monotonic() - started
    # Before the writer thread: 6 s (three commits of 2 s each, on the caller's thread).
    assert took < 0.1, f"changed() waited {took:.2f} s for the disk"
    # Not published before it is on disk.
    assert record.current()["sequence"] == before
    assert not record.flush(0.2)

    disk.release.set()
    assert record.flush(10)
    current = record.current()
    assert (current["content-item"], current["sequence"]) == ("http://example.org/c", before + 3)
    assert disk.committed == [before + 1, before + 2, before + 3]  # in order
    assert store.playback()[0] == before + 3


def test_close_commits_what_is_queued(
    slow: tuple[PlaybackRecord, SlowDisk, DisplayStore],
) -> None:
    record, disk, store = slow
    disk.hold = 0.05
    before = record.current()["sequence"]
    record.changed(shown("a"))
    record.changed(shown("b"))
    record.close()
    sequence, stored = store.playback()
    assert sequence == before + 2
    assert stored is not None and stored["content-item"] == "http://example.org/b"
