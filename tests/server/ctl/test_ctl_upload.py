"""``pdn ctl upload`` as the operator runs it, against a real scheduler with an operator token:
the progress, one answer per file (new, already stored, refused with the reason and the file
named), the exit status, and the token sent as the other fleet commands send it."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from PIL import Image

from server.scheduler.service import SchedulerService
from tests.support.ctl import pdn_ctl
from tests.support.lan import OPERATOR
from tests.support.process import CREDENTIALS
from tests.support.scheduler import start


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[SchedulerService]:
    service = start(tmp_path / "scheduler", None, token=OPERATOR)
    yield service
    service.stop()


def picture(path: Path, colour: tuple[int, int, int]) -> Path:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), colour).save(out, "PNG")
    path.write_bytes(out.getvalue())
    return path


def operator_env(service: SchedulerService) -> dict[str, str]:
    return {"PDN_API_TOKEN": OPERATOR, "PDN_API_URL": service.url}


def test_upload_says_what_became_of_each_file(scheduler: SchedulerService, tmp_path: Path) -> None:
    red = picture(tmp_path / "red.png", (255, 0, 0))
    copy = tmp_path / "copy.png"
    copy.write_bytes(red.read_bytes())
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    lie = tmp_path / "blue.jpg"
    lie.write_bytes(picture(tmp_path / "b.png", (0, 0, 255)).read_bytes())
    done = pdn_ctl(
        "upload", scheduler.url, str(red), str(copy), str(notes), str(lie),
        str(tmp_path / "missing.png"), "--tag", "lobby", "--tag", "red",
        env=operator_env(scheduler), unset=CREDENTIALS,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    sha = hashlib.sha256(red.read_bytes()).hexdigest()
    assert lines[0] == f"new: {red} -> /media/{sha}/red.png (image, {red.stat().st_size} B)"
    assert lines[1].startswith(f"already stored: {copy} -> /media/{sha}/red.png")
    assert lines[1].endswith("as 'red.png'")
    assert lines[2].startswith(f"refused: {notes}: 415 'notes.txt' is not a type")
    assert lines[3].startswith(f"refused: {lie}: 422 'blue.jpg' is named .jpg but holds PNG")
    assert lines[4] == f"refused: {tmp_path / 'missing.png'}: no such file"
    assert "red.png: 100% of" in done.stderr and "notes.txt: 100% of" in done.stderr
    listed = requests.get(f"{scheduler.url}/x/media", timeout=10).json()["items"]
    assert [(item["name"], item["tags"], item["uploader"]) for item in listed] == [
        ("red.png", ["lobby", "red"], "operator")
    ]


def test_upload_all_stored_is_exit_zero_and_needs_the_token(
    scheduler: SchedulerService, tmp_path: Path
) -> None:
    green = picture(tmp_path / "green.png", (0, 255, 0))
    done = pdn_ctl(
        "upload", scheduler.url, str(green), env=operator_env(scheduler), unset=CREDENTIALS
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"new: {green} -> /media/")
    bound_elsewhere = {"PDN_API_TOKEN": OPERATOR, "PDN_API_URL": "http://192.0.2.1:8000"}
    refused = pdn_ctl("upload", scheduler.url, str(green), env=bound_elsewhere, unset=CREDENTIALS)
    assert refused.returncode == 1
    assert refused.stdout.startswith(f"refused: {green}: 401")
    unreachable = pdn_ctl("upload", "http://127.0.0.1:9", str(green), unset=CREDENTIALS)
    assert unreachable.returncode == 3 and "cannot reach" in unreachable.stderr
