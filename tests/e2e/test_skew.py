"""Version skew (issue 25): a scheduler and a display one minor version apart work together.

This checkout's scheduler against a display of the previous release, pdn 0.1.0 installed from
its wheel into a venv of its own (tests/support/release.py), and the reverse: each a real process on
loopback, the display on the shared Xvfb. The display registers with the scheduler's enrolment
token, the operator puts a schedule and assigns it to the display, the display shows it, and
its plays arrive at the scheduler (GET /x/plays); the fleet view names the display's version.
"""

from __future__ import annotations

import http.server
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.e2e.test_network import free_port, wait_for
from tests.support.release import PREVIOUS_VERSION, release_env

pytestmark = [pytest.mark.slow, pytest.mark.qt]

NEW_PDN = str(Path(sys.executable).parent / "pdn")
NEW_VERSION = "0.2.0"
OPERATOR, ENROLMENT = "operator-token-of-the-skew-test", "enrolment-token-of-the-skew-test"
PAGE = b"<!doctype html><html><body style='margin:0;background:#2060a0'>skew</body></html>"


@pytest.fixture
def old_pdn(previous_release: Path) -> str:
    return str(previous_release.parent / "pdn")  # the session's venv of pdn 0.1.0


@pytest.fixture(scope="module")
def page() -> Iterator[str]:
    """A page to schedule, from a plain HTTP server in this process."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/skew.html"
    server.shutdown()
    server.server_close()


class Processes:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.running: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, command: list[str], **env: str) -> None:
        with (self.root / f"{name}.log").open("ab") as log:
            self.running[name] = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
                env=release_env(**env),
            )  # fmt: skip

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else "(not started)"

    def stop(self) -> None:
        for process in self.running.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.running.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def schedule(page: str) -> bytes:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<content-set name="skew" type="inline">
  <constraints><scheduling-constraints>
    <preferred-duration>2 seconds</preferred-duration>
  </scheduling-constraints></constraints>
  <content-item content-type="text/html">
    <requires-file><sources><uri>{page}</uri></sources></requires-file>
  </content-item>
</content-set>
""".encode()


@pytest.mark.parametrize("skew", ["new scheduler, old display", "old scheduler, new display"])
def test_scheduler_and_display_one_version_apart(
    skew: str, old_pdn: str, page: str, tmp_path: Path
) -> None:
    scheduler_pdn, display_pdn = (
        (NEW_PDN, old_pdn) if skew.startswith("new") else (old_pdn, NEW_PDN)
    )
    display_version = PREVIOUS_VERSION if display_pdn == old_pdn else NEW_VERSION
    scheduler_port, display_port = free_port(), free_port()
    scheduler = f"http://127.0.0.1:{scheduler_port}"
    display = f"http://127.0.0.1:{display_port}"
    (tmp_path / "schedules").mkdir()
    (tmp_path / "display.toml").write_text(
        f'name = "skew"\nregister = "{scheduler}"\nscheduler_token = "{ENROLMENT}"\n'
        f'[listen]\nhost = "127.0.0.1"\nport = {display_port}\n'
        '[location]\nlatitude = "N54.0104"\nlongitude = "W2.7883"\n'
    )
    processes = Processes(tmp_path)
    operator = {"Authorization": f"Bearer {OPERATOR}"}
    try:
        processes.start(
            "scheduler",
            [scheduler_pdn, "scheduler", "--host", "127.0.0.1", "--port", str(scheduler_port),
             "--data-dir", str(tmp_path / "scheduler-data"),
             "--schedules", str(tmp_path / "schedules"), "--refresh", "2"],
            PDN_API_TOKEN=OPERATOR, PDN_ENROLMENT_TOKEN=ENROLMENT,
        )  # fmt: skip
        wait_for(lambda: requests.get(f"{scheduler}/displays", timeout=2).ok, 30, "scheduler up")
        processes.start(
            "display",
            [display_pdn, "display", "--config", str(tmp_path / "display.toml"),
             "--data-dir", str(tmp_path / "display-data")],
        )  # fmt: skip
        wait_for(
            lambda: any(
                d["url"].rstrip("/") == display
                for d in requests.get(f"{scheduler}/displays", timeout=5).json()
            ),
            60,
            "the display registered",
        )
        put = requests.put(
            f"{scheduler}/x/schedules/skew",
            data=schedule(page),
            headers={"Content-Type": "text/xml", **operator},
            timeout=5,
        )
        assert put.status_code in (201, 204), put.text
        assigned = requests.post(
            f"{scheduler}/x/assignments",
            json={"schedule": "skew", "display": display},
            headers=operator,
            timeout=5,
        )
        assert assigned.status_code == 201, assigned.text
        wait_for(
            lambda: (
                requests.get(f"{display}/playback/", timeout=5).json().get("content-item") == page
            ),
            60,
            "the schedule on the display",
        )
        plays = wait_for(
            lambda: [
                play
                for play in requests.get(f"{scheduler}/x/plays", timeout=5).json()["plays"]
                if play["content-item"] == page
            ],
            60,
            "a play at the scheduler",
        )
        assert plays[0]["display"].rstrip("/") == display and plays[0]["set"] == "skew"
        fleet = wait_for(
            lambda: [
                d
                for d in requests.get(f"{scheduler}/x/fleet", timeout=5).json()
                if d["display"].rstrip("/") == display and d.get("version")
            ],
            30,
            "the display's version in the fleet",
        )
        assert fleet[0]["version"] == display_version
    except AssertionError as error:
        raise AssertionError(
            f"{error}\n--- scheduler log\n{processes.log('scheduler')}"
            f"\n--- display log\n{processes.log('display')}"
        ) from None
    finally:
        processes.stop()
