"""A real ``pdn display`` (on the run's X server) plays the media library's items: a CDS whose
item points at ``/media/<sha256>/<name>`` with the hash is downloaded ahead, verified and shown,
and shown again from the display's cache when the scheduler is gone.

The scheduler is closed (an operator token, and it listens on this machine's LAN address, not
loopback), so the display's download is served only because it comes from the address of an
approved display: the display listens on the same LAN address and registers it as its URL. And
with two scheduler processes on PostgreSQL: uploaded to one, played by a display the other
serves.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from PIL import Image

from server.platform.net import local_address
from server.scheduler.service import SchedulerService
from tests.support.display import DisplayProcess
from tests.support.fleet import put_schedule
from tests.support.lan import ENROLMENT, OPERATOR
from tests.support.pages import PageServer, Reply
from tests.support.ports import free_port
from tests.support.process import CREDENTIALS
from tests.support.scheduler import SchedulerProcess, start
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.qt, pytest.mark.slow]

GROUP = "lobby"
#: The display's own token: one that listens beyond loopback shows its screen to no one else.
DISPLAY_TOKEN = "display-token-0123456789abcdef"
DISPLAY_AUTH = {"Authorization": f"Bearer {DISPLAY_TOKEN}"}
RED = (230, 20, 20)
BLUE = (20, 40, 230)  # #1428e6


def lan_address() -> str:
    """This machine's address on its network (not loopback); the test is skipped without one."""
    address = local_address(or_hostname=False)
    if address is None or address.startswith("127."):
        pytest.skip("this machine has no address beyond loopback")
    return address


def png(colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (320, 180), colour).save(out, "PNG")
    return out.getvalue()


def media_cds(name: str, base: str, item: dict[str, str]) -> bytes:
    return (
        f'<content-set name="{name}"><content-item content-type="image/png"><requires-file>'
        f'<hashes><hash type="sha256">{item["sha256"]}</hash></hashes>'
        f"<sources><uri>{base}{item['url']}</uri></sources></requires-file></content-item>"
        "</content-set>"
    ).encode()


def show_on_group(base: str, item: dict[str, str]) -> None:
    """Store a CDS naming ``item`` by its media URL and hash, and assign it to the group, as
    the operator."""
    assert put_schedule(base, "wall", media_cds("wall", base, item), OPERATOR).ok
    answer = requests.post(
        f"{base}/x/assignments", json={"schedule": "wall", "group": GROUP},
        headers={"Authorization": f"Bearer {OPERATOR}"}, timeout=10,
    )  # fmt: skip
    assert answer.ok, answer.text


def display_config(register: str, public: str | None = None) -> str:
    listen = '[listen]\nhost = "0.0.0.0"\n' if public else ""
    return (
        f'name = "library"\ntimezone = "UTC"\nregister = "{register}"\ngroups = ["{GROUP}"]\n'
        f'scheduler_token = "{ENROLMENT}"\napi_token = "{DISPLAY_TOKEN}"\n'
        + (f'public_url = "{public}"\n' if public else "")
        + '[location]\nlatitude = "N54.0104"\nlongitude = "W2.7883"\n'
        + "[screen]\ncrossfade = 0\n"
        + listen
    )


def centre(display: DisplayProcess) -> tuple[int, int, int]:
    answer = display.get("/x/screenshot", headers=DISPLAY_AUTH)
    if answer.status_code != 200:
        return (-1, -1, -1)
    with Image.open(io.BytesIO(answer.content)) as image:
        pixel = image.convert("RGB").getpixel((image.width // 2, image.height // 2))
    assert isinstance(pixel, tuple)
    return (int(pixel[0]), int(pixel[1]), int(pixel[2]))


def near(seen: tuple[int, ...], colour: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 16 for a, b in zip(seen, colour, strict=True))


def wait_for_colour(display: DisplayProcess, colour: tuple[int, int, int], timeout: float) -> None:
    def shows() -> bool:
        return near(centre(display), colour)

    wait_until(shows, timeout, lambda: f"{colour} on screen (shows {centre(display)})", step=0.5)


@pytest.fixture
def closed_scheduler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SchedulerService]:
    monkeypatch.setenv("PDN_ENROLMENT_TOKEN", ENROLMENT)
    service = start(
        tmp_path / "scheduler", None, host=lan_address(), token=OPERATOR, refresh_interval=0.5
    )
    yield service
    service.stop()


def test_a_display_caches_verifies_and_plays_offline(
    tmp_path: Path, closed_scheduler: SchedulerService
) -> None:
    service = closed_scheduler
    base = service.url
    operator = {"Authorization": f"Bearer {OPERATOR}"}
    data = png(RED)
    item = requests.post(
        f"{base}/x/media", data=data, headers={"X-Filename": "red.png", **operator}, timeout=10
    ).json()
    assert item["sha256"] == hashlib.sha256(data).hexdigest()
    # From this machine's LAN address, with no display registered there: refused.
    assert requests.get(f"{base}{item['url']}", timeout=10).status_code == 403

    port = free_port()
    public = f"http://{lan_address()}:{port}"
    folder = tmp_path / "display"
    with DisplayProcess(
        folder, config=display_config(base, public), port=port,
        unset=(*CREDENTIALS, "PDN_DATABASE_URL"),
    ) as display:  # fmt: skip
        wait_until(lambda: any(d.url.rstrip("/") == public for d in service.storage.displays()),
                   30, "the display registered")  # fmt: skip
        show_on_group(base, item)
        wait_for_colour(display, RED, 60)
        cached = list((display.data_dir / "cache" / "files").iterdir())
        assert [hashlib.sha256(path.read_bytes()).hexdigest() for path in cached] == [
            item["sha256"]
        ]
    service.stop()
    with DisplayProcess(
        folder, config=display_config(base, public), port=port,
        unset=(*CREDENTIALS, "PDN_DATABASE_URL"),
    ) as display:  # fmt: skip
        wait_for_colour(display, RED, 60)  # from its cache, the scheduler gone


def test_uploaded_to_one_process_played_through_the_other(
    tmp_path: Path, postgres_url: str
) -> None:
    """Two ``pdn scheduler`` processes on one PostgreSQL database: the picture goes to the
    first; the display registers with the second, which serves the schedule and the bytes."""
    tokens = {"PDN_API_TOKEN": OPERATOR, "PDN_ENROLMENT_TOKEN": ENROLMENT}
    operator = {"Authorization": f"Bearer {OPERATOR}"}
    with (
        SchedulerProcess(tmp_path / "pg0", database=postgres_url, env=tokens) as first,
        SchedulerProcess(tmp_path / "pg1", database=postgres_url, env=tokens) as second,
    ):
        data = png(BLUE)
        item = requests.post(
            f"{first.url}/x/media", data=data,
            headers={"X-Filename": "blue.png", **operator}, timeout=10,
        ).json()  # fmt: skip
        assert requests.get(f"{second.url}/x/media/{item['sha256']}", headers=operator,
                            timeout=10).ok  # fmt: skip
        with DisplayProcess(
            tmp_path / "display", config=display_config(second.url),
            unset=(*CREDENTIALS, "PDN_DATABASE_URL"),
        ) as display:  # fmt: skip
            wait_until(
                lambda: bool(requests.get(f"{second.url}/displays", timeout=5).json()),
                30, "the display registered",
            )  # fmt: skip
            show_on_group(second.url, item)
            wait_for_colour(display, BLUE, 60)


def test_a_page_bundle_shows_with_its_relative_links(tmp_path: Path) -> None:
    """A zip whose index.html takes its colour from a style sheet and a picture in folders of
    its own, on a real display: both relative links resolve under /media/<sha256>/."""
    page = (
        b'<!doctype html><html><head><link rel="stylesheet" href="css/look.css"></head>'
        b'<body><img src="img/dot.png" style="position:fixed;left:0;top:0;width:10%"></body>'
        b"</html>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("site/index.html", page)
        archive.writestr("site/css/look.css", "html, body { margin: 0; background: #1428e6; }")
        archive.writestr("site/img/dot.png", png(RED))
    service = start(tmp_path / "scheduler", None, refresh_interval=0.5)
    try:
        answer = requests.post(
            f"{service.url}/x/media", data=out.getvalue(),
            headers={"X-Filename": "site.zip"}, timeout=10,
        )  # fmt: skip
        assert answer.status_code == 201, answer.text
        item = answer.json()
        with DisplayProcess(
            tmp_path / "display", config=display_config(service.url),
            unset=(*CREDENTIALS, "PDN_DATABASE_URL"),
        ) as display:  # fmt: skip
            shown = display.post(
                "/schedule",
                json={"content-item": f"{service.url}{item['url']}", "preferred-duration": 120},
                headers=DISPLAY_AUTH,
            )
            assert shown.status_code == 202, shown.text
            wait_for_colour(display, BLUE, 60)  # the style sheet's background
            answer = display.get("/x/screenshot", headers=DISPLAY_AUTH)
            with Image.open(io.BytesIO(answer.content)) as image:
                corner = image.convert("RGB").getpixel((4, 4))
            assert isinstance(corner, tuple)
            assert near(corner, RED), corner
    finally:
        service.stop()


def test_the_displays_web_engine_does_not_show_a_pdf(tmp_path: Path) -> None:
    """Why the library refuses PDF (docs/media.md, "PDF"): a PDF sent to a real display is
    fetched but never painted. When the display's web view shows PDF, this fails: the library
    may then take PDF as type ``pdf``."""
    document = io.BytesIO()
    Image.new("RGB", (800, 600), RED).save(document, "PDF")
    with (
        PageServer(default=Reply(200, document.getvalue(), "application/pdf")) as files,
        DisplayProcess(tmp_path / "display", config=display_config("http://127.0.0.1:9"),
                       unset=(*CREDENTIALS, "PDN_DATABASE_URL")) as display,
    ):  # fmt: skip
        address = f"{files.url}/menu.pdf"
        shown = display.post(
            "/schedule", json={"content-item": address, "preferred-duration": 60},
            headers=DISPLAY_AUTH,
        )  # fmt: skip
        assert shown.status_code == 202, shown.text
        wait_until(lambda: f"cannot show {address}" in display.text(), 60, "the renderer gave up")
        assert files.received(method="GET"), "the display did not fetch the PDF"
        assert not near(centre(display), RED) and "not painted" in display.text()
