"""Playlists on a real scheduler over loopback HTTP, on SQLite and on PostgreSQL: the round
trip, the CDS made of each (read back with the project's CDS parser), every bad body refused
with its field named and nothing changed, a hand-written schedule's id kept apart from a
playlist's, "used by" and the refused or forced delete of an item in use, and the operator
token beyond loopback."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from cds.model import ContentItem
from cds.parser import parse
from server.scheduler.service import SchedulerService
from tests.support.fleet import put_schedule
from tests.support.inprocess_display import cds
from tests.support.lan import OPERATOR, Scheduler, assert_error, bearer
from tests.support.openapi import Document
from tests.support.png import png
from tests.support.scheduler import write
from tests.support.videofiles import solid_video
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("scheduler_backend")

Run = Callable[..., SchedulerService]
RED = png(64, 36, (220, 30, 30))
BLUE = png(64, 36, (30, 30, 220))


def upload(base: str, name: str, data: bytes) -> str:
    answer = requests.post(f"{base}/x/media", data=data, headers={"X-Filename": name}, timeout=30)
    assert answer.status_code in (200, 201), answer.text
    return str(answer.json()["sha256"])


def put(base: str, playlist_id: str, body: Any) -> requests.Response:
    return requests.put(f"{base}/x/playlists/{playlist_id}", json=body, timeout=10)


def schedule_of(base: str, playlist_id: str) -> bytes:
    answer = requests.get(f"{base}/schedule/{playlist_id}/", timeout=5)
    assert answer.status_code == 200, answer.text
    return answer.content


def sources(item: ContentItem) -> list[str]:
    return [source.uri for source in item.files[0].sources]


def hashes(item: ContentItem) -> list[tuple[str, str]]:
    return [tuple(h) for h in item.files[0].hashes]  # type: ignore[misc]


def items_of(xml: bytes) -> list[ContentItem]:
    document = parse(xml)
    assert document.warnings == []
    return [child for child in document.root.children if isinstance(child, ContentItem)]


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A 2 s H.264 MP4 (Debian's ffmpeg)."""
    import shutil

    ffmpeg = shutil.which("ffmpeg")
    assert ffmpeg, "Debian's ffmpeg is needed to make a test video"
    folder = tmp_path_factory.mktemp("clip")
    path = solid_video(ffmpeg, folder / "green.mp4", (0, 200, 0), (320, 240), 2, ("libx264", "aac"))
    return path.read_bytes()


def test_a_playlist_is_stored_read_listed_and_served_as_a_cds(
    run_scheduler: Run, clip: bytes
) -> None:
    service = run_scheduler("one")
    base = service.url
    red, video = upload(base, "red one.png", RED), upload(base, "green.mp4", clip)
    body = {
        "name": "Lobby",
        "items": [
            {"media": red, "duration": "10 s", "windows": [{"start": "08:00", "end": "12:00"}]},
            {"link": "https://example.org/menu", "duration": 20, "days": ["fri", "monday"]},
            {"media": video, "from": "2026-12-01", "until": "2026-12-24", "transition": "cut"},
        ],
        "order": "shuffle",
        "priority": "high",
    }
    created = put(base, "lobby", body)
    assert created.status_code == 201, created.text
    assert created.headers["Location"] == "/x/playlists/lobby"
    got = requests.get(f"{base}/x/playlists/lobby", timeout=5).json()
    assert got == created.json()
    assert got["seconds"][:2] == [10.0, 20.0]
    assert got["seconds"][2] == pytest.approx(2.0, abs=0.1)  # the video's own length
    assert got["items"][1] == {
        "link": "https://example.org/menu",
        "duration": 20.0,
        "days": ["monday", "friday"],
        "transition": "crossfade",
    }
    assert got["schedule"] == "/schedule/lobby/" and got["name"] == "Lobby"
    listed = requests.get(f"{base}/x/playlists", timeout=5).json()
    assert [(p["id"], p["count"], p["name"]) for p in listed] == [("lobby", 3, "Lobby")]
    assert listed[0]["duration"] == got["duration"]

    xml = schedule_of(base, "lobby")
    document = parse(xml)
    assert document.root.name == "lobby"
    assert document.root.constraints.order == "random"
    assert document.root.constraints.priority == 3
    picture, link, movie = items_of(xml)
    assert picture.content_type == "image/png"
    assert sources(picture) == [f"{base}/media/{red}/red%20one.png"]
    assert hashes(picture) == [("sha256", red)]
    assert picture.constraints.preferred_duration == 10.0
    assert [(str(w.start), str(w.end)) for w in picture.constraints.times] == [
        ("08:00:00", "12:00:00")
    ]
    assert (link.content_type, sources(link), hashes(link)) == (
        "text/html", ["https://example.org/menu"], [],
    )  # fmt: skip
    assert [(d.start, d.end) for d in link.constraints.days] == [(0, 0), (4, 4)]
    assert movie.content_type == "video/mp4" and hashes(movie) == [("sha256", video)]
    assert (picture.constraints.transition, movie.constraints.transition) == ("crossfade", "cut")
    assert movie.constraints.preferred_duration == pytest.approx(2.0, abs=0.1)
    assert [(str(d.start), str(d.end)) for d in movie.constraints.dates] == [
        ("2026-12-01", "2026-12-24")
    ]
    # The bytes the CDS names are the item's, by that hash.
    served = requests.get(sources(picture)[0], timeout=5)
    assert hashlib.sha256(served.content).hexdigest() == red

    # What GET gave can be sent back as it is; replacing answers 200.
    again = put(base, "lobby", {**got, "order": "inorder"})
    assert again.status_code == 200, again.text
    assert parse(schedule_of(base, "lobby")).root.constraints.order == "inorder"
    assert requests.delete(f"{base}/x/playlists/lobby", timeout=5).status_code == 204
    assert requests.get(f"{base}/x/playlists/lobby", timeout=5).status_code == 404
    assert requests.get(f"{base}/schedule/lobby/", timeout=5).status_code == 404
    assert requests.delete(f"{base}/x/playlists/lobby", timeout=5).status_code == 404


BAD_BODIES: list[tuple[Any, str | None]] = [
    ([], None),
    ({"items": "red"}, "items"),
    ({"items": [{"media": "0" * 63}]}, "items[0].media"),
    ({"items": [{"media": "A" * 64}]}, "items[0].media"),
    ({"items": [{"link": "javascript:alert(1)"}]}, "items[0].link"),
    ({"items": [{"link": "file:///etc/passwd"}]}, "items[0].link"),
    ({"items": [{}]}, "items[0]"),
    ({"items": [{"link": "https://a.example/", "media": "0" * 64}]}, "items[0]"),
    ({"items": [{"link": "https://a.example/", "duration": "forever"}]}, "items[0].duration"),
    ({"items": [{"link": "https://a.example/", "duration": -3}]}, "items[0].duration"),
    ({"items": [{"link": "https://a.example/", "from": "2026-02-30"}]}, "items[0].from"),
    (
        {"items": [{"link": "https://a.example/", "from": "2026-05-02", "until": "2026-05-01"}]},
        "items[0].until",
    ),
    (
        {"items": [{"link": "https://a.example/", "windows": [{"start": "8am"}]}]},
        "items[0].windows[0].start",
    ),
    (
        {
            "items": [
                {"link": "https://a.example/", "windows": [{"start": "09:00", "end": "25:00"}]}
            ]
        },
        "items[0].windows[0].end",
    ),
    ({"items": [{"link": "https://a.example/", "days": ["someday"]}]}, "items[0].days[0]"),
    ({"items": [{"link": "https://a.example/", "transition": "wipe"}]}, "items[0].transition"),
    ({"items": [{"link": "https://a.example/", "util": "2026-01-01"}]}, "items[0].util"),
    ({"items": [], "order": "backwards"}, "order"),
    ({"items": [], "priority": "urgent"}, "priority"),
    ({"items": [], "name": ""}, "name"),
    ({"items": [{"link": "https://a.example/"}] * 1001}, "items"),
]


def test_every_bad_body_is_refused_with_its_field_and_changes_nothing(
    run_scheduler: Run,
) -> None:
    service = run_scheduler("one")
    base = service.url
    red = upload(base, "red.png", RED)
    good = {"items": [{"media": red, "duration": "5 s"}]}
    assert put(base, "menu", good).status_code == 201
    before = (requests.get(f"{base}/x/playlists/menu", timeout=5).json(), schedule_of(base, "menu"))
    for body, field in BAD_BODIES:
        answer = put(base, "menu", body)
        assert answer.status_code == 400, (body, answer.text)
        error = answer.json()
        assert error.get("field") == field, (body, error)
        assert error["message"]
        assert (
            requests.get(f"{base}/x/playlists/menu", timeout=5).json(),
            schedule_of(base, "menu"),
        ) == before
    # An unknown media item: 400 naming the entry, and nothing stored, new or replaced.
    unknown = {"items": [{"media": red}, {"media": "f" * 64}]}
    for playlist_id in ("menu", "fresh"):
        answer = put(base, playlist_id, unknown)
        assert_error(answer, 400, "unknown-media")  # type: ignore[arg-type]
        assert answer.json()["field"] == "items[1].media"
    assert requests.get(f"{base}/x/playlists/fresh", timeout=5).status_code == 404
    assert requests.get(f"{base}/schedule/fresh/", timeout=5).status_code == 404
    assert schedule_of(base, "menu") == before[1]
    assert requests.get(f"{base}/x/media/{red}", timeout=5).json()["used-by"] == ["menu"]
    assert_error(put(base, ".hidden", good), 400, "invalid-playlist-id")  # type: ignore[arg-type]
    not_json = requests.put(f"{base}/x/playlists/menu", data=b"<x/>", timeout=5)
    assert not_json.status_code in (400, 415)


def test_a_hand_written_schedule_and_a_playlist_never_take_each_others_id(
    run_scheduler: Run, tmp_path: Path
) -> None:
    folder = tmp_path / "schedules"
    folder.mkdir()
    service = run_scheduler("one", folder)
    base = service.url
    hand = cds("hand", "http://127.0.0.1:9/hand.html")
    assert put_schedule(base, "hand", hand).status_code == 201
    link = {"items": [{"link": "https://example.org/a"}]}
    assert_error(put(base, "hand", link), 409, "schedule-conflict")  # type: ignore[arg-type]
    assert requests.get(f"{base}/x/playlists/hand", timeout=5).status_code == 404
    assert schedule_of(base, "hand") == hand

    assert put(base, "made", link).status_code == 201
    made = schedule_of(base, "made")
    assert_error(put_schedule(base, "made", hand), 409, "schedule-conflict")  # type: ignore[arg-type]
    gone = requests.delete(f"{base}/x/schedules/made", timeout=5)
    assert_error(gone, 409, "schedule-conflict")  # type: ignore[arg-type]
    # Nor in the console's schedule editor.
    for path, form in (("made", {"cds": hand}), ("made/delete", {})):
        page = requests.post(f"{base}/console/schedules/{path}", data=form, timeout=5)
        assert page.status_code == 409 and "PUT /x/playlists/made" in page.text
    # A file of that name in the schedules folder is not taken either, nor its removal.
    write(folder / "made.xml", hand)
    service.library.scan(rehash=True)
    assert schedule_of(base, "made") == made
    (folder / "made.xml").unlink()
    service.library.scan(rehash=True)
    assert schedule_of(base, "made") == made
    ids = [s["id"] for s in requests.get(f"{base}/x/schedules", timeout=5).json()]
    assert ids == ["hand", "made"]


def test_an_item_in_use_is_refused_then_forced_out_of_its_playlists(run_scheduler: Run) -> None:
    service = run_scheduler("one")
    base = service.url
    red, blue = upload(base, "red.png", RED), upload(base, "blue.png", BLUE)
    assert put(base, "a", {"items": [{"media": red}, {"media": blue}, {"media": red}]}).ok
    assert put(base, "b", {"items": [{"media": red, "duration": "3 s"}]}).ok
    assert put(base, "c", {"items": [{"media": blue}]}).ok
    assert requests.get(f"{base}/x/media/{red}", timeout=5).json()["used-by"] == ["a", "b"]
    refused = requests.delete(f"{base}/x/media/{red}", timeout=5)
    assert_error(refused, 409, "in-use")  # type: ignore[arg-type]
    assert refused.json()["playlists"] == ["a", "b"]
    assert requests.get(f"{base}/x/media/{red}", timeout=5).status_code == 200
    a_before = schedule_of(base, "a")

    forced = requests.delete(f"{base}/x/media/{red}", params={"force": "1"}, timeout=5)
    assert forced.status_code == 204, forced.text
    assert requests.get(f"{base}/x/media/{red}", timeout=5).status_code == 404
    assert [
        i["media"] for i in requests.get(f"{base}/x/playlists/a", timeout=5).json()["items"]
    ] == [blue]
    assert requests.get(f"{base}/x/playlists/b", timeout=5).json()["items"] == []
    assert schedule_of(base, "a") != a_before
    assert [hashes(item) for item in items_of(schedule_of(base, "a"))] == [[("sha256", blue)]]
    assert items_of(schedule_of(base, "b")) == []
    assert requests.get(f"{base}/x/media/{blue}", timeout=5).json()["used-by"] == ["a", "c"]
    # An item no playlist uses goes at once.
    assert requests.delete(f"{base}/x/playlists/c", timeout=5).status_code == 204
    assert requests.delete(f"{base}/x/playlists/a", timeout=5).status_code == 204
    assert requests.delete(f"{base}/x/media/{blue}", timeout=5).status_code == 204


def test_the_operator_token_is_needed_beyond_loopback(
    make_scheduler: Callable[..., Scheduler],
) -> None:
    lan = make_scheduler()
    link = {"items": [{"link": "https://example.org/a"}]}
    refused = lan.client().put("/x/playlists/lobby", json=link)
    assert_error(refused, 401, "unauthorized")
    assert lan.client().delete("/x/playlists/lobby").status_code == 401
    made = lan.client().put("/x/playlists/lobby", json=link, headers=bearer(OPERATOR))
    assert made.status_code == 201, made.text
    assert lan.client().delete("/x/playlists/lobby").status_code == 401
    wait_until(lambda: lan.operator("GET", "/x/playlists/lobby").status_code == 200)
    assert lan.operator("DELETE", "/x/playlists/lobby").status_code == 204


def test_every_answer_is_as_the_openapi_document_says(run_scheduler: Run) -> None:
    service = run_scheduler("one")
    base = service.url
    document = Document("scheduler")
    red = upload(base, "red.png", RED)
    one, many = "/x/playlists/{id}", "/x/playlists"
    body = {"items": [{"media": red, "days": ["mon"]}, {"link": "https://example.org/"}]}
    document.check(put(base, "a", body), one)
    document.check(put(base, "a", {**body, "order": "shuffle"}), one)
    document.check(put(base, "a", {"items": [{"media": "f" * 64}]}), one)
    document.check(put(base, "a", {"items": [{"link": "x"}]}), one)
    document.check(put(base, ".a", body), one)
    assert put_schedule(base, "hand", cds("hand", "http://127.0.0.1:9/h.html")).ok
    document.check(put(base, "hand", body), one)
    document.check(
        put_schedule(base, "a", cds("a", "http://127.0.0.1:9/h.html")), "/x/schedules/{id}"
    )
    document.check(requests.get(f"{base}/x/playlists", timeout=5), many)
    document.check(requests.get(f"{base}/x/playlists/a", timeout=5), one)
    document.check(requests.get(f"{base}/x/playlists/b", timeout=5), one)
    in_use = requests.delete(f"{base}/x/media/{red}", timeout=5)
    document.check(in_use, "/x/media/{sha256}")
    document.check(requests.get(f"{base}/x/media/{red}", timeout=5), "/x/media/{sha256}")
    document.check(requests.delete(f"{base}/x/playlists/a", timeout=5), one)
    document.check(requests.delete(f"{base}/x/playlists/a", timeout=5), one)
