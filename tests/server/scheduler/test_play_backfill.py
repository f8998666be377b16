"""Every play accounted for: a real ``pdn display`` process (on the run's shared X
server) registered with a scheduler that misses some of its playback updates; in the end the
scheduler's ``GET /x/plays`` lists exactly the display's own play log, no gap, no duplicate.

The cases: the display played before the scheduler subscribed to it (its first plays were
never sent); the scheduler was down while the display played (its outbox kept the updates, or
the scheduler reads them from the display's log when it starts); the scheduler was down for
longer than the display keeps a failing subscription, which expired with its updates, then
was made again. And a display that cannot be reached: its gap is listed with the reason, and
filled when it is back. On SQLite and PostgreSQL (``scheduler_backend``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from server.scheduler.service import SchedulerService
from tests.support.display import DisplayProcess
from tests.support.factories import started_by
from tests.support.fleet import put_schedule
from tests.support.inprocess_display import cds
from tests.support.pages import PageServer, one_page
from tests.support.ports import free_port
from tests.support.process import CREDENTIALS
from tests.support.scheduler import start
from tests.support.signed import signed_post
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.qt, pytest.mark.slow, pytest.mark.usefixtures("scheduler_backend")]

#: Seconds each item stays on screen: short, so twenty plays take seconds.
ITEM = 0.6
GROUP = "lobby"


class BackfillDisplay(DisplayProcess):
    """``pdn display`` registering with the scheduler at ``scheduler_url``, in the group the
    schedule is assigned to; its play log read through its API."""

    def __init__(
        self,
        folder: Path,
        scheduler_url: str,
        env: dict[str, str] | None = None,
        port: int | None = None,
    ) -> None:
        """``port``: the one of a display stopped before (with the same data)."""
        super().__init__(
            folder,
            config=(
                f'name = "proof"\ntimezone = "UTC"\nregister = "{scheduler_url}"\n'
                f'groups = ["{GROUP}"]\n'
                '[location]\nlatitude = "N54.0104"\nlongitude = "W2.7883"\n'
                "[screen]\ncrossfade = 0\n"
            ),
            env=env,
            unset=(*CREDENTIALS, "PDN_DATABASE_URL"),
            port=port,
        )

    def sequence(self) -> int:
        return int(self.playback()["sequence"])

    def plays(self) -> list[dict[str, Any]]:
        """The display's whole play log."""
        found: list[dict[str, Any]] = []
        since = 0
        while True:
            page = self.get("/x/plays", params={"since": since, "limit": 1000}).json()["plays"]
            found += page
            if len(page) < 1000:
                return found
            since = page[-1]["sequence"]

    def wait_sequence(self, at_least: int, timeout: float = 60) -> int:
        return int(wait_until(lambda: (n := self.sequence()) >= at_least and n, timeout))


class Schedulers:
    """One scheduler at a fixed address and data directory (and database), which a test can
    stop and start again: down, then back."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.folder = tmp / "scheduler"
        self.service: SchedulerService | None = None
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> SchedulerService:
        service = start(self.folder, None, port=self.port, refresh_interval=0.5)
        self.service = service
        return service

    def down(self) -> None:
        if self.service is not None:
            self.service.stop()
            self.service = None


@pytest.fixture
def content() -> Iterator[PageServer]:
    """The items' pages: one small page at every path."""
    with one_page() as server:
        yield server


@pytest.fixture
def schedulers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Schedulers]:
    # A scheduler that stops leaves the displays it was reading claimed for this long (on
    # PostgreSQL, where claims are in the database): short, so the one that comes back reads
    # them again soon.
    monkeypatch.setenv("PDN_PROBE_LEASE", "2")
    made = Schedulers(tmp_path)
    yield made
    made.down()


@pytest.fixture
def start_display(tmp_path: Path) -> Iterator[Callable[..., BackfillDisplay]]:
    def start(
        scheduler_url: str, env: dict[str, str] | None = None, port: int | None = None
    ) -> BackfillDisplay:
        display = BackfillDisplay(tmp_path / "display", scheduler_url, env, port)
        return display.start().wait_ready()

    yield from started_by(start, BackfillDisplay.stop)


def loop_schedule(content: PageServer) -> bytes:
    """Four pages in turn, ITEM seconds each: every change of item is a play."""
    urls = [f"{content.url}/page-{n}.html" for n in range(4)]
    return cds(GROUP, *urls, extra=f"<preferred-duration>{ITEM} seconds</preferred-duration>")


def assign_to_group(base: str, content: PageServer) -> None:
    assert put_schedule(base, "loop", loop_schedule(content)).status_code in (200, 201)
    answer = requests.post(
        f"{base}/x/assignments", json={"schedule": "loop", "group": GROUP}, timeout=5
    )
    assert answer.status_code in (200, 201), answer.text


def scheduler_plays(base: str, display: str) -> dict[str, Any]:
    answer = requests.get(f"{base}/x/plays", params={"display": display}, timeout=10)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def key(play: dict[str, Any]) -> tuple[Any, ...]:
    return (
        play["sequence"],
        play["content-item"],
        play["set"],
        play["origin"],
        play["started"],
        play["painted"],
    )


def accounted_for(base: str, display: BackfillDisplay, up_to: int) -> list[dict[str, Any]]:
    """Wait until the scheduler lists every play of the display's log up to sequence ``up_to``
    and no gap; then check it against the log: the same plays, each once, in order."""

    def settled() -> list[dict[str, Any]] | None:
        body = scheduler_plays(base, display.url)
        stored = body["plays"]
        if body["gaps"] or not stored or stored[-1]["sequence"] < up_to:
            return None
        return list(stored)

    try:
        stored: list[dict[str, Any]] = wait_until(settled, timeout=60, step=0.2)
    except AssertionError:
        raise AssertionError(
            f"the scheduler did not account for every play up to {up_to}:"
            f" {scheduler_plays(base, display.url)}\n{display.text()[-3000:]}"
        ) from None
    log = [play for play in display.plays() if play["sequence"] <= stored[-1]["sequence"]]
    sequences = [play["sequence"] for play in stored]
    told = f"scheduler: {sequences}, display: {[p['sequence'] for p in log]}"
    assert len(sequences) == len(set(sequences)), f"a play stored twice; {told}"
    assert sequences == list(range(1, sequences[-1] + 1)), f"a gap; {told}"
    assert [key(play) for play in stored] == [key(play) for play in log]
    # Each play's end is the next one's start, as the display logged it.
    assert [p["ended"] for p in stored[:-1]] == [p["ended"] for p in log[:-1]]
    csv_rows = requests.get(
        f"{base}/x/plays",
        params={"display": display.url},
        headers={"Accept": "text/csv"},
        timeout=10,
    ).text.splitlines()[1:]
    # (The display plays on: the CSV, read later, may have more.)
    csv_rows = [row for row in csv_rows if int(row.split(",")[1]) <= sequences[-1]]
    assert [int(row.split(",")[1]) for row in csv_rows] == sequences
    assert all(row.endswith(",0,") for row in csv_rows)  # no gap before any of them
    return stored


def test_plays_before_the_subscription_and_while_the_scheduler_was_down(
    schedulers: Schedulers,
    start_display: Callable[..., BackfillDisplay],
    content: PageServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from server.cli import main
    from server.ctl.cli import EXIT_OK

    service = schedulers.service
    assert service is not None
    # Assigned before the display exists: it is pushed the schedule when it registers. The
    # scheduler subscribes to its playback updates at its first read of the display, held
    # back here until the display has played a few items (the race between the
    # display's first plays and the subscription, made sure).
    assign_to_group(schedulers.url, content)
    gate = threading.Event()
    subscribe = service.prober._subscribe_playback

    def held(url: str) -> None:
        if gate.is_set():
            subscribe(url)

    service.prober._subscribe_playback = held  # type: ignore[method-assign]
    display = start_display(schedulers.url)
    early = display.wait_sequence(5)
    gate.set()
    wait_until(lambda: service.storage.display(display.url) is not None)
    accounted_for(schedulers.url, display, early + 2)

    # The scheduler goes down while the display plays on; it comes back at the same address.
    schedulers.down()
    before = display.sequence()
    display.wait_sequence(before + 6)
    schedulers.up()
    last = display.wait_sequence(20)
    stored = accounted_for(schedulers.url, display, last)
    assert len(stored) >= 20

    assert main(["ctl", "plays", schedulers.url, "--display", display.url]) == EXIT_OK
    out = capsys.readouterr().out
    assert "missing" not in out
    assert f"#{stored[-1]['sequence']}  " in out


def test_a_subscription_that_expired_is_made_again_and_its_plays_filled(
    schedulers: Schedulers,
    start_display: Callable[..., BackfillDisplay],
    content: PageServer,
) -> None:
    assign_to_group(schedulers.url, content)
    # The display gives up on a subscriber that fails for 2 s (else 24 h): with the updates
    # it still held for it.
    display = start_display(schedulers.url, {"PDN_SUBSCRIBER_EXPIRY": "2"})
    first = display.wait_sequence(4)
    accounted_for(schedulers.url, display, first)

    schedulers.down()
    before = display.sequence()

    def expired() -> bool:
        health = requests.get(display.url + "/x/health", timeout=5).json()
        return bool(health["webhooks"].get("expired-subscriptions"))

    wait_until(expired, timeout=30, step=0.2)
    display.wait_sequence(before + 4)
    schedulers.up()
    # The scheduler subscribes again at its next read of the display; the updates it gets
    # then jump over those that expired, which it reads from the display's play log.
    wait_until(lambda: subscribed(display), timeout=30)
    last = display.wait_sequence(display.sequence() + 3)
    accounted_for(schedulers.url, display, last)


def subscribed(display: BackfillDisplay) -> bool:
    health = requests.get(display.url + "/x/health", timeout=5).json()
    return int(health["webhooks"].get("subscriptions") or 0) > 0


def test_a_gap_is_listed_with_its_reason_while_the_display_cannot_be_reached(
    schedulers: Schedulers,
    start_display: Callable[..., BackfillDisplay],
    content: PageServer,
) -> None:
    service = schedulers.service
    assert service is not None
    assign_to_group(schedulers.url, content)
    display = start_display(schedulers.url)
    first = display.wait_sequence(3)
    accounted_for(schedulers.url, display, first)
    # The scheduler stops hearing from it (unsubscribed, as an expired subscription would
    # be) while it plays on.
    service.prober._subscribe_playback = lambda url: None  # type: ignore[method-assign]
    subscriber = service._playback_subscriber(display.url)
    assert subscriber is not None

    def quiet() -> bool:
        """Unsubscribed (again, if a read under way when the prober was told subscribed it
        again), and nothing left to send."""
        webhooks = requests.get(display.url + "/x/health", timeout=5).json()["webhooks"]
        if webhooks.get("subscriptions"):
            requests.post(
                display.url + "/playback/unsubscribe/",
                json={"subscriber-uri": subscriber},
                timeout=5,
            )
            return False
        return not webhooks.get("pending-events")

    wait_until(quiet, timeout=15, step=0.1)
    time.sleep(0.5)  # an update that was on its way when the subscription went has landed
    known = scheduler_plays(schedulers.url, display.url)["plays"][-1]["sequence"]
    display.wait_sequence(known + 4)
    # Then it goes off (kill -9): its own update of three plays on comes in late, as one sent
    # just before would: a jump the scheduler cannot fill yet.
    (later,) = [p for p in display.plays() if p["sequence"] == known + 3]
    display.kill()
    ingest = service._playback_subscriber(display.url)
    secret = service._playback_signing_secret(display.url)
    assert ingest is not None and secret is not None
    assert signed_post(ingest, later, secret).status_code == 200

    def listed() -> dict[str, Any] | None:
        gaps = scheduler_plays(schedulers.url, display.url)["gaps"]
        return gaps[0] if gaps and "cannot connect" in gaps[0]["reason"] else None

    gap = wait_until(listed, timeout=30, step=0.2)
    assert gap["filling"] is True and gap["missing"] == 2
    assert (gap["after-sequence"], gap["before-sequence"]) == (known, known + 3)
    assert gap["reason"].startswith("the display's play log cannot be read: cannot connect")
    csv_rows = requests.get(
        f"{schedulers.url}/x/plays", headers={"Accept": "text/csv"}, timeout=10
    ).text.splitlines()
    assert any(row.endswith(f",2,{gap['reason']}") for row in csv_rows)

    # Back, with the play log it had (kill -9 lost none of it): the scheduler reads it at
    # once (the display registers again, and answers), and subscribes again.
    vars(service.prober).pop("_subscribe_playback")
    display = start_display(schedulers.url, port=display.port)
    assert [p["sequence"] for p in display.plays()][: known + 4] == list(range(1, known + 5))
    accounted_for(schedulers.url, display, display.sequence())
