"""The display's schedule follower and remote-set fetcher against a real scheduler on loopback."""

from __future__ import annotations

import hashlib
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from cds.errors import CdsError
from cds.parser import parse
from player.follower import ScheduleFollower
from player.remotesets import RemoteSetFetcher
from server.scheduler.service import SchedulerService
from tests.support.pages import PageServer
from tests.support.scheduler import LOBBY, LOBBY_V2, start, write
from tests.support.waiting import wait_until

LOCATION = {"latitude": "N 54 00.624", "longitude": "W 2 47.298"}


class Applied:
    """Stands in for Display.apply_cds: validates like it, records what it got."""

    def __init__(self) -> None:
        self.documents: list[bytes] = []
        self.lock = threading.Lock()

    def __call__(self, data: bytes) -> str:
        parse(data)
        with self.lock:
            self.documents.append(data)
        return "added"


def follower_for(
    tmp_path: Path, scheduler_url: str, display: PageServer, applied: Applied, **options: object
) -> ScheduleFollower:
    return ScheduleFollower(
        apply_cds=applied,
        display_url=lambda: display.url,
        state_dir=tmp_path / "display",
        schedule_url=f"{scheduler_url}/schedule/lobby/",
        register_url=scheduler_url,
        location=LOCATION,
        name="Lobby",
        first_retry=0.1,
        **options,  # type: ignore[arg-type]
    )


@pytest.fixture
def schedules_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "schedules"
    directory.mkdir()
    (directory / "lobby.xml").write_bytes(LOBBY)
    return directory


def test_follow_subscribe_register_and_keep(
    tmp_path: Path, schedules_dir: Path, peer: PageServer
) -> None:
    peer.route("POST", "/schedule", 202, {"request-status": "scheduling"})
    scheduler = start(tmp_path, schedules_dir)
    applied = Applied()
    follower = follower_for(tmp_path, scheduler.url, peer, applied, poll_interval=30.0)
    try:
        follower.start()
        wait_until(lambda: applied.documents)
        assert applied.documents[0] == LOBBY
        wait_until(lambda: requests.get(f"{scheduler.url}/displays", timeout=5).json())
        record = requests.get(f"{scheduler.url}/displays", timeout=5).json()[0]
        assert record["url"] == peer.url
        assert record["location"] == LOCATION
        assert record["name"] == "Lobby"
        assert follower.saved_path.read_bytes() == LOBBY
        # The subscription is the display's own /schedule: a change is pushed there.
        wait_until(lambda: scheduler.outbox.subscribers("schedule:lobby"))
        write(schedules_dir / "lobby.xml", LOBBY_V2)
        assert peer.wait_for(1, "/schedule", timeout=3)[0].body == LOBBY_V2
    finally:
        follower.stop()
        scheduler.stop()


def test_kept_schedule_plays_without_network(tmp_path: Path, peer: PageServer) -> None:
    (tmp_path / "display").mkdir()
    (tmp_path / "display" / "followed-schedule.xml").write_bytes(LOBBY)
    applied = Applied()
    follower = follower_for(tmp_path, "http://127.0.0.1:9", peer, applied)
    follower.replay_saved()
    assert applied.documents == [LOBBY]
    assert follower.sync_once() is False  # nobody at port 9


def test_resubscribes_when_the_scheduler_comes_back(
    tmp_path: Path, schedules_dir: Path, peer: PageServer
) -> None:
    scheduler = start(tmp_path, schedules_dir)
    url = scheduler.url
    port = int(url.rsplit(":", 1)[1])
    applied = Applied()
    follower = follower_for(tmp_path, url, peer, applied, poll_interval=0.3)
    follower.start()
    try:
        wait_until(lambda: scheduler.outbox.subscribers("schedule:lobby"))
        scheduler.stop()
        time.sleep(1.0)  # down for a few of the follower's polls
        # It comes back on the same port with its state lost: the follower repairs it.
        shutil.rmtree(tmp_path / "data")
        scheduler = wait_until(lambda: _try_start(tmp_path, schedules_dir, port), timeout=10)
        wait_until(lambda: scheduler.outbox.subscribers("schedule:lobby"), timeout=20)
        # Re-registration follows the re-subscription on the same poll, a moment later.
        wait_until(lambda: requests.get(f"{scheduler.url}/displays", timeout=5).json(), timeout=20)
    finally:
        follower.stop()
        scheduler.stop()


def _try_start(tmp_path: Path, schedules_dir: Path, port: int) -> SchedulerService | None:
    try:
        return start(tmp_path, schedules_dir, port=port)
    except OSError:
        return None


# -- remote sets -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Remote:
    key: str
    uris: tuple[str, ...]
    refresh: float | None = None


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_remote_sets_fetch_fallback_cache_and_backoff(tmp_path: Path, peer: PageServer) -> None:
    source = tmp_path / "remote.xml"
    source.write_bytes(LOBBY)
    delivered: list[tuple[str, bytes]] = []

    def deliver(key: str, data: bytes) -> None:
        parse(data)
        delivered.append((key, data))

    sets = [Remote("r1", ("http://127.0.0.1:9/down.xml", source.as_uri()), refresh=120.0)]
    clock = Clock()
    fetcher = RemoteSetFetcher(
        remote_sets=lambda: sets, deliver=deliver, cache_dir=tmp_path / "cache", clock=clock
    )
    assert fetcher.step() == 120.0  # fetched from the second source, next in 2 minutes
    assert delivered == [("r1", LOBBY)]
    assert fetcher.cache_path("r1").read_bytes() == LOBBY

    # Every source failing: retry after 60 s, doubling up to the refresh interval.
    source.unlink()
    clock.now += 120
    assert fetcher.step() == 60.0
    clock.now += 60
    assert fetcher.step() == 120.0
    clock.now += 120
    assert fetcher.step() == 120.0
    assert len(delivered) == 1

    # An invalid document is a failure too: the last good copy stays.
    source.write_bytes(b"<content-set><content-item></content-set>")
    clock.now += 120
    fetcher.step()
    assert len(delivered) == 1

    # A fresh start with no network plays the kept copy.
    again: list[tuple[str, bytes]] = []

    def deliver_again(key: str, data: bytes) -> None:
        parse(data)
        again.append((key, data))

    offline = RemoteSetFetcher(
        remote_sets=lambda: sets,
        deliver=deliver_again,
        cache_dir=tmp_path / "cache",
        clock=clock,
    )
    offline.step()
    assert again == [("r1", LOBBY)]


def test_remote_set_over_http_with_default_refresh(tmp_path: Path, peer: PageServer) -> None:
    with pytest.raises(CdsError):
        parse(b"{}")
    delivered: list[bytes] = []
    fetcher = RemoteSetFetcher(
        remote_sets=lambda: [Remote("r2", (f"{peer.url}/set.xml",))],
        deliver=lambda key, data: delivered.append(data),
        cache_dir=tmp_path / "cache",
        clock=Clock(),
    )
    assert fetcher.step() == 3600.0
    assert delivered == [b"{}"]  # the peer answers {}; deliver decides validity


def test_periodic_checks_are_conditional(
    tmp_path: Path, schedules_dir: Path, peer: PageServer
) -> None:
    """The scheduler answers a strong ETag (the document's SHA-256) and 304 to If-None-Match;
    the follower sends it on every check and a 304 is 'unchanged': nothing applied again."""
    scheduler = start(tmp_path, schedules_dir)
    base = f"{scheduler.url}/schedule/lobby/"
    try:
        first = requests.get(base, timeout=5)
        etag = first.headers["ETag"]
        assert etag == f'"{hashlib.sha256(first.content).hexdigest()}"'
        again = requests.get(base, headers={"If-None-Match": etag}, timeout=5)
        assert again.status_code == 304 and again.content == b""
        assert again.headers["ETag"] == etag
        assert requests.get(base, headers={"If-None-Match": "*"}, timeout=5).status_code == 304
        other = requests.get(base, headers={"If-None-Match": '"abc", W/"x"'}, timeout=5)
        assert other.status_code == 200 and other.content == first.content

        answers: list[int] = []
        applied = Applied()
        follower = follower_for(tmp_path, scheduler.url, peer, applied)
        follower._session.hooks["response"].append(
            lambda response, **kwargs: (
                answers.append(response.status_code) if response.request.method == "GET" else None
            )
        )
        assert follower.sync_once() and follower.sync_once() and follower.sync_once()
        assert answers == [200, 304, 304]
        assert applied.documents == [LOBBY]
        write(schedules_dir / "lobby.xml", LOBBY_V2)
        wait_until(lambda: requests.get(base, timeout=5).content == LOBBY_V2)
        assert follower.sync_once()
        assert answers[-1] == 200 and applied.documents == [LOBBY, LOBBY_V2]
        assert follower.sync_once() and answers[-1] == 304
        # After a restart the kept copy's hash is the ETag: the first check is conditional too.
        restarted = follower_for(tmp_path, scheduler.url, peer, applied)
        restarted.replay_saved()
        statuses: list[int] = []
        restarted._session.hooks["response"].append(
            lambda response, **kwargs: (
                statuses.append(response.status_code) if response.request.method == "GET" else None
            )
        )
        assert restarted.sync_once() and statuses == [304]
        assert applied.documents == [LOBBY, LOBBY_V2, LOBBY_V2]  # the replay, not the check
    finally:
        scheduler.stop()
