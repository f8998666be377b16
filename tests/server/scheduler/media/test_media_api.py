"""The media library on a real scheduler over HTTP on loopback: upload (raw and multipart),
the same file twice, each refusal with nothing stored, the bytes with Range and ETag, the
access rule, and two scheduler processes sharing one PostgreSQL database."""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from PIL import Image

from server.scheduler.media import store
from server.scheduler.service import SchedulerService
from tests.server.scheduler.media.test_media_kinds import keep_a_playlist, state
from tests.support.lan import ENROLMENT, OPERATOR, assert_error, bearer, start_lan_scheduler
from tests.support.scheduler import SchedulerProcess

Run = Callable[..., SchedulerService]


def url(service: SchedulerService, path: str) -> str:
    return f"http://127.0.0.1:{service.server.port}{path}"


def upload(service: SchedulerService, name: str, data: bytes, **headers: str) -> requests.Response:
    return requests.post(
        url(service, "/x/media"), data=data, headers={"X-Filename": name, **headers}, timeout=30
    )


def items(service: SchedulerService) -> list[dict[str, Any]]:
    answer = requests.get(url(service, "/x/media"), timeout=10)
    assert answer.status_code == 200
    listed: list[dict[str, Any]] = answer.json()["items"]
    return listed


def test_a_picture_and_a_video_are_stored_with_what_they_are(
    run_scheduler: Run, media_files: dict[str, bytes]
) -> None:
    service = run_scheduler("one")
    picture = upload(service, "red.png", media_files["png"], **{"X-Tags": "lobby, red"})
    assert picture.status_code == 201, picture.text
    body = picture.json()
    sha = hashlib.sha256(media_files["png"]).hexdigest()
    assert body["sha256"] == sha
    assert (body["type"], body["mime"], body["size"]) == (
        "image",
        "image/png",
        len(media_files["png"]),
    )
    assert (body["width"], body["height"], body["tags"]) == (640, 360, ["lobby", "red"])
    assert body["url"] == f"/media/{sha}/red.png" and body["warnings"] == []

    video = requests.post(
        url(service, "/x/media"),
        files={"file": ("blue.mp4", media_files["mp4"], "video/mp4")},
        data={"tags": "video"},
        timeout=30,
    )
    assert video.status_code == 201, video.text
    clip = video.json()
    assert (clip["type"], clip["mime"], clip["width"], clip["height"]) == (
        "video", "video/mp4", 320, 240,
    )  # fmt: skip
    assert clip["codec"] == "h264" and clip["profile"]
    assert clip["duration"] == pytest.approx(1.0, abs=0.1)

    assert [item["name"] for item in items(service)] == ["blue.mp4", "red.png"]
    one = requests.get(url(service, f"/x/media/{sha}"), timeout=10).json()
    assert one["used-by"] == [] and one["name"] == "red.png"
    for item in (body, clip):
        thumb = requests.get(url(service, f"/x/media/{item['sha256']}/thumbnail"), timeout=10)
        assert thumb.headers["Content-Type"] == "image/jpeg"
        with Image.open(io.BytesIO(thumb.content)) as image:
            assert image.format == "JPEG" and image.width <= 320 and image.height <= 180


def test_the_same_file_twice_is_one_item(run_scheduler: Run, media_files: dict[str, bytes]) -> None:
    service = run_scheduler("one")
    first = upload(service, "green.jpg", media_files["jpeg"])
    again = upload(service, "copy.jpeg", media_files["jpeg"])
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["name"] == "green.jpg" and again.json()["sha256"] == first.json()["sha256"]
    assert len(items(service)) == 1


@pytest.mark.parametrize(
    ("name", "content", "status", "error"),
    [
        ("cut.png", lambda f: f["png"][: len(f["png"]) // 2], 422, "corrupt"),
        ("cut.jpg", lambda f: f["jpeg"][: len(f["jpeg"]) // 2], 422, "corrupt"),
        ("cut.mp4", lambda f: f["mp4"][: len(f["mp4"]) // 2], 422, "corrupt"),
        ("noise.png", lambda f: b"not a picture at all", 422, "corrupt"),
        ("empty.gif", lambda f: b"", 422, "corrupt"),
        ("red.jpg", lambda f: f["png"], 422, "type-mismatch"),
        ("red.mp4", lambda f: f["mkv"], 422, "type-mismatch"),
        ("blue.png", lambda f: f["mp4"], 422, "type-mismatch"),
        ("tone.mp4", lambda f: f["audio-mp4"], 422, "no-video-stream"),
        ("notes.txt", lambda f: b"hello", 415, "unsupported-type"),
        ("a/b.png", lambda f: f["png"], 400, "bad-name"),
    ],
)
def test_a_file_refused_is_not_stored(
    run_scheduler: Run,
    media_files: dict[str, bytes],
    name: str,
    content: Callable[[dict[str, bytes]], bytes],
    status: int,
    error: str,
) -> None:
    service = run_scheduler("one")
    keep_a_playlist(service)
    before = state(service)
    answer = upload(service, name, content(media_files))
    assert answer.status_code == status, answer.text
    assert answer.json()["error"] == error and answer.json()["message"]
    assert state(service) == before


def test_no_name_is_refused(run_scheduler: Run, media_files: dict[str, bytes]) -> None:
    service = run_scheduler("one")
    answer = requests.post(url(service, "/x/media"), data=media_files["png"], timeout=10)
    assert answer.status_code == 400 and answer.json()["error"] == "no-name"


def test_the_size_limit_and_the_quota(
    run_scheduler: Run, media_files: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    png, jpeg = media_files["png"], media_files["jpeg"]
    monkeypatch.setenv("PDN_MEDIA_MAX_BYTES", str(len(png) + len(jpeg)))
    monkeypatch.setenv("PDN_MEDIA_QUOTA_BYTES", str(len(png) + len(jpeg) // 2))
    service = run_scheduler("one")
    big = png + bytes(len(jpeg) + 1)  # over the limit: refused before it is read as a picture
    too_big = upload(service, "big.png", big)
    assert too_big.status_code == 413 and too_big.json()["error"] == "too-large"
    multipart = requests.post(
        url(service, "/x/media"), files={"file": ("big.png", big)}, timeout=30
    )
    assert multipart.status_code == 413 and multipart.json()["error"] == "too-large"
    assert upload(service, "red.png", png).status_code == 201
    before = state(service)
    over = upload(service, "green.jpg", jpeg)
    assert over.status_code == 507 and over.json()["error"] == "over-quota"
    assert [item["name"] for item in items(service)] == ["red.png"]
    assert state(service) == before


def test_the_bytes_are_served_with_range_and_etag(
    run_scheduler: Run, media_files: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "CHUNK", 4096)  # ranges across chunk rows, with a small file
    service = run_scheduler("one")
    data = media_files["mp4"]
    assert len(data) > 3 * 4096
    sha = upload(service, "blue.mp4", data).json()["sha256"]
    assert len(service.storage.database.rows("SELECT seq FROM media_chunks")) > 3
    whole = requests.get(url(service, f"/media/{sha}/any-name.mp4"), timeout=10)
    assert whole.status_code == 200 and whole.content == data
    assert whole.headers["ETag"] == f'"{sha}"'
    assert whole.headers["Content-Type"] == "video/mp4"
    assert "immutable" in whole.headers["Cache-Control"]
    assert whole.headers["Accept-Ranges"] == "bytes"
    part = requests.get(
        url(service, f"/media/{sha}/blue.mp4"), headers={"Range": "bytes=4000-9000"}, timeout=10
    )
    assert part.status_code == 206 and part.content == data[4000:9001]
    assert part.headers["Content-Range"] == f"bytes 4000-9000/{len(data)}"
    tail = requests.get(
        url(service, f"/media/{sha}/blue.mp4"), headers={"Range": "bytes=-100"}, timeout=10
    )
    assert tail.status_code == 206 and tail.content == data[-100:]
    beyond = requests.get(
        url(service, f"/media/{sha}/blue.mp4"),
        headers={"Range": f"bytes={len(data) + 10}-"},
        timeout=10,
    )
    assert beyond.status_code == 416
    assert beyond.headers["Content-Range"] == f"bytes */{len(data)}"
    cached = requests.get(
        url(service, f"/media/{sha}/blue.mp4"), headers={"If-None-Match": f'"{sha}"'}, timeout=10
    )
    assert cached.status_code == 304 and cached.content == b""
    unknown = requests.get(url(service, f"/media/{'0' * 64}/x.mp4"), timeout=10)
    assert unknown.status_code == 404


def test_delete(run_scheduler: Run, media_files: dict[str, bytes]) -> None:
    service = run_scheduler("one")
    sha = upload(service, "red.png", media_files["png"]).json()["sha256"]
    assert requests.delete(url(service, f"/x/media/{sha}"), timeout=10).status_code == 204
    assert items(service) == []
    assert service.storage.database.rows("SELECT sha256 FROM media_chunks") == []
    assert requests.get(url(service, f"/media/{sha}/red.png"), timeout=10).status_code == 404
    assert requests.delete(url(service, f"/x/media/{sha}"), timeout=10).status_code == 404


def test_only_the_schedulers_displays_read_the_bytes_beyond_loopback(
    tmp_path: Path, media_files: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PDN_ENROLMENT_TOKEN", ENROLMENT)
    scheduler = start_lan_scheduler(tmp_path / "data", OPERATOR)
    try:
        stranger = scheduler.client("127.0.0.2")
        refused = stranger.post(
            "/x/media", content=media_files["png"], headers={"X-Filename": "red.png"}
        )
        assert_error(refused, 401, "unauthorized")
        stored = scheduler.operator(
            "POST", "/x/media", content=media_files["png"], headers={"X-Filename": "red.png"}
        )
        assert stored.status_code == 201 and stored.json()["uploader"] == "operator"
        path = stored.json()["url"]
        storage = scheduler.service.storage
        storage.upsert_display("http://127.0.0.3:8080/", {"room": "lobby"}, None)
        storage.upsert_display("http://127.0.0.5:8080/", {"room": "hall"}, None, pending=True)

        assert_error(stranger.get(path), 403, "forbidden")
        assert_error(scheduler.client("127.0.0.5").get(path), 403, "forbidden")
        display = scheduler.client("127.0.0.3").get(path)
        assert display.status_code == 200 and display.content == media_files["png"]
        assert stranger.get(path, headers=bearer(ENROLMENT)).status_code == 200
        assert stranger.get(path, headers=bearer(OPERATOR)).status_code == 200
        assert_error(stranger.get(path, headers=bearer("wrong-token")), 401, "unauthorized")
        here = scheduler.client("127.0.0.1").get(path)
        assert here.status_code == 200
    finally:
        scheduler.close()


def test_two_scheduler_processes_on_postgresql_share_the_library(
    tmp_path: Path, postgres_url: str, run_scheduler: Run, media_files: dict[str, bytes]
) -> None:
    """One scheduler in this process, one a ``pdn scheduler`` process of its own: what is
    uploaded to either is served, deduplicated and deleted by the other."""
    first = run_scheduler("pg0", None, database=postgres_url)
    assert first.storage.database.dialect == "postgresql"
    with SchedulerProcess(tmp_path / "pg1", database=postgres_url) as process:
        other = process.url
        stored = upload(first, "blue.mp4", media_files["mp4"])
        assert stored.status_code == 201, stored.text
        path = stored.json()["url"]
        again = requests.post(
            f"{other}/x/media",
            data=media_files["mp4"],
            headers={"X-Filename": "again.mp4"},
            timeout=30,
        )
        assert again.status_code == 200 and again.json()["name"] == "blue.mp4"
        served = requests.get(f"{other}{path}", timeout=10)
        assert served.status_code == 200 and served.content == media_files["mp4"]
        part = requests.get(f"{other}{path}", headers={"Range": "bytes=10-19"}, timeout=10)
        assert part.status_code == 206 and part.content == media_files["mp4"][10:20]
        picture = requests.post(
            f"{other}/x/media",
            data=media_files["png"],
            headers={"X-Filename": "red.png"},
            timeout=30,
        )
        assert picture.status_code == 201, picture.text
        here = requests.get(url(first, picture.json()["url"]), timeout=10)
        assert here.content == media_files["png"]
        refused = requests.post(
            f"{other}/x/media",
            data=media_files["png"][:100],
            headers={"X-Filename": "cut.png"},
            timeout=30,
        )
        assert refused.status_code == 422
        assert sorted(item["name"] for item in items(first)) == ["blue.mp4", "red.png"]
        gone = requests.delete(f"{other}/x/media/{stored.json()['sha256']}", timeout=10)
        assert gone.status_code == 204
        assert [item["name"] for item in items(first)] == ["red.png"]


def test_a_file_past_the_servers_usual_body_limit_is_taken(run_scheduler: Run) -> None:
    """The scheduler's server takes bodies up to the media limit, not the 9 MiB of a CDS."""
    noise = Image.frombytes("RGB", (2000, 2000), os.urandom(2000 * 2000 * 3))
    out = io.BytesIO()
    noise.save(out, "PNG", compress_level=0)
    data = out.getvalue()
    assert len(data) > 10 << 20
    service = run_scheduler("one")
    stored = upload(service, "noise.png", data)
    assert stored.status_code == 201, stored.text
    multipart = requests.post(
        url(service, "/x/media"), files={"file": ("same.png", data)}, timeout=60
    )
    assert multipart.status_code == 200 and multipart.json()["sha256"] == stored.json()["sha256"]
    served = requests.get(url(service, stored.json()["url"]), timeout=60)
    assert served.content == data
