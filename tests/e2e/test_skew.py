"""Version skew: a scheduler and a display one minor version apart work together.

This checkout's scheduler against a display of the previous release, pdn 0.1.0 installed from
its wheel into a venv of its own (tests/support/release.py), and the reverse: each a real process on
loopback, the display on the shared Xvfb. The display registers with the scheduler's enrolment
token, the operator puts a schedule and assigns it to the display, the display shows it, and
its plays arrive at the scheduler (GET /x/plays); the fleet view names the display's version.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.pages import one_page
from tests.support.ports import free_port
from tests.support.process import PDN, PdnProcess
from tests.support.release import PREVIOUS_VERSION
from tests.support.waiting import wait_for_answer

pytestmark = [pytest.mark.slow, pytest.mark.qt]

NEW_VERSION = "0.2.0"
OPERATOR, ENROLMENT = "operator-token-of-the-skew-test", "enrolment-token-of-the-skew-test"
PAGE = b"<!doctype html><html><body style='margin:0;background:#2060a0'>skew</body></html>"


@pytest.fixture
def old_pdn(previous_release: Path) -> str:
    return str(previous_release.parent / "pdn")  # the session's venv of pdn 0.1.0


@pytest.fixture(scope="module")
def page() -> Iterator[str]:
    """A page to schedule, from a page server in this process."""
    with one_page(PAGE) as server:
        yield f"{server.url}/skew.html"


def release_process(
    pdn: str, command: str, folder: Path, args: list[str], port: int, **env: str
) -> PdnProcess:
    """``pdn`` of one release or the other, in ``folder`` (this checkout kept off its path)."""
    return PdnProcess(
        command,
        folder,
        ["--host", "127.0.0.1", *args] if command == "scheduler" else args,
        port=port,
        env=env,
        unset=("PYTHONPATH", "VIRTUAL_ENV"),
        program=(pdn,),
        cwd=folder,
        listen_flag=command == "scheduler",
        probe="/displays",
    )


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
    scheduler_pdn, display_pdn = (PDN, old_pdn) if skew.startswith("new") else (old_pdn, PDN)
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
    started = {
        "scheduler": release_process(
            scheduler_pdn, "scheduler", tmp_path,
            ["--data-dir", str(tmp_path / "scheduler-data"),
             "--schedules", str(tmp_path / "schedules"), "--refresh", "2"],
            scheduler_port, PDN_API_TOKEN=OPERATOR, PDN_ENROLMENT_TOKEN=ENROLMENT,
        ),
        "display": release_process(
            display_pdn, "display", tmp_path,
            ["--config", str(tmp_path / "display.toml"),
             "--data-dir", str(tmp_path / "display-data")],
            display_port,
        ),
    }  # fmt: skip
    operator = {"Authorization": f"Bearer {OPERATOR}"}
    try:
        started["scheduler"].start().wait_ready(timeout=30)
        started["display"].start()
        wait_for_answer(
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
        wait_for_answer(
            lambda: (
                requests.get(f"{display}/playback/", timeout=5).json().get("content-item") == page
            ),
            60,
            "the schedule on the display",
        )
        plays = wait_for_answer(
            lambda: [
                play
                for play in requests.get(f"{scheduler}/x/plays", timeout=5).json()["plays"]
                if play["content-item"] == page
            ],
            60,
            "a play at the scheduler",
        )
        assert plays[0]["display"].rstrip("/") == display and plays[0]["set"] == "skew"
        fleet = wait_for_answer(
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
        logs = {
            name: process.text()[-4000:] or "(not started)" for name, process in started.items()
        }
        raise AssertionError(
            f"{error}\n--- scheduler log\n{logs['scheduler']}\n--- display log\n{logs['display']}"
        ) from None
    finally:
        for process in started.values():
            process.stop()
