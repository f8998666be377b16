"""A synchronised set assigned to a group like any schedule, and the fleet view's clocks,
through a real scheduler and real displays on loopback (tests/support/fleet.py).

The displays' time daemons are stand-ins (nothing here runs chrony or timesyncd): what each
would report is given, and the fleet must carry it from /x/health to /x/fleet, the console
and ``pdn ctl fleet`` as the spread of the offsets, with a display that cannot say counted as
unknown."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import requests

from server.platform.clockspread import clock_spread
from server.scheduler.service import SchedulerService
from tests.support.fleet import Screen, assign, entry, put_schedule
from tests.support.openapi import Document
from tests.support.waiting import wait_until

WALL = (
    b'<content-set name="wall"><constraints><scheduling-constraints>'
    b'<playback order="random" sync="wall-clock"/>'
    b"<preferred-duration>3 seconds</preferred-duration>"
    b"</scheduling-constraints></constraints>"
    + b"".join(
        b'<content-item content-type="text/html"><requires-file><sources>'
        b"<uri>http://127.0.0.1:9/" + name + b".html</uri></sources></requires-file>"
        b"</content-item>"
        for name in (b"a", b"b", b"c", b"d")
    )
    + b"</content-set>"
)


class DaemonSays:
    """What a display's time daemon would report (player.clocksync's ClockSync.status)."""

    def __init__(self, source: str, synchronised: bool | None, offset_ms: float | None) -> None:
        self.fields = {"source": source, "synchronised": synchronised, "offset-ms": offset_ms}

    def status(self) -> dict[str, Any]:
        return dict(self.fields, server=None, stratum=None, note="", checked=None)


def health(screen: Screen) -> dict[str, Any]:
    body: dict[str, Any] = requests.get(f"{screen.url}/x/health", timeout=5).json()
    return body


def test_a_group_plays_one_grid_and_the_fleet_shows_its_clocks_spread(
    scheduler: SchedulerService,
    make_screen: Callable[..., Screen],
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = scheduler.url
    left = make_screen("left", groups=["wall"], clock_sync=DaemonSays("chrony", True, 1.5))
    right = make_screen("right", groups=["wall"], clock_sync=DaemonSays("timesyncd", True, -2.0))
    desk = make_screen("desk", clock_sync=DaemonSays("unknown", None, None))
    assert put_schedule(base, "wall", WALL).status_code in (200, 201)
    assert assign(base, "wall", group="wall").status_code == 201  # as any schedule

    # Both tiles play the set; the desk, outside the group, does not.
    wait_until(lambda: all(s.item() and "127.0.0.1:9/" in (s.item() or "") for s in (left, right)))
    assert desk.item() is None
    # One grid: the same epoch and cycle on both, as their health says.
    keys = ("set", "items", "epoch", "cycle-seconds")
    grids = [{k: health(s)["sync"][0][k] for k in keys} for s in (left, right)]
    assert grids[0] == grids[1]
    assert grids[0]["set"] == "wall" and grids[0]["cycle-seconds"] == 12.0
    assert (
        grids[0]["epoch"]
        == datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0).isoformat()
    )
    # ... and the displays show it: the same item at the same time, turn after turn.
    for _ in range(3):
        wait_until(lambda: left.item() == right.item(), timeout=4)
    sync = health(left)["sync"]
    assert sync[0]["item"].startswith("http://127.0.0.1:9/") and "offset" in sync[0]

    # The fleet view: each display's clock, and their spread.
    wait_until(lambda: (entry(base, right.url).get("clock") or {}).get("offset-ms") == -2.0)
    wait_until(lambda: (entry(base, left.url).get("clock") or {}).get("offset-ms") == 1.5)
    wait_until(lambda: (entry(base, desk.url).get("clock") or {}).get("source") == "unknown")
    fleet = requests.get(f"{base}/x/fleet", timeout=5)
    Document("scheduler").check(fleet, "/x/fleet")
    spread = clock_spread(fleet.json())
    assert spread == {
        "known": 2,
        "unknown": 1,
        "unsynchronised": 0,
        "min-ms": -2.0,
        "max-ms": 1.5,
        "spread-ms": 3.5,
    }
    page = requests.get(f"{base}/console/", timeout=5)
    assert page.status_code == 200
    assert "clocks: 3.5 ms apart over 2 displays (-2 to +1.5 ms from their time sources)" in (
        page.text
    )
    assert "+1.5 ms (chrony)" in page.text and "-2 ms (timesyncd)" in page.text

    from server.cli import main

    assert main(["ctl", "fleet", base]) == 0
    out = capsys.readouterr().out
    assert "clock +1.5 ms (chrony)" in out and "clock ?" in out
    assert "clocks: 3.5 ms apart over 2 displays" in out and "1 unknown" in out
