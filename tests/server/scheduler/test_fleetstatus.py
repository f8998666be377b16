"""Fleet status and the console's pages, through a real scheduler and real displays on loopback.

The displays are the fleet's (``tests/support/fleet.py``: the real Display Segment and its
follower); :class:`PaintedScreen` stands in for the screen so ``/x/screenshot`` answers a PNG
the colour of what is on it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from server.ctl.fleet import describe_fleet_entry
from server.scheduler.fleetstatus import downscale_png
from server.scheduler.service import SchedulerService
from tests.support.fleet import Screen, assign, entry, put_schedule, with_screen
from tests.support.inprocess_display import cds
from tests.support.openapi import Document
from tests.support.png import png, png_size
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[3]


def showing(base: str, url: str) -> str:
    item = (entry(base, url)["playing"] or {}).get("content-item")
    return item or ""


def test_downscale_keeps_the_aspect() -> None:
    small = downscale_png(png(1920, 1080, (1, 2, 3)))
    assert png_size(small) == (320, 180)
    tiny = png(100, 50, (1, 2, 3))
    assert downscale_png(tiny) == tiny
    assert downscale_png(b"not a png") == b"not a png"


#: Six threads scale a screenshot at once, first thing in a fresh interpreter (as the health
#: read workers of a scheduler that just started do).
FIRST_USE_AT_ONCE = """
import sys, threading
from server.scheduler.fleetstatus import downscale_png
from tests.support.png import png
shot = png(640, 360, (1, 2, 3))
start = threading.Barrier(6)
def scale():
    start.wait()
    downscale_png(shot)
threads = [threading.Thread(target=scale, daemon=True) for _ in range(6)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join(20)
sys.exit(3 if any(thread.is_alive() for thread in threads) else 0)
"""


def test_downscale_from_many_threads_at_first_use() -> None:
    """Six threads scale their first screenshots at once, in eight fresh processes: none
    hangs or crashes (an image library that initialises lazily in C can deadlock there)."""
    runs = [subprocess.Popen([sys.executable, "-c", FIRST_USE_AT_ONCE], cwd=ROOT) for _ in range(8)]
    codes = []
    for run in runs:
        try:
            codes.append(run.wait(60))
        except subprocess.TimeoutExpired:  # stuck holding the GIL: its join(20) never returns
            run.kill()
            codes.append(run.wait(10))
    assert codes == [0] * len(runs)


def test_fleet_status_follows_each_screen(
    scheduler: SchedulerService,
    make_screen: Callable[..., Screen],
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = scheduler.url
    hall = make_screen("hall", groups=["hall"])
    desk = make_screen("desk")
    painted = with_screen(hall)
    put_schedule(base, "lobby", cds("lobby", "http://127.0.0.1:9/red.html"))
    assert assign(base, "lobby", group="hall").status_code == 201

    wait_until(lambda: showing(base, hall.url).endswith("red.html"))
    record = entry(base, hall.url)
    assert record["name"] == "hall"
    assert record["online"] is True and record["last-seen"]
    assert record["playing"]["set"] == "lobby" and record["playing"]["started"]
    # Read before its screen was attached: degraded, the renderer not alive; then ok.
    wait_until(lambda: entry(base, hall.url)["health"]["status"] == "ok")
    record = entry(base, hall.url)
    assert record["health"]["problem"] is None
    assert record["version"]  # the display's /x/health says it
    wait_until(lambda: entry(base, hall.url)["thumbnail"]["available"])
    thumbnail = requests.get(
        f"{base}/x/displays/thumbnail", params={"display": hall.url}, timeout=5
    )
    assert thumbnail.status_code == 200 and thumbnail.headers["Content-Type"] == "image/png"
    assert png_size(thumbnail.content) == (320, 180)  # scaled down from 1280 x 720

    # The desk has no screen here: no thumbnail, said so, and nothing else is held back.
    wait_until(lambda: entry(base, desk.url)["thumbnail"]["error"] is not None)
    assert entry(base, desk.url)["online"] is True
    refused = requests.post(f"{base}/x/displays/thumbnail", params={"display": desk.url}, timeout=9)
    assert refused.status_code == 200 and "503" in refused.json()["thumbnail"]["error"]
    assert (
        requests.get(
            f"{base}/x/displays/thumbnail", params={"display": desk.url}, timeout=5
        ).status_code
        == 404
    )
    unknown = requests.get(f"{base}/x/displays/thumbnail?display=http://127.0.0.1:9", timeout=5)
    assert unknown.status_code == 404 and unknown.json()["error"] == "unknown-display"

    # On demand.
    grabs = painted.grabs
    taken = requests.post(f"{base}/x/displays/thumbnail", params={"display": hall.url}, timeout=9)
    assert taken.status_code == 200 and taken.json()["thumbnail"]["available"] is True
    assert painted.grabs == grabs + 1

    # What it shows changes: the status follows from the ingested playback update.
    put_schedule(base, "lobby", cds("lobby", "http://127.0.0.1:9/blue.html"))
    wait_until(lambda: showing(base, hall.url).endswith("blue.html"))

    # Every answer as the OpenAPI document says.
    document = Document("scheduler")
    document.check(requests.get(f"{base}/x/fleet", timeout=5), "/x/fleet")
    for answer in (thumbnail, refused, unknown, taken):
        document.check(answer, "/x/displays/thumbnail")
    bad = requests.get(f"{base}/x/displays/thumbnail?display=nope", timeout=5)
    assert bad.status_code == 400
    document.check(bad, "/x/displays/thumbnail")

    # pdn ctl fleet
    from server.cli import main

    assert main(["ctl", "fleet", base]) == 0
    out = capsys.readouterr().out
    assert "hall  " + hall.url in out and "online" in out and "blue.html [lobby]" in out
    assert "health ok" in out

    # Offline, and back.
    hall.go_offline()
    wait_until(lambda: entry(base, hall.url)["online"] is False, timeout=15)
    record = entry(base, hall.url)
    assert record["offline-since"] and record["last-error"]
    assert "OFFLINE since" in describe_fleet_entry(record)
    hall.come_back()
    wait_until(lambda: entry(base, hall.url)["online"] is True, timeout=15)


def test_fleet_shows_a_display_that_rolled_back(
    scheduler: SchedulerService,
    make_screen: Callable[..., Screen],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pdn-release's state says a release was rolled back: the display's /x/health
    tells, and so do /x/fleet and pdn ctl fleet."""
    state = tmp_path / "state"
    state.write_text("current=0.2.0-aaa\nrolled-back-from=0.3.0-bbb\nreason=the test\n")
    monkeypatch.setenv("PDN_RELEASE_STATE", str(state))
    base = scheduler.url
    stage = make_screen("stage")
    with_screen(stage)
    wait_until(lambda: entry(base, stage.url)["rolled-back-from"] == "0.3.0-bbb")
    Document("scheduler").check(requests.get(f"{base}/x/fleet", timeout=5), "/x/fleet")
    from server.cli import main
    from server.platform.release import package_version

    assert main(["ctl", "fleet", base]) == 0
    out = capsys.readouterr().out
    assert f"version {package_version()} (ROLLED BACK from 0.3.0-bbb)" in out
    health = requests.get(f"{stage.url}/x/health", timeout=5).json()
    assert health["release"]["rolled-back-from"] == "0.3.0-bbb"
    # The console's card and the display's page.
    assert "(rolled back from 0.3.0-bbb)" in requests.get(f"{base}/console/", timeout=5).text
    page = requests.get(f"{base}/console/display", params={"url": stage.url}, timeout=5)
    assert "rolled back by itself from the release 0.3.0-bbb" in page.text
    assert health["release"]["rolled-back-because"] == "the test"


def test_console_pages_without_a_token(
    scheduler: SchedulerService, make_screen: Callable[..., Screen]
) -> None:
    base = scheduler.url
    hall = make_screen("hall", groups=["hall"])
    put_schedule(
        base,
        "lobby",
        cds(
            "lobby",
            "http://127.0.0.1:9/morning.html",
            extra="<time-window><start>06:00</start><end>12:00</end></time-window>",
        ),
    )
    assign(base, "lobby", display=hall.url)
    page = requests.get(f"{base}/console/", timeout=5)
    assert page.status_code == 200 and "hall" in page.text
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    assert not re.search(r"(src|href)=\"https?://", page.text)  # nothing from elsewhere
    for asset in ("console.css", "console.js"):
        assert requests.get(f"{base}/console/static/{asset}", timeout=5).status_code == 200

    shown = requests.get(f"{base}/console/display", params={"url": hall.url}, timeout=5)
    assert shown.status_code == 200
    assert "The next 24 hours" in shown.text and "morning.html" in shown.text
    assert '<svg class="timeline"' in shown.text

    broken = "<content-set name='lobby'>\n  <content-item>\n</content-set>\n"
    saved = requests.post(f"{base}/console/schedules/lobby", data={"cds": broken}, timeout=5)
    assert saved.status_code == 400
    assert 'class="fault" data-line="3"' in saved.text and "line 3" in saved.text

    for path in ("schedules", "assignments", "groups", "broadcasts", "plays", "fleet.json"):
        assert requests.get(f"{base}/console/{path}", timeout=5).status_code == 200, path
    assert (
        requests.get(f"{base}/console/display?url=http://127.0.0.1:9", timeout=5).status_code == 404
    )


def test_console_needs_the_token(locked_scheduler: SchedulerService) -> None:
    service = locked_scheduler
    base = service.url
    page = requests.get(f"{base}/console/", timeout=5, allow_redirects=False)
    assert page.status_code == 302 and "/console/signin" in page.headers["Location"]
    assert requests.get(f"{base}/console/fleet.json", timeout=5).status_code == 401
    assert requests.get(f"{base}/console/events", timeout=5).status_code == 401
    wrong = requests.post(f"{base}/console/signin", data={"token": "nope"}, timeout=5)
    assert wrong.status_code == 401
    session = requests.Session()
    right = session.post(
        f"{base}/console/signin",
        data={"token": "t0k", "next": "/console/groups"},
        timeout=5,
        allow_redirects=False,
    )
    assert right.status_code == 302 and right.headers["Location"].endswith("/console/groups")
    cookie = right.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/console" in cookie
    assert session.get(f"{base}/console/", timeout=5).status_code == 200
    # The API keeps its bearer token: the cookie is no way into it.
    assert session.post(f"{base}/x/groups/a/displays", json={}, timeout=5).status_code == 401
    # Elsewhere-than-here targets are not followed.
    away = session.post(
        f"{base}/console/signin",
        data={"token": "t0k", "next": "//evil.example/"},
        timeout=5,
        allow_redirects=False,
    )
    assert away.headers["Location"].endswith("/console/")
