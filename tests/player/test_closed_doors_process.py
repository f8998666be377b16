"""The real ``pdn display`` process: secret files at 0600 under umask 000, a replayed signed
update dropped after a restart, and a browser's requests refused while pdn's own get through."""

from __future__ import annotations

import http.client
import json
import os
import ssl
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from server.platform.signing import new_secret, signed_headers
from tests.support.display import DisplayProcess
from tests.support.pages import PageServer, one_page
from tests.support.ports import free_port
from tests.support.process import PDN
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.qt, pytest.mark.slow]

SECRET_FILES = ("pairings.db", "display.db", "webhook-secret", "tls-key.pem", "pairing-code")


@pytest.fixture
def content() -> Iterator[PageServer]:
    with one_page() as server:
        yield server


def start(folder: Path, config: str, data: Path, port: int, tls: bool = False) -> DisplayProcess:
    """``pdn display`` under umask 000, up once it says it runs and answers."""
    display = DisplayProcess(
        folder, config=config, data_dir=data, platform="offscreen", port=port, listen_flag=False
    )
    old = os.umask(0)
    try:
        display.start()
    finally:
        os.umask(old)
    return display.wait_ready(
        lambda: "display running" in display.text() and answers(port, tls), 90
    )


def answers(port: int, tls: bool) -> bool:
    """GET / answers 200 (over HTTPS, its self-signed certificate is not checked here)."""
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            "127.0.0.1", port, timeout=5, context=context
        )
    else:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def stop(display: DisplayProcess) -> None:
    assert display.stop(30) == 0


def modes(data: Path) -> dict[str, int]:
    """The mode of every secret file, database and database journal in ``data``."""
    found = {}
    for path in data.iterdir():
        if (
            path.name in SECRET_FILES
            or path.suffix == ".db"
            or path.name.endswith(("-wal", "-shm"))
        ):
            found[path.name] = stat.S_IMODE(path.stat().st_mode)
    return found


def test_secrets_are_0600_and_a_replay_after_a_restart_is_dropped(
    tmp_path: Path, content: PageServer
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    # An older release's secret, readable by everyone: tightened at start.
    secret = new_secret()
    (data / "webhook-secret").write_text(secret + "\n")
    os.chmod(data / "webhook-secret", 0o644)
    port = free_port()
    config = f'[listen]\nhost = "127.0.0.1"\nport = {port}\ntls = true\n'
    display = start(tmp_path / "one", config, data, port, tls=True)
    try:
        found = modes(data)
        assert set(SECRET_FILES) <= set(found), found
        assert {name: mode for name, mode in found.items() if mode != 0o600} == {}
    finally:
        stop(display)

    # Plain HTTP now; the display's database was left readable by a hand in between.
    os.chmod(data / "display.db", 0o644)
    config = f'[listen]\nhost = "127.0.0.1"\nport = {port}\n'
    url = f"http://127.0.0.1:{port}"
    display = start(tmp_path / "two", config, data, port)
    try:
        assert stat.S_IMODE((data / "display.db").stat().st_mode) == 0o600
        before = requests.get(url + "/playback/", timeout=5).json()["sequence"]
        item = json.dumps({"content-item": content.url + "/page"}).encode()
        browser = [
            ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
            ({"Content-Type": "text/plain"}, 415),
            ({"Origin": url}, 415),  # unlabelled, from a page: browsers send Origin with a POST
            ({"Content-Type": "application/json", "Host": f"evil.example:{port}"}, 403),
            ({"Content-Type": "application/json", "Origin": "http://evil.example"}, 403),
        ]
        for headers, status in browser:
            answer = requests.post(url + "/schedule", data=item, headers=headers, timeout=5)
            assert answer.status_code == status, answer.text
        assert requests.get(url + "/playback/", timeout=5).json()["sequence"] == before
        # pdn's own client still gets through.
        env = {k: v for k, v in os.environ.items() if k != "PDN_API_TOKEN"}
        env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
        ctl = subprocess.run(
            [PDN, "ctl", "schedule", url, content.url + "/ctl", "--for", "2 s"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )
        assert ctl.returncode == 0, ctl.stderr
        # A signed update, as the scheduler sends one.
        signed = json.dumps({"content-item": content.url + "/signed"}).encode()
        headers = {
            "Content-Type": "application/json",
            **signed_headers(secret, "msg_replayed", signed),
        }
        taken = requests.post(url + "/schedule", data=signed, headers=headers, timeout=5)
        assert taken.status_code == 202, taken.text
        wait_until(
            lambda: (
                requests.get(url + "/playback/", timeout=5).json()["content-item"]
                == content.url + "/signed"
            ),
            timeout=30,
        )
    finally:
        stop(display)

    display = start(tmp_path / "three", config, data, port)
    try:
        replayed = requests.post(url + "/schedule", data=signed, headers=headers, timeout=5)
        assert replayed.status_code == 200 and replayed.json() == {}
        fresh = {
            "Content-Type": "application/json",
            **signed_headers(secret, "msg_new", signed),
        }
        assert requests.post(url + "/schedule", data=signed, headers=fresh, timeout=5).ok
    finally:
        stop(display)
