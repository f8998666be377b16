"""Playlists on two scheduler processes sharing one PostgreSQL database (one in this process,
one a ``pdn scheduler`` of its own, both with one ``--public-url``): a playlist saved on
either is read and served by the other, a hand-written schedule's id on one is refused on the
other, a forced delete on one changes the other's CDS, and a display registered with one plays
what is saved and assigned on the other."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import requests

from cds.parser import parse
from server.scheduler.service import SchedulerService
from tests.support.fleet import put_schedule, start_screen
from tests.support.inprocess_display import cds
from tests.support.png import png
from tests.support.ports import free_port
from tests.support.scheduler import SchedulerProcess
from tests.support.waiting import wait_until


def test_two_processes_share_playlists_and_push_them(
    tmp_path: Path, postgres_url: str, run_scheduler: Callable[..., SchedulerService]
) -> None:
    port = free_port()
    shared = f"http://127.0.0.1:{port}"
    first = run_scheduler("pg0", None, database=postgres_url, port=port, public_url=shared)
    with SchedulerProcess(
        tmp_path / "pg1", ["--public-url", shared], database=postgres_url
    ) as process:
        other = process.url
        red = requests.post(
            f"{shared}/x/media", data=png(64, 36, (220, 30, 30)),
            headers={"X-Filename": "red.png"}, timeout=10,
        ).json()["sha256"]  # fmt: skip
        body = {"items": [{"media": red, "duration": "1 h"}]}
        made = requests.put(f"{other}/x/playlists/lobby", json=body, timeout=10)
        assert made.status_code == 201, made.text
        assert requests.get(f"{shared}/x/playlists/lobby", timeout=5).json() == made.json()
        wait_until(
            lambda: (
                requests.get(f"{shared}/schedule/lobby/", timeout=5).content
                == requests.get(f"{other}/schedule/lobby/", timeout=5).content
            ),
            what="one CDS on both processes",
        )
        served = parse(requests.get(f"{shared}/schedule/lobby/", timeout=5).content)
        assert served.root.children[0].url == f"{shared}/media/{red}/red.png"  # type: ignore[union-attr]
        assert requests.get(f"{shared}/x/media/{red}", timeout=5).json()["used-by"] == ["lobby"]

        assert put_schedule(shared, "hand", cds("hand", "http://127.0.0.1:9/h.html")).ok
        refused = requests.put(f"{other}/x/playlists/hand", json=body, timeout=10)
        assert refused.status_code == 409 and refused.json()["error"] == "schedule-conflict"

        screen = start_screen(tmp_path / "display", first, "pg")
        try:
            assigned = requests.post(
                f"{other}/x/assignments",
                json={"schedule": "lobby", "display": screen.url},
                timeout=5,
            )
            assert assigned.status_code == 201, assigned.text
            wait_until(
                lambda: screen.item() == f"{shared}/media/{red}/red.png",
                what="the playlist saved on the other process on the screen",
            )
            forced = requests.delete(f"{shared}/x/media/{red}?force=1", timeout=5)
            assert forced.status_code == 204
            wait_until(
                lambda: requests.get(f"{other}/x/playlists/lobby", timeout=5).json()["items"] == [],
                what="the item out of the playlist on the other process",
            )
            wait_until(lambda: screen.item() is None, what="the screen following")
        finally:
            screen.close()
