"""How the scheduler's storage decides which displays' play logs to read, and who reads them,
on SQLite and PostgreSQL; and how gaps are told."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.platform.pg import PgDatabase, open_pool
from server.platform.sql import SqliteDatabase
from server.scheduler.plays import with_gaps
from server.scheduler.storage import BackfillState, PlayRecord, SchedulerStorage

pytestmark = pytest.mark.usefixtures("scheduler_backend")

ONE = "http://192.0.2.1:8080"
LOCATION = {"latitude": "N54.0104", "longitude": "W2.7883"}


def open_storage(tmp_path: Path) -> SchedulerStorage:
    url = os.environ.get("PDN_DATABASE_URL")
    if url:
        return SchedulerStorage(PgDatabase(open_pool(url, name="test", max_size=2), own_pool=True))
    return SchedulerStorage(SqliteDatabase(tmp_path / "scheduler.sqlite3"))


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[SchedulerStorage]:
    made = open_storage(tmp_path)
    yield made
    made.close()


def play(sequence: int, display: str = ONE) -> PlayRecord:
    return PlayRecord(
        display=display,
        sequence=sequence,
        item=f"http://127.0.0.1:9/{sequence}.html",
        content_type="text/html",
        set_name="hall",
        origin="schedule",
        started=f"2030-01-01T00:00:{sequence:02d}Z",
        started_at=1893456000.0 + sequence,
        duration=1.0,
        ended=None,
        painted=True,
        received=time.time(),
    )


def state(storage: SchedulerStorage) -> BackfillState:
    return storage.backfill_states()[ONE]


def settle(storage: SchedulerStorage) -> None:
    """Read the display's log as a fetch that finds nothing more would."""
    for claim in storage.claim_backfill(10, 60.0):
        storage.backfill_done(claim, None, 0.0)


def test_updates_in_sequence_need_no_read_a_jump_does(storage: SchedulerStorage) -> None:
    storage.upsert_display(ONE, LOCATION, "one")
    assert state(storage) == BackfillState(seen=0, pending=True)  # registered: read it once
    settle(storage)
    assert state(storage) == BackfillState(seen=0, pending=False)
    for sequence in (1, 2, 3):
        assert storage.record_play(play(sequence))
    assert state(storage) == BackfillState(seen=3, pending=False)
    assert not storage.record_play(play(3))  # the same again: stored once, nothing wanted
    assert storage.record_play(play(6))  # 4 and 5 never came
    assert state(storage) == BackfillState(seen=3, pending=True)
    [claim] = storage.claim_backfill(10, 60.0)
    assert (claim.url, claim.seen) == (ONE, 3)
    # The display's log gives 4 and 5 (and 6 again): stored once each.
    assert storage.record_plays([play(4), play(5), play(6)]) == 2
    storage.plays_seen(ONE, 6)
    storage.backfill_done(claim, None, 0.0)
    assert state(storage) == BackfillState(seen=6, pending=False)
    stored = storage.plays(ONE)
    assert [p.sequence for p in stored] == [1, 2, 3, 4, 5, 6]
    assert [p.ended for p in stored[:-1]] == [p.started for p in stored[1:]]


def test_a_claimed_display_is_read_by_one_reader_at_a_time(tmp_path: Path) -> None:
    """Two storages on one database (two processes on PostgreSQL; on SQLite the same file):
    a display claimed by one is not given to the other until its lease is over."""
    first, second = open_storage(tmp_path), open_storage(tmp_path)
    try:
        for n in range(1, 5):
            first.upsert_display(f"http://192.0.2.{n}:8080", LOCATION, None)
        taken = first.claim_backfill(3, 60.0)
        rest = second.claim_backfill(10, 60.0)
        assert len(taken) == 3 and len(rest) == 1
        assert {c.url for c in taken}.isdisjoint({c.url for c in rest})
        assert first.claim_backfill(10, 60.0) == second.claim_backfill(10, 60.0) == []
        # A lease that ran out (its reader died): another may read the display.
        for claim in taken:
            first.backfill_done(claim, None, 0.0)
        first.want_plays(taken[0].url)
        [short] = second.claim_backfill(10, 0.05)
        time.sleep(0.1)
        [again] = first.claim_backfill(10, 60.0)
        assert again.url == short.url
    finally:
        first.close()
        second.close()


def test_wanted_again_while_read_stays_due_and_a_failure_backs_off(
    storage: SchedulerStorage,
) -> None:
    storage.upsert_display(ONE, LOCATION, "one")
    [claim] = storage.claim_backfill(10, 60.0)
    storage.want_plays(ONE)  # a jump came in while it was being read
    storage.backfill_done(claim, None, 0.0)
    assert state(storage).pending
    [claim] = storage.claim_backfill(10, 60.0)
    storage.backfill_done(claim, "cannot connect: Connection refused", 30.0)
    assert state(storage) == BackfillState(
        seen=0, error="cannot connect: Connection refused", failures=1, pending=True
    )
    assert storage.claim_backfill(10, 60.0) == []  # not before its retry
    storage.want_plays(ONE)  # it answers again: at once
    [claim] = storage.claim_backfill(10, 60.0)
    assert claim.failures == 1
    storage.backfill_done(claim, None, 0.0)
    assert state(storage) == BackfillState(seen=0, pending=False)


def test_a_pending_display_is_not_read(storage: SchedulerStorage) -> None:
    storage.upsert_display(ONE, LOCATION, None, pending=True)
    storage.upsert_display("http://192.0.2.2:8080", LOCATION, None, pending=True)
    assert list(storage.backfill_states(ONE)) == [ONE]  # one display's, for GET /x/plays?display=
    assert storage.claim_backfill(10, 60.0) == []
    storage.approve(ONE)
    assert [c.url for c in storage.claim_backfill(10, 60.0)] == [ONE]


def test_gaps_say_why() -> None:
    plays = [play(3), play(4), play(8)]
    reachable = BackfillState(seen=4, pending=True)
    annotated, gaps = with_gaps(plays, {ONE: reachable}, from_start=True)
    assert [missing for _play, missing in annotated] == [0, 0, 3]
    assert [(g["after-sequence"], g["before-sequence"], g["filling"]) for g in gaps] == [
        (4, 8, True)
    ]
    assert gaps[0]["reason"] == "being read from the display's play log"
    # Not read yet: the plays before the first stored one are a gap too.
    failing = BackfillState(error="cannot connect: refused")
    _annotated, gaps = with_gaps(plays, {ONE: failing}, from_start=True)
    assert [(g["after-sequence"], g["before-sequence"], g["missing"]) for g in gaps] == [
        (0, 3, 2),
        (4, 8, 3),
    ]
    assert all(g["reason"].endswith("cannot connect: refused") and g["filling"] for g in gaps)
    assert gaps[0]["from"] is None
    # Read, and the display's log does not have them: the gap stays, not being filled.
    _annotated, gaps = with_gaps(plays, {ONE: BackfillState(seen=8)}, from_start=True)
    assert [(g["before-sequence"], g["filling"]) for g in gaps] == [(8, False)]
    assert gaps[0]["reason"] == "the display's play log does not have them"
