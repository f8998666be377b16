"""The Scheduling and Management Segment through its real waitress server on loopback."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from server.scheduler.service import SchedulerService
from tests.support.pages import PageServer
from tests.support.scheduler import LOBBY, LOBBY_V2, lobby_folder, start, write
from tests.support.waiting import wait_until

BROKEN = b'<content-set name="lobby">\n  <content-item>\n</content-set>\n'
LOCATION = {"latitude": "N54.0104", "longitude": "W2.7883"}

# The whole suite on both storage backends: SQLite and PostgreSQL.
pytestmark = pytest.mark.usefixtures("scheduler_backend")


@pytest.fixture
def schedules_dir(tmp_path: Path) -> Path:
    return lobby_folder(tmp_path)


@pytest.fixture
def scheduler(tmp_path: Path, schedules_dir: Path) -> Iterator[SchedulerService]:
    service = start(tmp_path, schedules_dir)
    yield service
    service.stop()


def post(url: str, body: object) -> requests.Response:
    return requests.post(url, json=body, timeout=5)


# -- displays --------------------------------------------------------------------------------


def test_register_and_list_displays(scheduler: SchedulerService) -> None:
    base = scheduler.url
    answer = post(f"{base}/displays", {"url": "http://192.0.2.1:8080", "location": LOCATION})
    assert answer.status_code == 201
    assert answer.json() == {}
    minutes = {"latitude": "N 54 00.624", "longitude": "W 2 47.298"}
    assert (
        post(f"{base}/displays", {"url": "http://192.0.2.2/", "location": minutes}).status_code
        == 201
    )
    listing = requests.get(f"{base}/displays", timeout=5).json()
    assert [d["url"] for d in listing] == ["http://192.0.2.1:8080", "http://192.0.2.2/"]
    assert listing[1]["location"] == minutes  # stored as given
    assert all(set(d) == {"url", "location", "name"} for d in listing)
    assert listing[0]["name"] == "192.0.2.1:8080"  # the address until the display tells its name


def test_register_is_an_upsert_by_url(scheduler: SchedulerService) -> None:
    base = scheduler.url
    post(f"{base}/displays", {"url": "http://192.0.2.1:8080", "location": LOCATION})
    moved = {"latitude": "S33.8688", "longitude": "E151.2093"}
    assert (
        post(f"{base}/displays", {"url": "http://192.0.2.1:8080/", "location": moved}).status_code
        == 201
    )
    listing = requests.get(f"{base}/displays", timeout=5).json()
    assert len(listing) == 1
    assert listing[0]["location"] == moved


def test_url_only_false_by_query_and_by_json_body(scheduler: SchedulerService) -> None:
    base = scheduler.url
    post(f"{base}/displays", {"url": "http://192.0.2.1:8080", "location": LOCATION})
    by_query = requests.get(f"{base}/displays?url-only=false", timeout=5).json()
    by_body = requests.get(f"{base}/displays", json={"url-only": False}, timeout=5).json()
    assert by_query == by_body
    assert set(by_query[0]) == {"url", "location", "name", "sensors"}
    assert by_query[0]["sensors"] == []
    default = requests.get(f"{base}/displays", json={"url-only": True}, timeout=5).json()
    assert "sensors" not in default[0]
    bad = requests.get(f"{base}/displays?url-only=maybe", timeout=5)
    assert bad.status_code == 400
    assert bad.json()["field"] == "url-only"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"location": LOCATION}, "url"),
        ({"url": "ftp://192.0.2.1/", "location": LOCATION}, "url"),
        ({"url": "/relative", "location": LOCATION}, "url"),
        ({"url": 5, "location": LOCATION}, "url"),
        ({"url": "http://192.0.2.1"}, "location"),
        ({"url": "http://192.0.2.1", "location": "N54 W2"}, "location"),
        ({"url": "http://192.0.2.1", "location": {"latitude": "Q54.0"}}, "location.latitude"),
        (
            {"url": "http://192.0.2.1", "location": {"latitude": "N95.0", "longitude": "E1"}},
            "location.latitude",
        ),
        (
            {"url": "http://192.0.2.1", "location": {"latitude": "N5", "longitude": "N5"}},
            "location.longitude",
        ),
    ],
)
def test_register_refuses_bad_fields(
    scheduler: SchedulerService, body: dict[str, object], field: str
) -> None:
    answer = post(f"{scheduler.url}/displays", body)
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid-field"
    assert answer.json()["field"] == field
    assert requests.get(f"{scheduler.url}/displays", timeout=5).json() == []


def test_register_refuses_bad_bodies(scheduler: SchedulerService) -> None:
    url = f"{scheduler.url}/displays"
    not_json = requests.post(
        url, data=b"{nope", headers={"Content-Type": "application/json"}, timeout=5
    )
    assert not_json.status_code == 400
    assert not_json.json()["error"] == "invalid-json"
    array = requests.post(url, json=[1, 2], timeout=5)
    assert array.status_code == 400
    xml = requests.post(url, data=b"<a/>", headers={"Content-Type": "text/xml"}, timeout=5)
    assert xml.status_code == 415
    empty = requests.post(url, timeout=5)
    assert empty.status_code == 400
    huge = requests.post(
        url, data=b" " * (2 << 20), headers={"Content-Type": "application/json"}, timeout=10
    )
    assert huge.status_code == 413


def test_display_info_is_read_in_the_background(
    scheduler: SchedulerService, peer: PageServer
) -> None:
    peer.route(
        "GET",
        "/",
        body={"location": LOCATION, "sensors": {"url": "sensing"}, "name": "Lobby screen"},
    )
    peer.route("GET", "/sensing", body=[{"sensor-id": "t1", "sensor-type": "air temperature"}])
    assert (
        post(f"{scheduler.url}/displays", {"url": peer.url, "location": LOCATION}).status_code
        == 201
    )

    def full() -> list[dict[str, object]]:
        records: list[dict[str, object]] = requests.get(
            f"{scheduler.url}/displays?url-only=false", timeout=5
        ).json()
        return records if records[0]["sensors"] else []

    record = wait_until(full)[0]
    assert record["name"] == "Lobby screen"
    assert record["sensors"] == [{"sensor-id": "t1", "sensor-type": "air temperature"}]
    assert requests.get(f"{scheduler.url}/displays", timeout=5).json()[0]["name"] == "Lobby screen"


# -- schedules -------------------------------------------------------------------------------


def test_get_schedule_serves_the_cds_as_xml(scheduler: SchedulerService) -> None:
    answer = requests.get(f"{scheduler.url}/schedule/lobby/", timeout=5)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("text/xml")
    assert answer.content == LOBBY
    missing = requests.get(f"{scheduler.url}/schedule/nothing/", timeout=5)
    assert missing.status_code == 404
    assert missing.headers["Content-Type"] == "application/json"
    assert missing.json()["error"] == "unknown-schedule"


def test_schedule_without_a_name_is_served_with_its_id(
    scheduler: SchedulerService, schedules_dir: Path
) -> None:
    write(schedules_dir / "hall.xml", LOBBY.replace(b' name="lobby"', b""))
    answer = wait_until(
        lambda: (r := requests.get(f"{scheduler.url}/schedule/hall/", timeout=5)).ok and r
    )
    assert b'name="hall"' in answer.content


def test_subscribe_push_on_change_delete_and_create(
    scheduler: SchedulerService, schedules_dir: Path, peer: PageServer
) -> None:
    base = scheduler.url
    hook = f"{peer.url}/hook"
    for _ in range(2):  # idempotent: one record
        answer = post(f"{base}/schedule/lobby/subscribe/", {"subscriber-uri": hook})
        assert answer.status_code == 201
        assert answer.json() == {}

    started = time.monotonic()
    write(schedules_dir / "lobby.xml", LOBBY_V2)
    update = peer.wait_for(1, "/hook", timeout=3)[0]
    assert time.monotonic() - started < 2.5
    assert update.body == LOBBY_V2
    assert update.headers["Content-Type"].startswith("text/xml")
    assert update.headers["X-PDN-Event-Id"]
    assert requests.get(f"{base}/schedule/lobby/", timeout=5).content == LOBBY_V2

    (schedules_dir / "lobby.xml").unlink()
    removal = peer.wait_for(2, "/hook", timeout=3)[1]
    assert b'name="lobby"' in removal.body
    assert b"content-item" not in removal.body
    assert requests.get(f"{base}/schedule/lobby/", timeout=5).status_code == 404

    write(schedules_dir / "lobby.xml", LOBBY)
    again = peer.wait_for(3, "/hook", timeout=3)[2]
    assert again.body == LOBBY
    time.sleep(0.6)
    assert len(peer.received("/hook")) == 3  # one per change, not one per subscribe call


def test_broken_file_keeps_the_last_good_version(
    scheduler: SchedulerService,
    schedules_dir: Path,
    peer: PageServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    post(f"{scheduler.url}/schedule/lobby/subscribe/", {"subscriber-uri": f"{peer.url}/hook"})
    with caplog.at_level(logging.ERROR, logger="pdn.scheduler.schedules"):
        write(schedules_dir / "lobby.xml", BROKEN)
        wait_until(lambda: any("lobby.xml:3" in r.getMessage() for r in caplog.records))
    assert requests.get(f"{scheduler.url}/schedule/lobby/", timeout=5).content == LOBBY
    assert peer.received("/hook") == []
    write(schedules_dir / "lobby.xml", LOBBY_V2)
    assert peer.wait_for(1, "/hook", timeout=3)[0].body == LOBBY_V2


def test_unsubscribe(scheduler: SchedulerService, schedules_dir: Path, peer: PageServer) -> None:
    base = scheduler.url
    hook = {"subscriber-uri": f"{peer.url}/hook"}
    post(f"{base}/schedule/lobby/subscribe/", hook)
    answer = post(f"{base}/schedule/lobby/unsubscribe/", hook)
    assert answer.status_code == 200
    assert answer.json() == {}
    again = post(f"{base}/schedule/lobby/unsubscribe/", hook)
    assert again.status_code == 404
    assert again.json()["error"] == "not-subscribed"
    write(schedules_dir / "lobby.xml", LOBBY_V2)
    time.sleep(1.5)
    assert peer.received("/hook") == []


@pytest.mark.parametrize("action", ["subscribe", "unsubscribe"])
def test_subscription_errors(scheduler: SchedulerService, action: str) -> None:
    url = f"{scheduler.url}/schedule/lobby/{action}/"
    for body in (
        {},
        {"subscriber-uri": "not a uri"},
        {"subscriber-uri": "mailto:a@b.c"},
        {"subscriber-uri": 42},
    ):
        answer = post(url, body)
        assert answer.status_code == 400, body
        assert answer.json()["field"] == "subscriber-uri"
    unknown = post(
        f"{scheduler.url}/schedule/nothing/{action}/", {"subscriber-uri": "http://127.0.0.1:9/"}
    )
    assert unknown.status_code == 404


def test_unknown_paths_and_methods_answer_json(scheduler: SchedulerService) -> None:
    missing = requests.get(f"{scheduler.url}/nothing", timeout=5)
    assert missing.status_code == 404
    assert missing.json()["error"] == "not-found"
    wrong = requests.delete(f"{scheduler.url}/displays", timeout=5)
    assert wrong.status_code == 405
    assert wrong.json()["error"] == "method-not-allowed"


def test_token_protects_changes_only(tmp_path: Path, schedules_dir: Path) -> None:
    service = start(tmp_path, schedules_dir, token="s3cret")
    try:
        # POST /displays stays open (the spec's): without the token the display is pending,
        # and not in the registry until approved.
        body = {"url": "http://192.0.2.1", "location": LOCATION}
        pending = requests.post(
            f"{service.url}/displays", json=body, timeout=5, headers={"Connection": "close"}
        )
        assert pending.status_code == 201
        assert pending.json()["state"] == "pending"
        assert requests.get(f"{service.url}/displays", timeout=5).json() == []
        refused = requests.put(
            f"{service.url}/x/schedules/other", data=LOBBY, headers={"Content-Type": "text/xml"}
        )
        assert refused.status_code == 401
        assert refused.json()["error"] == "unauthorized"
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        ok = requests.post(
            f"{service.url}/displays",
            json=body,
            timeout=5,
            headers={"Authorization": "Bearer s3cret"},
        )
        assert ok.status_code == 201
        assert ok.json() == {}
        listed = requests.get(f"{service.url}/displays", timeout=5)
        assert [d["url"] for d in listed.json()] == ["http://192.0.2.1"]
    finally:
        service.stop()


def test_x_schedules_lists_what_is_served(scheduler: SchedulerService) -> None:
    listing = requests.get(f"{scheduler.url}/x/schedules", timeout=5).json()
    assert [(s["id"], s["name"]) for s in listing] == [("lobby", "lobby")]
    assert listing[0]["url"].endswith("/schedule/lobby/")


def test_restart_keeps_displays_subscriptions_and_last_good_schedule(
    tmp_path: Path, schedules_dir: Path, peer: PageServer
) -> None:
    first = start(tmp_path, schedules_dir)
    post(f"{first.url}/displays", {"url": "http://192.0.2.1:8080", "location": LOCATION})
    post(f"{first.url}/schedule/lobby/subscribe/", {"subscriber-uri": f"{peer.url}/hook"})
    first.stop()
    # While it is down the file breaks, then a good change follows after the restart.
    write(schedules_dir / "lobby.xml", BROKEN)
    second = start(tmp_path, schedules_dir)
    try:
        assert [d["url"] for d in requests.get(f"{second.url}/displays", timeout=5).json()] == [
            "http://192.0.2.1:8080"
        ]
        assert requests.get(f"{second.url}/schedule/lobby/", timeout=5).content == LOBBY
        write(schedules_dir / "lobby.xml", LOBBY_V2)
        assert peer.wait_for(1, "/hook", timeout=3)[0].body == LOBBY_V2
    finally:
        second.stop()


def test_change_made_while_down_is_pushed_at_start(
    tmp_path: Path, schedules_dir: Path, peer: PageServer
) -> None:
    first = start(tmp_path, schedules_dir)
    post(f"{first.url}/schedule/lobby/subscribe/", {"subscriber-uri": f"{peer.url}/hook"})
    first.stop()
    write(schedules_dir / "lobby.xml", LOBBY_V2)
    second = start(tmp_path, schedules_dir)
    try:
        assert peer.wait_for(1, "/hook", timeout=3)[0].body == LOBBY_V2
        assert json.loads(requests.get(f"{second.url}/x/schedules", timeout=5).content)
    finally:
        second.stop()
