"""The real ``pdn display`` process: Qt WebEngine offscreen, waitress, SQLite; kill -9 and back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from tests.support.display import DisplayProcess
from tests.support.pages import HookReceiver, PageServer, one_page
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.qt, pytest.mark.slow]


def run_pdn(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.cli", "display", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def content() -> Iterator[PageServer]:
    with one_page() as server:
        yield server


CONFIG = (
    'name = "E2E"\ntimezone = "Europe/London"\n'
    '[location]\nlatitude = "N54.0104"\nlongitude = "W 2 47.22"\n'
)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[[], DisplayProcess]]:
    """Start ``pdn display`` (offscreen) on one port and data directory, again after a kill."""
    started: list[DisplayProcess] = []
    port = free_port()

    def run() -> DisplayProcess:
        display = DisplayProcess(tmp_path, config=CONFIG, platform="offscreen", port=port)
        started.append(display)
        return display.start().wait_ready()

    yield run
    for display in started:
        display.kill()


def test_display_serves_shows_survives_kill_9_and_stops_cleanly(
    start: Callable[[], DisplayProcess], content: PageServer
) -> None:
    receiver = HookReceiver()
    try:
        first = start()
        url = first.url
        assert requests.get(url + "/", timeout=5).json() == {
            "location": {"latitude": "N54.0104", "longitude": "W 2 47.22"},
            "sensors": {"url": "sensing"},
            "name": "E2E",
        }
        hook = {"subscriber-uri": receiver.url()}
        assert requests.post(url + "/playback/subscribe/", json=hook, timeout=5).status_code == 201
        reading = {"sensor-id": "t1", "sensor-type": "air temperature", "data": 20.5}
        assert requests.post(url + "/sensing", json=reading, timeout=5).status_code == 200
        lobby = (
            f'<content-set name="lobby"><content-item content-type="text/html"><requires-file>'
            f"<sources><uri>{content.url}/lobby</uri></sources></requires-file></content-item>"
            f"</content-set>"
        ).encode()
        scheduled = requests.post(
            url + "/schedule", data=lobby, headers={"Content-Type": "text/xml"}, timeout=5
        )
        assert scheduled.json() == {"request-status": "scheduling"}
        first.wait_playback(lambda r: r["set"] == "lobby")
        item = {"content-item": content.url + "/page", "preferred-duration": "2 minutes"}
        answer = requests.post(url + "/schedule", json=item, timeout=5)
        assert answer.json() == {"request-status": "scheduling"}
        record = first.wait_playback(lambda r: r["content-item"] == item["content-item"])
        assert record["origin"] == "request" and record["duration"] == 120.0
        wait_until(
            lambda: any(json.loads(b)["sequence"] == record["sequence"] for b in receiver.bodies()),
            timeout=10,
        )
        shot = requests.get(url + "/x/screenshot", timeout=10)
        assert shot.status_code == 200 and shot.headers["Content-Type"] == "image/png"
        assert shot.content.startswith(b"\x89PNG")
        health = requests.get(url + "/x/health", timeout=5)
        assert health.status_code == 200, health.text
        assert health.json()["renderer"]["alive"] is True

        first.kill()  # kill -9: no clean shutdown at all
        seen_before = len(receiver.received)

        second = start()
        after = second.wait_playback(
            lambda r: (
                r["content-item"] == item["content-item"] and r["sequence"] > record["sequence"]
            ),
        )
        assert after["origin"] == "request"
        assert after["duration"] < 120.0  # the time it had left, not a fresh two minutes
        assert requests.get(url + "/x/health", timeout=5).json()["schedule"]["sets"] == ["lobby"]
        assert requests.get(url + "/sensing", timeout=5).json() == [
            {"sensor-id": "t1", "sensor-type": "air temperature"}
        ]
        # The subscription survived: the restart's changes are delivered too.
        wait_until(lambda: len(receiver.received) > seen_before, timeout=10)
        assert json.loads(receiver.bodies()[-1])["sequence"] >= after["sequence"]
        assert (
            requests.post(url + "/playback/unsubscribe/", json=hook, timeout=5).status_code == 200
        )

        assert second.stop(30) == 0
        log = second.text()
        assert "received SIGTERM" in log and "stopped" in log
    finally:
        receiver.close()


def test_bad_config_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('name = "x"\n[location]\nlatitude = "Q12"\nlongitude = "E1"\n')
    result = run_pdn("--config", str(config), "--data-dir", str(tmp_path / "d"))
    assert result.returncode == 2
    assert "location.latitude" in result.stderr
    config.write_text('colour = "red"\n')
    result = run_pdn("--check-config", "--config", str(config))
    assert result.returncode == 2 and "colour" in result.stderr
    config.write_text('timezone = "Mars/Olympus"\n')
    result = run_pdn("--check-config", "--config", str(config))
    assert result.returncode == 2 and "timezone" in result.stderr


def test_check_config_prints_the_effective_settings(tmp_path: Path) -> None:
    config = tmp_path / "ok.toml"
    config.write_text(
        'name = "Lobby"\naccept_cds = false\nallowed-origins = ["https://a.example"]\n'
        '[listen]\nhost = "0.0.0.0"\nport = 9000\n[screen]\nrotation = 90\n'
    )
    result = run_pdn(
        "--check-config", "--config", str(config), "--port", "9100", env={"PDN_API_TOKEN": "x"}
    )
    assert result.returncode == 0, result.stderr
    assert "0.0.0.0:9100" in result.stdout
    assert "API token:       set" in result.stdout
    assert "changes need:    the API token or a paired controller's token" in result.stdout
    result = run_pdn("--check-config", "--config", str(config), env={"PDN_API_TOKEN": ""})
    assert "changes need:    a paired controller's token" in result.stdout
    assert "https://a.example" in result.stdout


def test_taken_port_exits_1(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_pdn(
            "--port",
            str(port),
            "--data-dir",
            str(tmp_path / "d"),
            env={"QT_QPA_PLATFORM": "offscreen"},
        )
    assert result.returncode == 1
    assert "cannot listen" in result.stderr


def test_a_finished_request_gives_way_to_the_idle_page_on_screen(
    start: Callable[[], DisplayProcess], content: PageServer
) -> None:
    """The idle record comes from the renderer's report that the idle page is painted."""
    display = start()
    url = display.url
    item = {"content-item": content.url + "/page", "preferred-duration": "1 s"}
    assert requests.post(url + "/schedule", json=item, timeout=5).status_code == 202
    shown = display.wait_playback(lambda r: r["content-item"] == item["content-item"])
    idle = display.wait_playback(
        lambda r: r["origin"] == "idle" and r["sequence"] > shown["sequence"]
    )
    assert idle["content-item"] is None
    assert idle["started"] >= shown["started"]
    assert requests.get(url + "/x/health", timeout=5).json()["engine"]["idle"] is True


def test_a_display_on_every_address_is_closed_until_paired(tmp_path: Path) -> None:
    """Closed beyond loopback, from a fresh data directory: the real process on 0.0.0.0."""
    display = DisplayProcess(tmp_path, ["--host", "0.0.0.0"], platform="offscreen")
    data, url = display.data_dir, display.url
    try:
        display.start().wait_ready()
        item = {"content-item": "http://127.0.0.1:9/page"}
        refused = requests.post(url + "/schedule", json=item, timeout=5)
        assert refused.status_code == 401 and refused.json()["error"] == "not-paired"
        assert requests.get(url + "/playback/", timeout=5).status_code == 200
        shown = run_pdn("--pairing-code", "--data-dir", str(data))
        assert shown.returncode == 0, shown.stderr
        code = shown.stdout.strip()
        paired = requests.post(url + "/x/pair", json={"code": code, "name": "ops"}, timeout=5)
        assert paired.status_code == 201, paired.text
        token = paired.json()["token"]
        answer = requests.post(
            url + "/schedule", json=item, headers={"Authorization": f"Bearer {token}"}, timeout=5
        )
        assert answer.json() == {"request-status": "scheduling"}
        # The idle page was given the new code (the renderer's own test checks the page).
        wait_until(
            lambda: run_pdn("--pairing-code", "--data-dir", str(data)).stdout.strip() != code
        )
        assert display.stop(30) == 0
        log = display.text()
        assert "closed: changes need a paired controller's token" in log
        assert token not in log and code not in log  # no secret in a log line
    finally:
        display.kill()


def test_a_display_serving_https_pairs_and_is_pinned(tmp_path: Path) -> None:
    """[listen] tls on a fresh data directory: a self-signed certificate is made,
    its fingerprint is in --check-config, health and the pairing answer, and pdn ctl pairs on
    first use and schedules over HTTPS."""
    port = free_port()
    listen = f'[listen]\nhost = "0.0.0.0"\nport = {port}\ntls = true\n'
    display = DisplayProcess(
        tmp_path, config=listen, platform="offscreen", port=port, scheme="https", listen_flag=False
    )
    data, config, url = display.data_dir, display.config, display.url
    env = {"XDG_CONFIG_HOME": str(tmp_path / "ctl"), "PDN_API_TOKEN": ""}
    try:
        display.start().wait_ready(
            lambda: (data / "tls-cert.pem").exists() and "Display Segment API" in display.text()
        )
        checked = run_pdn("--check-config", "--config", str(config), "--data-dir", str(data))
        pin = checked.stdout.split("fingerprint ")[1].split()[0]
        assert pin.startswith("sha256:") and len(pin) == 71
        code = run_pdn("--pairing-code", "--data-dir", str(data)).stdout.strip()
        paired = subprocess.run(
            [sys.executable, "-m", "server.cli", "ctl", "pair", url, code, "--name", "ops"],
            capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **env},
        )  # fmt: skip
        assert paired.returncode == 0, paired.stderr
        assert pin in (tmp_path / "ctl" / "pdn" / "ctl.toml").read_text()
        health = subprocess.run(
            [sys.executable, "-m", "server.cli", "ctl", "health", url, "--json"],
            capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **env},
        )  # fmt: skip
        assert json.loads(health.stdout)["tls"] == {"fingerprint": pin}
        scheduled = subprocess.run(
            [sys.executable, "-m", "server.cli", "ctl", "schedule", url, "http://127.0.0.1:9/"],
            capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **env},
        )  # fmt: skip
        assert scheduled.returncode == 0, scheduled.stderr
        assert f"serving HTTPS; certificate fingerprint {pin}" in display.text()
    finally:
        display.kill()
