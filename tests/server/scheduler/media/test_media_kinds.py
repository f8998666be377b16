"""The library's other kinds on a real scheduler over loopback HTTP: web links, web page
bundles (served member by member with their relative links working), PDF refused with its
reason, the warnings of what will play where, and every bad zip refused with the library and
the stored schedules unchanged."""

from __future__ import annotations

import hashlib
import io
import stat
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from server.scheduler.media import bundle
from server.scheduler.service import SchedulerService
from tests.support.fleet import put_schedule
from tests.support.inprocess_display import cds
from tests.support.videofiles import solid_video

Run = Callable[..., SchedulerService]

PAGE = b'<html><head><link rel="stylesheet" href="css/look.css"></head><body>hi</body></html>'


def url(service: SchedulerService, path: str) -> str:
    return f"http://127.0.0.1:{service.server.port}{path}"


def upload(service: SchedulerService, name: str, data: bytes) -> requests.Response:
    return requests.post(
        url(service, "/x/media"), data=data, headers={"X-Filename": name}, timeout=30
    )


def a_zip(members: dict[str, bytes], *, link: str | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        if link is not None:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
    return out.getvalue()


def state(service: SchedulerService) -> tuple[Any, ...]:
    """What a refusal must leave as it was: the items, the chunk rows, the use, the playlists
    and the schedules."""
    listed = requests.get(url(service, "/x/media"), timeout=10).json()
    database = service.storage.database
    playlists = requests.get(url(service, "/x/playlists"), timeout=10).json()
    return (
        listed["items"],
        listed["used"],
        database.rows("SELECT sha256, seq FROM media_chunks ORDER BY sha256, seq"),
        playlists,
        [requests.get(url(service, f"/x/playlists/{p['id']}"), timeout=10).json()
         for p in playlists],
        [(s.schedule_id, s.digest) for s in service.storage.schedules()],
    )  # fmt: skip


def keep_a_playlist(service: SchedulerService) -> None:
    """An item and a playlist of it, besides a hand-written schedule: a refusal changes none."""
    kept = upload(service, "kept.zip", a_zip({"index.html": PAGE}))
    assert kept.status_code == 201
    answer = requests.put(
        url(service, "/x/playlists/kept"),
        json={"items": [{"media": kept.json()["sha256"], "duration": "10 s"}]},
        timeout=10,
    )
    assert answer.status_code == 201, answer.text
    assert put_schedule(url(service, ""), "lobby", cds("lobby", "http://x/a.html")).ok


def test_a_web_link_is_an_item_keyed_by_its_canonical_url(run_scheduler: Run) -> None:
    service = run_scheduler("one")
    first = requests.post(
        url(service, "/x/media"),
        json={"link": "HTTPS://Example.COM:443/menu?day=1#top", "name": "Menu", "tags": ["food"]},
        timeout=10,
    )
    assert first.status_code == 201, first.text
    link = "https://example.com/menu?day=1#top"
    body = first.json()
    assert body["sha256"] == hashlib.sha256(link.encode()).hexdigest()
    assert (body["type"], body["url"], body["link"], body["name"], body["size"]) == (
        "link", link, link, "Menu", 0,
    )  # fmt: skip
    assert body["tags"] == ["food"] and body["warnings"] == []
    again = requests.post(
        url(service, "/x/media"), json={"link": "https://example.com/menu?day=1#top"}, timeout=10
    )
    assert again.status_code == 200 and again.json()["name"] == "Menu"
    listed = requests.get(url(service, "/x/media"), timeout=10).json()
    assert [item["type"] for item in listed["items"]] == ["link"] and listed["used"] == 0
    served = requests.get(url(service, f"/media/{body['sha256']}/x"), timeout=10)
    assert served.status_code == 404 and link in served.json()["message"]
    gone = requests.delete(url(service, f"/x/media/{body['sha256']}"), timeout=10)
    assert gone.status_code == 204
    assert requests.get(url(service, "/x/media"), timeout=10).json()["items"] == []


@pytest.mark.parametrize(
    "body",
    [
        {"link": "ftp://example.com/file"},
        {"link": "javascript:alert(1)"},
        {"link": "file:///etc/passwd"},
        {"link": "https://user:secret@example.com/"},
        {"link": "https:///no-host"},
        {"link": "https://example.com/a b"},
        {"link": "https://example.com:99999/"},
        {"link": 42},
        {"name": "no link"},
        {"link": "https://example.com/" + "a" * 3000},
    ],
)
def test_a_bad_link_is_refused(run_scheduler: Run, body: dict[str, Any]) -> None:
    service = run_scheduler("one")
    before = state(service)
    answer = requests.post(url(service, "/x/media"), json=body, timeout=10)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "bad-link" and answer.json()["message"]
    assert state(service) == before


@pytest.mark.parametrize("folder", ["", "site/"])
def test_a_page_bundle_is_served_with_its_relative_links(run_scheduler: Run, folder: str) -> None:
    service = run_scheduler("one")
    data = a_zip(
        {
            f"{folder}index.html": PAGE,
            f"{folder}css/look.css": b"body { background: #123456 }",
            f"{folder}img/dot.svg": b"<svg xmlns='http://www.w3.org/2000/svg'/>",
            f"{folder}data.bin": bytes(range(256)) * 100,
        }
    )
    answer = upload(service, "welcome.zip", data)
    assert answer.status_code == 201, answer.text
    item = answer.json()
    sha = hashlib.sha256(data).hexdigest()
    assert (item["type"], item["url"], item["size"]) == (
        "page", f"/media/{sha}/index.html", len(data),
    )  # fmt: skip
    page = requests.get(url(service, item["url"]), timeout=10)
    assert page.status_code == 200 and page.content == PAGE
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert page.headers["Content-Security-Policy"].startswith("sandbox allow-scripts")
    style = requests.get(url(service, f"/media/{sha}/css/look.css"), timeout=10)
    assert style.headers["Content-Type"] == "text/css; charset=utf-8"
    assert style.content == b"body { background: #123456 }"
    assert (
        requests.get(url(service, f"/media/{sha}/img/dot.svg"), timeout=10)
        .headers["Content-Type"]
        .startswith("image/svg+xml")
    )
    binary = requests.get(url(service, f"/media/{sha}/data.bin"), timeout=10)
    assert binary.content == bytes(range(256)) * 100
    for missing in ("nothing.html", "css", "../index.html", "css/../../x"):
        assert requests.get(url(service, f"/media/{sha}/{missing}"), timeout=10).status_code == 404


@pytest.mark.parametrize(
    ("name", "content", "status", "error"),
    [
        ("site.zip", lambda: a_zip({"page.html": PAGE}), 422, "bad-bundle"),
        ("site.zip", lambda: a_zip({"a/index.html": PAGE, "b/x.css": b""}), 422, "bad-bundle"),
        ("site.zip", lambda: a_zip({"index.html": PAGE, "../evil.sh": b"x"}), 422, "bad-bundle"),
        ("site.zip", lambda: a_zip({"index.html": PAGE, "a/../../x": b"x"}), 422, "bad-bundle"),
        ("site.zip", lambda: a_zip({"index.html": PAGE, "/etc/cron": b"x"}), 422, "bad-bundle"),
        ("site.zip", lambda: a_zip({"index.html": PAGE, "C:/x": b"x"}), 422, "bad-bundle"),
        ("site.zip", lambda: a_zip({"index.html": PAGE}, link="passwd"), 422, "bad-bundle"),
        (
            "site.zip",
            lambda: a_zip({"index.html": PAGE, "big": bytes(50 << 20)}),
            422,
            "bad-bundle",
        ),
        ("site.zip", lambda: a_zip({"index.html": PAGE})[:-30], 422, "corrupt"),
        ("site.zip", lambda: _flipped(a_zip({"index.html": PAGE * 50})), 422, "corrupt"),
        ("site.zip", lambda: b"PK\x03\x04 not a zip at all", 422, "corrupt"),
        ("site.zip", lambda: PAGE, 422, "corrupt"),
        ("site.png", lambda: a_zip({"index.html": PAGE}), 422, "type-mismatch"),
        ("notes.pdf", lambda: b"%PDF-1.4\n%%EOF\n", 415, "unsupported-type"),
    ],
)
def test_a_bad_bundle_is_refused_with_nothing_changed(
    run_scheduler: Run, name: str, content: Callable[[], bytes], status: int, error: str
) -> None:
    service = run_scheduler("one")
    keep_a_playlist(service)
    before = state(service)
    answer = upload(service, name, content())
    assert answer.status_code == status, answer.text
    assert answer.json()["error"] == error and answer.json()["message"]
    assert state(service) == before


def _flipped(data: bytes) -> bytes:
    """``data`` with a byte of its first member's deflated stream changed (its CRC fails)."""
    broken = bytearray(data)
    broken[40] ^= 0xFF
    return bytes(broken)


def test_too_many_members_or_bytes(run_scheduler: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundle, "MAX_MEMBERS", 3)
    service = run_scheduler("one")
    many = a_zip({"index.html": PAGE, **{f"{n}.css": b"" for n in range(3)}})
    answer = upload(service, "many.zip", many)
    assert answer.status_code == 422 and "members" in answer.json()["message"]
    monkeypatch.setattr(bundle, "MAX_UNPACKED", 1000)
    wide = a_zip({"index.html": PAGE, "a.txt": b"x" * 2000})
    answer = upload(service, "wide.zip", wide)
    assert answer.status_code == 422 and "unpacks" in answer.json()["message"]


def test_a_pdf_is_refused_saying_why(run_scheduler: Run) -> None:
    service = run_scheduler("one")
    answer = upload(service, "menu.pdf", b"%PDF-1.7\n1 0 obj <<>> endobj\n%%EOF\n")
    assert answer.status_code == 415
    assert "web engine does not show PDF" in answer.json()["message"]


def test_a_video_carries_the_warnings_of_where_it_plays_badly(
    run_scheduler: Run, ffmpeg: str, tmp_path: Path, media_files: dict[str, bytes]
) -> None:
    service = run_scheduler("one")
    fine = upload(service, "blue.mp4", media_files["mp4"]).json()
    assert fine["warnings"] == [] and fine["fps"] == pytest.approx(30)
    big = solid_video(
        ffmpeg, tmp_path / "big.mp4", (0, 90, 0), (3840, 2160), 0.5, ("libx264", "aac")
    )
    answer = upload(service, "big.mp4", big.read_bytes())
    assert answer.status_code == 201, answer.text
    warnings = answer.json()["warnings"]
    assert warnings == [
        "H.264 2160p30 has no hardware decoder on a Pi 4 in this OS (it stops at 1080p60):"
        " expect dropped frames; H.264 1080p30 plays everywhere.",
        "H.264 2160p30 is decoded in software on a Pi 5, which keeps up to 1080p60:"
        " expect dropped frames; H.264 1080p30 plays everywhere.",
    ]
    listed = requests.get(url(service, f"/x/media/{answer.json()['sha256']}"), timeout=10).json()
    assert listed["warnings"] == warnings


def test_a_playlist_names_a_bundle_by_its_index_and_a_link_by_its_url(run_scheduler: Run) -> None:
    service = run_scheduler("one")
    page = upload(service, "welcome.zip", a_zip({"index.html": PAGE})).json()
    link = requests.post(
        url(service, "/x/media"), json={"link": "https://example.com/menu"}, timeout=10
    ).json()
    answer = requests.put(
        url(service, "/x/playlists/hall"),
        json={"items": [{"media": page["sha256"], "duration": "10 s"},
                        {"media": link["sha256"], "duration": "5 s"}]},
        timeout=10,
    )  # fmt: skip
    assert answer.status_code == 201, answer.text
    document = requests.get(url(service, "/schedule/hall/"), timeout=10).text
    assert f"{service.url}/media/{page['sha256']}/index.html</uri>" in document
    assert "<uri>https://example.com/menu</uri>" in document
    refused = requests.delete(url(service, f"/x/media/{link['sha256']}"), timeout=10)
    assert refused.status_code == 409 and refused.json()["playlists"] == ["hall"]
