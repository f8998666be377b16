"""Playlists reaching a display: a real display (``tests.support.fleet``) registered with the
scheduler is assigned a playlist as any schedule, downloads its items from the scheduler's
``/media`` URLs, checks them by hash and shows them; a saved change is on its screen within a
second; a forced delete of an item in use takes it off the screen; a deleted playlist leaves
it. On SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import requests

from server.scheduler.service import SchedulerService
from tests.support.fleet import Screen, assign
from tests.support.png import png
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("scheduler_backend")


def upload(base: str, name: str, data: bytes) -> str:
    answer = requests.post(f"{base}/x/media", data=data, headers={"X-Filename": name}, timeout=30)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["sha256"])


def put(base: str, playlist_id: str, body: Any) -> requests.Response:
    answer = requests.put(f"{base}/x/playlists/{playlist_id}", json=body, timeout=10)
    assert answer.status_code in (200, 201), answer.text
    return answer


def two_pictures(base: str) -> list[tuple[str, str]]:
    """A red and a blue picture in the library: (sha256, the URL a display fetches) each."""
    found = []
    for name, colour in (("red", (220, 30, 30)), ("blue", (30, 30, 220))):
        sha = upload(base, f"{name}.png", png(64, 36, colour))
        found.append((sha, f"{base}/media/{sha}/{name}.png"))
    return found


def timed_until(predicate: Callable[[], Any], timeout: float = 10.0) -> float:
    started = time.monotonic()
    wait_until(predicate, timeout=timeout, step=0.01)
    return time.monotonic() - started


def test_a_saved_playlist_is_on_the_screen_within_a_second(
    scheduler: SchedulerService, make_screen: Callable[..., Screen]
) -> None:
    base = scheduler.url
    (red, red_url), (blue, blue_url) = two_pictures(base)
    screen = make_screen("lobby")
    put(base, "show", {"items": [{"media": red, "duration": "1 h"}]})
    assert assign(base, "show", display=screen.url).status_code == 201
    wait_until(lambda: screen.item() == red_url, what="the first playlist on the screen")

    latencies = []
    for url, sha in ((blue_url, blue), (red_url, red), (blue_url, blue)):
        # From the save's request to the screen: storing, the push, the download of a file
        # the display has not seen (the first), the switch.
        started = time.monotonic()
        put(base, "show", {"items": [{"media": sha, "duration": "1 h"}]})
        wait_until(lambda url=url: screen.item() == url, timeout=10, step=0.01)  # type: ignore[misc]
        latencies.append(time.monotonic() - started)
    assert max(latencies) < 1.0, latencies


def test_a_forced_delete_and_a_deleted_playlist_leave_the_screen(
    scheduler: SchedulerService, make_screen: Callable[..., Screen]
) -> None:
    base = scheduler.url
    (red, red_url), (blue, blue_url) = two_pictures(base)
    screen = make_screen("hall", groups=["hall"])
    put(base, "daily", {"items": [{"media": red, "duration": "1 h"}], "priority": "low"})
    put(base, "notice", {"items": [{"media": blue, "duration": "1 h"}], "priority": "high"})
    assert assign(base, "daily", group="hall").status_code == 201
    assert assign(base, "notice", display=screen.url).status_code == 201
    wait_until(lambda: screen.item() == blue_url, what="the high-priority playlist shown")

    assert requests.delete(f"{base}/x/media/{blue}", timeout=5).status_code == 409
    assert screen.item() == blue_url
    forced = requests.delete(f"{base}/x/media/{blue}", params={"force": "1"}, timeout=5)
    assert forced.status_code == 204
    assert timed_until(lambda: screen.item() == red_url) < 2.0
    assert requests.get(f"{base}/x/playlists/notice", timeout=5).json()["items"] == []

    assert requests.delete(f"{base}/x/playlists/daily", timeout=5).status_code == 204
    wait_until(lambda: screen.item() is None, what="the deleted playlist off the screen")
