"""End to end on loopback: display, scheduler, content and sensor as four separate processes.

One shared set of processes for the module (starting a display costs seconds); the tests run in
order and the last one kills the scheduler with SIGKILL and restarts it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests

from tests.support.ports import free_port
from tests.support.process import PDN, PdnProcess
from tests.support.waiting import wait_for_answer

pytestmark = [pytest.mark.slow, pytest.mark.qt]

LOCATION = {"latitude": "N54.0104", "longitude": "W 2 47.298"}


# Green when the display's context API says the sensor reads 22 or more, red otherwise.
GAUGE_PAGE = """<!doctype html><html><body style="margin:0;height:100vh;background:#f00">
<script>
function paint(sensors) {
  let value = sensors["e2e-temp"];
  if (value && typeof value === "object") { value = value.data; }
  document.body.style.background = Number(value) >= 22 ? "#0f0" : "#f00";
}
if (window.pdn) { window.pdn.onSensor(paint); }
</script></body></html>
"""


def schedule_xml(text: str, content_url: str) -> bytes:
    page = f"{content_url}/message/?text={quote(text)}&amp;background=%23123456"
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<content-set name="lobby" type="inline">
  <constraints><scheduling-constraints>
    <preferred-duration>2 seconds</preferred-duration>
  </scheduling-constraints></constraints>
  <content-item content-type="text/html">
    <requires-file><sources><uri>{page}</uri></sources></requires-file>
  </content-item>
</content-set>
""".encode()


@dataclass
class Network:
    """The four segments, each a ``pdn`` process (the venv's entry point) in ``root``."""

    root: Path
    ports: dict[str, int]
    processes: dict[str, PdnProcess] = field(default_factory=dict)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def start(self, name: str, *args: str, probe: str = "/", timeout: float = 20) -> None:
        self.processes[name] = process = PdnProcess(
            name,
            self.root,
            ["--host", "127.0.0.1", *args],
            port=self.ports[name],
            probe=probe,
            unset=(),
            program=(PDN,),
            cwd=self.root,
        )
        process.start().wait_ready(timeout=timeout)

    def log(self, name: str) -> str:
        return self.processes[name].text()

    def playback(self) -> dict[str, Any]:
        record: dict[str, Any] = requests.get(f"{self.url('display')}/playback/", timeout=5).json()
        return record

    def stop(self) -> None:
        for process in self.processes.values():
            process.stop(15)


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    root = tmp_path_factory.mktemp("network")
    net = Network(
        root, {name: free_port() for name in ("display", "scheduler", "content", "sensor")}
    )
    schedules = root / "schedules"
    schedules.mkdir()
    (schedules / "lobby.xml").write_bytes(schedule_xml("Lobby one", net.url("content")))
    (root / "temp").write_text("21500\n")
    (root / "display.toml").write_text(
        f'name = "e2e display"\n[location]\nlatitude = "{LOCATION["latitude"]}"\n'
        f'longitude = "{LOCATION["longitude"]}"\n'
    )
    try:
        gauge = root / "apps" / "gauge"
        gauge.mkdir(parents=True)
        (gauge / "index.html").write_text(GAUGE_PAGE)
        net.start(
            "content",
            "--apps",
            str(root / "apps"),
            "--display",
            net.url("display"),
            probe="/x/apps",
        )
        net.start(
            "sensor",
            "--sensor-id",
            "e2e-temp",
            "--sensor-type",
            "air temperature",
            "--file",
            str(root / "temp"),
            "--scale",
            "0.001",
            "--interval",
            "2",
            "--poll",
            "0.2",
            "--data-dir",
            str(root / "sensor-data"),
        )
        net.start(
            "scheduler",
            "--data-dir",
            str(root / "scheduler-data"),
            "--schedules",
            str(schedules),
            "--refresh",
            "2",
            probe="/x/schedules",
        )
        net.start(
            "display",
            "--config",
            str(root / "display.toml"),
            "--data-dir",
            str(root / "display-data"),
            "--schedule",
            f"{net.url('scheduler')}/schedule/lobby/",
            "--register",
            net.url("scheduler"),
            timeout=60,
        )
        yield net
    finally:
        net.stop()


def test_display_follows_and_registers(network: Network) -> None:
    wanted = "text=Lobby%20one"
    record = wait_for_answer(
        lambda: (r := network.playback()).get("content-item") and wanted in r["content-item"] and r,
        30,
        "the schedule on screen",
    )
    assert record["origin"] == "schedule"
    assert record["set"] == "lobby"
    displays = wait_for_answer(
        lambda: requests.get(
            f"{network.url('scheduler')}/displays?url-only=false", timeout=5
        ).json(),
        10,
        "the display registered",
    )
    assert displays[0]["url"].rstrip("/") == network.url("display")
    assert displays[0]["location"] == LOCATION
    assert wait_for_answer(
        lambda: (
            requests.get(f"{network.url('scheduler')}/displays", timeout=5).json()[0]["name"]
            == "e2e display"
        ),
        10,
        "the display's name",
    )


def test_schedule_file_edit_reaches_the_screen(network: Network) -> None:
    (network.root / "schedules" / "lobby.xml").write_bytes(
        schedule_xml("Lobby two", network.url("content"))
    )
    wait_for_answer(
        lambda: "text=Lobby%20two" in (network.playback().get("content-item") or ""),
        15,
        "the edited schedule on screen",
    )


def test_content_app_request_reaches_the_screen(network: Network) -> None:
    answer = requests.post(
        f"{network.url('content')}/message/schedule",
        json={
            "application-params": {"text": "Hello from the content segment", "background": "teal"},
            "display-uri": network.url("display"),
            "preferred-duration": "3 seconds",
            "requestor": {"device-id": "e2e", "user-id": "tester"},
        },
        timeout=10,
    )
    assert answer.status_code == 202
    assert answer.json() == {"request-status": "forwarded"}
    record = wait_for_answer(
        lambda: (r := network.playback()).get("origin") == "request" and r,
        15,
        "the content app's page on screen",
    )
    assert record["content-item"].startswith(f"{network.url('content')}/message/?")
    assert "Hello+from+the+content+segment" in record["content-item"]


def test_remote_content_set_is_fetched_and_played(network: Network) -> None:
    fetched = network.root / "remote-menu.xml"
    fetched.write_bytes(
        schedule_xml("Remote menu", network.url("content")).replace(b'name="lobby"', b'name="menu"')
    )
    pointer = f"""<content-set name="remote-menu" type="remote">
  <requires-file><sources><uri>{fetched.as_uri()}</uri></sources></requires-file>
</content-set>""".encode()
    answer = requests.post(
        f"{network.url('display')}/schedule",
        data=pointer,
        headers={"Content-Type": "text/xml"},
        timeout=5,
    )
    assert answer.status_code == 202
    wait_for_answer(
        lambda: "text=Remote%20menu" in (network.playback().get("content-item") or ""),
        20,
        "the remote set's item on screen",
    )
    kept = list((network.root / "display-data" / "remote-sets").glob("*.xml"))
    assert [path.read_bytes() for path in kept] == [fetched.read_bytes()]


def test_sensor_readings_reach_the_display(network: Network) -> None:
    answer = requests.post(
        f"{network.url('sensor')}/subscribe",
        json={"subscriber-uri": f"{network.url('display')}/sensing"},
        timeout=5,
    )
    assert answer.status_code == 201
    sensors = wait_for_answer(
        lambda: requests.get(f"{network.url('display')}/sensing", timeout=5).json(),
        10,
        "the sensor known to the display",
    )
    assert sensors == [{"sensor-id": "e2e-temp", "sensor-type": "air temperature"}]
    # The scheduler re-reads the display's GET / (every 2 s here) and learns its sensors.
    wait_for_answer(
        lambda: (
            requests.get(f"{network.url('scheduler')}/displays?url-only=false", timeout=5).json()[
                0
            ]["sensors"]
            == sensors
        ),
        10,
        "the display's sensors in the registry",
    )
    (network.root / "temp").write_text("23000\n")
    assert requests.get(f"{network.url('sensor')}/", timeout=5).json()["sensor-id"] == "e2e-temp"
    wait_for_answer(
        lambda: requests.get(f"{network.url('sensor')}/", timeout=5).json()["data"] == "23",
        5,
        "the new reading",
    )
    # A page on screen sees the reading through the display's context API (window.pdn).
    answer = requests.post(
        f"{network.url('content')}/gauge/schedule",
        json={
            "application-params": {},
            "display-uri": network.url("display"),
            "preferred-duration": "6 seconds",
            "requestor": {"device-id": "e2e"},
        },
        timeout=10,
    )
    assert answer.json() == {"request-status": "forwarded"}
    wait_for_answer(
        lambda: "/gauge/" in (network.playback().get("content-item") or ""),
        15,
        "the gauge page on screen",
    )
    wait_for_answer(lambda: _centre_colour(network) == (0, 255, 0), 10, "the page turned green")


def _centre_colour(network: Network) -> tuple[int, int, int]:
    from PySide6.QtGui import QImage

    png = requests.get(f"{network.url('display')}/x/screenshot", timeout=10).content
    image = QImage()
    assert image.loadFromData(png), "the screenshot is not a PNG"
    pixel = image.pixelColor(image.width() // 2, image.height() // 2)
    return (pixel.red(), pixel.green(), pixel.blue())


def test_scheduler_killed_and_restarted_loses_nothing(network: Network) -> None:
    process = network.processes["scheduler"]
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    process.start()
    scheduler = network.url("scheduler")
    displays = wait_for_answer(
        lambda: requests.get(f"{scheduler}/displays", timeout=2).json(), 20, "the registry back"
    )
    assert displays[0]["url"].rstrip("/") == network.url("display")
    assert b"Lobby%20two" in requests.get(f"{scheduler}/schedule/lobby/", timeout=5).content
    # The follower polls once a minute: a change now reaches the screen only through the
    # subscription the scheduler kept.
    (network.root / "schedules" / "lobby.xml").write_bytes(
        schedule_xml("Lobby three", network.url("content"))
    )
    wait_for_answer(
        lambda: "text=Lobby%20three" in (network.playback().get("content-item") or ""),
        25,  # the gauge request of the sensor test may still be on screen
        "the change after the restart on screen",
    )
