"""A fleet for the scheduler's tests: real displays (the Display Segment in this process, with
the instant renderer of ``tests.support.inprocess_display``) each on a waitress server of its
own, registered by the real ``ScheduleFollower`` exactly as ``pdn display --scheduler URL``
registers; and the scheduler API calls the tests make again and again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from player.config import DisplayConfig
from player.follower import ScheduleFollower
from server.display import create_app
from server.platform.wsgi import WsgiServer
from server.scheduler.service import SchedulerService
from tests.support.inprocess_display import Display, build_display, close_display
from tests.support.png import png
from tests.support.waiting import wait_until

LOCATION = {"latitude": "N54.0104", "longitude": "W2.7883"}
XML = {"Content-Type": "text/xml"}


@dataclass
class Screen:
    """A display with its own API server and its follower (registration with the scheduler)."""

    display: Display
    server: WsgiServer
    follower: ScheduleFollower
    app: Any
    port: int

    @property
    def url(self) -> str:
        return self.display.url

    def item(self) -> str | None:
        item: str | None = self.display.service.playback().get("content-item")
        return item

    def go_offline(self) -> None:
        self.server.stop()

    def come_back(self) -> None:
        self.server = WsgiServer(self.app, "127.0.0.1", self.port, name="fleet-display").start()

    def close(self) -> None:
        self.follower.stop()
        self.server.stop()
        close_display(self.display)


class PaintedScreen:
    """A screen that shows a colour per item: red for URLs with 'red' in them, else blue."""

    def __init__(self, screen: Screen) -> None:
        self._screen = screen
        self.grabs = 0

    def grab_png(self, timeout: float) -> bytes:
        self.grabs += 1
        item = self._screen.item() or ""
        return png(1280, 720, (220, 30, 30) if "red" in item else (30, 30, 220))

    def status(self) -> dict[str, Any]:
        return {"alive": True}

    def set_context(self, readings: dict[str, Any]) -> None:
        pass


def with_screen(screen: Screen) -> PaintedScreen:
    """Paint ``screen``: its screenshots are the colour of what it shows."""
    painted = PaintedScreen(screen)
    screen.display.service._screen = painted  # the Display's screen access, as pdn display sets
    return painted


def start_screen(
    folder: Path,
    scheduler: SchedulerService,
    name: str,
    groups: list[str] | None = None,
    clock_sync: Any = None,
    token: str | None = None,
    painted: bool = False,
) -> Screen:
    """A display named ``name`` (its data in ``folder``), registered with ``scheduler`` (with
    the operator ``token`` if given) in ``groups``; returned once the scheduler knows it.
    ``painted``: its screenshots are the colour of what it shows (:func:`with_screen`) from
    before it registers, so the scheduler's first look at it already finds a screen."""
    placeholder: Any = type("Placeholder", (), {"api_token": None})()
    app = create_app(placeholder)
    server = WsgiServer(app, "127.0.0.1", 0, name="fleet-display").start()
    config = DisplayConfig(timezone="UTC", name=name, location=LOCATION)
    display = build_display(app, server, folder, config, clock_sync)
    display.url = server.url
    follower = ScheduleFollower(
        apply_cds=display.service.apply_cds,
        display_url=lambda: server.url,
        state_dir=folder,
        register_url=scheduler.url,
        location=LOCATION,
        name=name,
        groups=groups,
        token=token,
        first_retry=0.1,
        poll_interval=0.5,
    )
    screen = Screen(display, server, follower, app, server.port)
    if painted:
        with_screen(screen)
    follower.start()
    wait_until(
        lambda: scheduler.storage.display(server.url) is not None,
        what=f"{name} registered with the scheduler",
    )
    return screen


def put_schedule(
    base: str, schedule_id: str, body: bytes, token: str | None = None
) -> requests.Response:
    """``PUT /x/schedules/<id>``, with the operator ``token`` if given."""
    headers = {**XML, "Authorization": f"Bearer {token}"} if token else XML
    return requests.put(f"{base}/x/schedules/{schedule_id}", data=body, headers=headers, timeout=5)


def assign(base: str, schedule: str, **target: str) -> requests.Response:
    return requests.post(f"{base}/x/assignments", json={"schedule": schedule, **target}, timeout=5)


def unassign(base: str, schedule: str, **target: str) -> requests.Response:
    return requests.delete(
        f"{base}/x/assignments", json={"schedule": schedule, **target}, timeout=5
    )


def plays(base: str, **query: str) -> dict[str, Any]:
    """The scheduler's proof of play, ``GET /x/plays`` with ``query``, as JSON."""
    answer = requests.get(f"{base}/x/plays", params=query, timeout=5)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def entry(base: str, url: str) -> dict[str, Any]:
    """The display ``url``'s entry in the scheduler's ``GET /x/fleet``."""
    for record in requests.get(f"{base}/x/fleet", timeout=5).json():
        if record["display"] == url:
            return dict(record)
    raise AssertionError(f"{url} is not in /x/fleet")
