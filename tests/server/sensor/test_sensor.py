"""The Environment Segment through its real waitress server, with real webhook receivers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from server.sensor.service import SensorService
from server.sensor.source import (
    CommandSource,
    DataSourceUri,
    FileSource,
    SourceError,
    make_reading,
)
from tests.support.pages import PageServer
from tests.support.sensor import cpu_sensor, thermal_file
from tests.support.sensor import start as start_sensor
from tests.support.waiting import wait_until


@pytest.fixture
def thermal(tmp_path: Path) -> Path:
    return thermal_file(tmp_path)


def start(tmp_path: Path, source: object, **options: Any) -> SensorService:
    """The sensor pi-cpu reading ``source``, its data in ``tmp_path/sensor-data``."""
    return start_sensor(tmp_path / "sensor-data", source, **options)


@pytest.fixture
def sensor(tmp_path: Path) -> Iterator[SensorService]:
    service = cpu_sensor(tmp_path)
    yield service
    service.stop()


def test_get_reports_the_reading_as_a_string(sensor: SensorService) -> None:
    answer = requests.get(f"{sensor.url}/", timeout=5)
    assert answer.status_code == 200
    assert answer.json() == {
        "sensor-id": "pi-cpu",
        "sensor-type": "cpu temperature",
        "data": "48.312",
    }


def test_subscribers_get_the_reading_now_and_at_once_on_change(
    sensor: SensorService, thermal: Path, peer: PageServer
) -> None:
    hook = {"subscriber-uri": f"{peer.url}/sensing"}
    answer = requests.post(f"{sensor.url}/subscribe", json=hook, timeout=5)
    assert answer.status_code == 201
    assert answer.json() == {}
    first = peer.wait_for(1, "/sensing")[0]
    assert first.json() == {"sensor-id": "pi-cpu", "sensor-type": "cpu temperature", "data": 48.312}
    assert first.headers["Content-Type"] == "application/json"
    assert requests.post(f"{sensor.url}/subscribe", json=hook, timeout=5).status_code == 201
    thermal.write_text("51000\n")
    readings = wait_until(
        lambda: [r.json()["data"] for r in peer.received("/sensing") if r.json()["data"] == 51]
    )
    assert readings == [51]


def test_readings_repeat_every_interval(tmp_path: Path, thermal: Path, peer: PageServer) -> None:
    service = start(tmp_path, FileSource(thermal), interval=0.3, poll=0.1)
    try:
        requests.post(
            f"{service.url}/subscribe", json={"subscriber-uri": f"{peer.url}/s"}, timeout=5
        )
        received = peer.wait_for(3, "/s", timeout=5)
        assert all(r.json()["data"] == 48312 for r in received)
    finally:
        service.stop()


def test_unsubscribe_stops_updates(sensor: SensorService, thermal: Path, peer: PageServer) -> None:
    hook = {"subscriber-uri": f"{peer.url}/sensing"}
    requests.post(f"{sensor.url}/subscribe", json=hook, timeout=5)
    peer.wait_for(1, "/sensing")
    answer = requests.post(f"{sensor.url}/unsubscribe", json=hook, timeout=5)
    assert answer.status_code == 200
    assert answer.json() == {}
    again = requests.post(f"{sensor.url}/unsubscribe", json=hook, timeout=5)
    assert again.status_code == 404
    assert again.json()["error"] == "not-subscribed"
    thermal.write_text("60000\n")
    wait_until(lambda: requests.get(f"{sensor.url}/", timeout=5).json()["data"] == "60")
    assert len(peer.received("/sensing")) == 1


@pytest.mark.parametrize("path", ["/subscribe", "/unsubscribe"])
def test_subscription_errors(sensor: SensorService, path: str) -> None:
    for body in (
        {},
        {"subscriber-uri": "relative/path"},
        {"subscriber-uri": "file:///tmp/x"},
        {"subscriber-uri": ["http://a/"]},
    ):
        answer = requests.post(f"{sensor.url}{path}", json=body, timeout=5)
        assert answer.status_code == 400
        assert answer.json()["field"] == "subscriber-uri"
    assert (
        requests.post(
            f"{sensor.url}{path}",
            data=b"[",
            timeout=5,
            headers={"Content-Type": "application/json"},
        ).status_code
        == 400
    )
    assert requests.get(f"{sensor.url}{path}", timeout=5).status_code == 405


def test_subscriptions_survive_a_restart(tmp_path: Path, thermal: Path, peer: PageServer) -> None:
    first = start(tmp_path, FileSource(thermal), interval=60.0, poll=0.05)
    requests.post(f"{first.url}/subscribe", json={"subscriber-uri": f"{peer.url}/s"}, timeout=5)
    peer.wait_for(1, "/s")
    first.stop()
    second = start(tmp_path, FileSource(thermal), interval=60.0, poll=0.05)
    try:
        # The first reading after a start goes to every stored subscriber.
        peer.wait_for(2, "/s")
        assert second.outbox.subscribers("sensor") == [f"{peer.url}/s"]
    finally:
        second.stop()


def test_data_source_sensor(tmp_path: Path, peer: PageServer) -> None:
    service = start(tmp_path, DataSourceUri("rtsp://192.0.2.5/stream"), interval=60.0)
    try:
        assert requests.get(f"{service.url}/", timeout=5).json() == {
            "sensor-id": "pi-cpu",
            "sensor-type": "cpu temperature",
            "data-source": "rtsp://192.0.2.5/stream",
        }
        requests.post(
            f"{service.url}/subscribe", json={"subscriber-uri": f"{peer.url}/s"}, timeout=5
        )
        assert peer.wait_for(1, "/s")[0].json()["data-source"] == "rtsp://192.0.2.5/stream"
    finally:
        service.stop()


def test_no_reading_yet_is_503(tmp_path: Path) -> None:
    service = start(tmp_path, FileSource(tmp_path / "missing"), interval=60.0)
    try:
        # (Connection: close: a kept-alive connection delays the server's stop by seconds.)
        answer = requests.get(f"{service.url}/", timeout=5, headers={"Connection": "close"})
        assert answer.status_code == 503
        assert answer.json()["error"] == "no-reading"
    finally:
        service.stop()


def test_command_source() -> None:
    python = sys.executable
    assert CommandSource(f"{python} -c 'print(21.5)'", timeout=10).read().value == 21.5
    text = CommandSource("echo door open", timeout=10).read()
    assert (text.text, text.value) == ("door open", "door open")
    structured = CommandSource("""echo '{"lux": 300}'""", timeout=10).read()
    assert structured.value == {"lux": 300}
    with pytest.raises(SourceError, match="exited with 3"):
        CommandSource("exit 3", timeout=10).read()
    with pytest.raises(SourceError, match="within"):
        CommandSource("sleep 5", timeout=0.2).read()


def test_readings() -> None:
    assert make_reading("48312\n", scale=0.001).value == 48.312
    assert make_reading("48312\n", scale=0.001).text == "48.312"
    assert make_reading("1e3").value == 1000.0
    assert make_reading("true").value == "true"  # not numeric: a string
    assert make_reading(" cloudy ").value == "cloudy"
