"""Every Display Segment operation and error case, through waitress on loopback."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
import requests

from cds.parser import parse
from player.playback import ZONE_FIELDS
from player.requestqueue import QUEUE_LIMIT
from player.store import DisplayStore
from tests.support.inprocess_display import Display, cds

JSON = {"Content-Type": "application/json"}
XML = {"Content-Type": "text/xml"}


def assert_error(
    response: requests.Response, status: int, code: str, field: str | None = None
) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert body["error"] == code
    assert isinstance(body["message"], str) and body["message"]
    if field is not None:
        assert body["field"] == field
    return body


# GET /


def test_display_info(display: Display) -> None:
    response = display.get("/")
    assert response.status_code == 200
    assert response.json() == {
        "location": {"latitude": "N54.0104", "longitude": "W2 47.22"},
        "sensors": {"url": "sensing"},
        "name": "Lobby",
    }


def test_display_info_without_name(make_display: Callable[..., Display]) -> None:
    display = make_display()
    assert display.get("/").json() == {"location": {}, "sensors": {"url": "sensing"}}


# POST /schedule, JSON


@pytest.mark.parametrize(
    "headers",
    [JSON, {"Content-Type": "application/json; charset=utf-8"}],
)
def test_request_plays_at_once(display: Display, headers: dict[str, str]) -> None:
    before = display.playback()["sequence"]
    body = json.dumps({"content-item": "http://example.org/a", "preferred-duration": "10 s"})
    response = display.post("/schedule", data=body, headers=headers)
    assert response.status_code == 202
    assert response.json() == {"request-status": "scheduling"}
    record = display.wait_playback(lambda r: r["content-item"] == "http://example.org/a")
    assert record["origin"] == "request"
    assert record["duration"] == 10.0
    assert record["set"] is None
    assert record["sequence"] == before + 1
    datetime.fromisoformat(record["started"])


def test_request_default_duration_is_30_seconds(display: Display) -> None:
    display.post("/schedule", json={"content-item": "https://example.org/b"})
    record = display.wait_playback(lambda r: r["origin"] == "request")
    assert record["duration"] == 30.0


def test_requests_queue_in_order(display: Display) -> None:
    for name in ("one", "two", "three"):
        response = display.post(
            "/schedule",
            json={"content-item": f"http://example.org/{name}", "preferred-duration": "0.3 s"},
        )
        assert response.json() == {"request-status": "scheduling"}
    seen: list[str] = []
    record = display.wait_playback(lambda r: r["origin"] == "request")
    while record["origin"] == "request":
        if not seen or seen[-1] != record["content-item"]:
            seen.append(record["content-item"])
        record = display.playback()
    assert seen == [f"http://example.org/{n}" for n in ("one", "two", "three")]
    assert record["origin"] == "idle"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "content-item"),
        ({"content-item": None}, "content-item"),
        ({"content-item": 42}, "content-item"),
        ({"content-item": "example.org/a"}, "content-item"),
        ({"content-item": "/relative"}, "content-item"),
        ({"content-item": "ftp://example.org/a"}, "content-item"),
        ({"content-item": "javascript:alert(1)"}, "content-item"),
        ({"content-item": "http://example.org/a b"}, "content-item"),
        (
            {"content-item": "http://example.org/", "preferred-duration": "soon"},
            "preferred-duration",
        ),
        (
            {"content-item": "http://example.org/", "preferred-duration": "0 seconds"},
            "preferred-duration",
        ),
        ({"content-item": "http://example.org/", "preferred-duration": "-5"}, "preferred-duration"),
        ({"content-item": "http://example.org/", "preferred-duration": True}, "preferred-duration"),
    ],
)
def test_request_invalid_fields(display: Display, body: dict[str, Any], field: str) -> None:
    assert_error(display.post("/schedule", json=body), 400, "invalid-field", field)
    assert display.service.engine.queue_length() == 0


@pytest.mark.parametrize(
    "duration", ["30 seconds", "2 minutes", "1 hour", "1.5 min", "45 s", "20", 20, "PT30S"]
)
def test_request_duration_forms(display: Display, duration: object) -> None:
    response = display.post(
        "/schedule", json={"content-item": "http://example.org/", "preferred-duration": duration}
    )
    assert response.json() == {"request-status": "scheduling"}
    # On screen before the test ends, so that the engine's "on screen" log line is this test's.
    display.wait_playback(lambda record: record["content-item"] == "http://example.org/")


@pytest.mark.parametrize(
    ("duration", "seconds"),
    [("1 hour 30 minutes", 5400), ("1h30m", 5400), ("1 week, 2 days and 3 hours", 788400),
     ("P2W", 1209600), ("2 Weeks", 1209600)],
)  # fmt: skip
def test_request_durations_in_every_unit_and_sums(
    display: Display, duration: str, seconds: float
) -> None:
    """The JSON API reads durations as the CDS does (units up to weeks, sums)."""
    response = display.post(
        "/schedule",
        json={"content-item": "http://example.org/long", "preferred-duration": duration},
    )
    assert response.json() == {"request-status": "scheduling"}
    record = display.wait_playback(lambda r: r["content-item"] == "http://example.org/long")
    assert record["duration"] == seconds


@pytest.mark.parametrize(
    ("data", "headers", "status", "code"),
    [
        (b"{not json", JSON, 400, "invalid-json"),
        (b"[1, 2]", JSON, 400, "invalid-json"),
        (b'"text"', {}, 400, "invalid-json"),
        (b'{"content-item": "http://example.org/"}', {"Origin": "null"}, 415, None),
        (
            b'{"content-item": "http://example.org/"}',
            {"Content-Type": "application/x-www-form-urlencoded"},
            415,
            "unsupported-media-type",
        ),
        (b"", JSON, 400, "missing-body"),
        (b"", {}, 400, "missing-body"),
        (
            b'{"content-item": "http://example.org/"}',
            {"Content-Type": "text/plain"},
            415,
            "unsupported-media-type",
        ),
        (
            b"content-item=http://x/",
            {"Content-Type": "application/x-www-form-urlencoded"},
            415,
            "unsupported-media-type",
        ),
    ],
)
def test_schedule_bad_bodies(
    display: Display, data: bytes, headers: dict[str, str], status: int, code: str | None
) -> None:
    answer = display.post("/schedule", data=data, headers=headers)
    if code is None:  # a browser's unlabelled body: refused, by its body or its origin
        assert answer.status_code in (403, status), answer.text
    else:
        assert_error(answer, status, code)


def test_schedule_json_over_1_mib_is_413(display: Display) -> None:
    body = json.dumps({"content-item": "http://example.org/", "pad": "x" * (1 << 20)})
    assert_error(display.post("/schedule", data=body, headers=JSON), 413, "payload-too-large")


def test_schedule_xml_over_8_mib_is_413(display: Display) -> None:
    body = b"<content-set name='big'>" + b" " * (8 << 20) + b"</content-set>"
    assert_error(display.post("/schedule", data=body, headers=XML), 413, "payload-too-large")


def test_origin_allowlist_rejects_by_policy(make_display: Callable[..., Display]) -> None:
    display = make_display(allowed_origins=("https://signage.example.org",))
    response = display.post("/schedule", json={"content-item": "https://evil.example.com/x"})
    assert response.status_code == 202
    body = response.json()
    assert body["request-status"] == "rejected"
    assert "origin" in body["reason"]
    assert display.service.engine.queue_length() == 0
    ok = display.post("/schedule", json={"content-item": "https://signage.example.org/page?a=1"})
    assert ok.json() == {"request-status": "scheduling"}


def test_queue_full_rejects_the_101st(display: Display) -> None:
    # A `highest` item holds the screen so the queue only grows.
    display.post(
        "/schedule", data=cds("alarm", "http://example.org/alarm", priority="highest"), headers=XML
    )
    display.wait_playback(lambda r: r["set"] == "alarm")
    for index in range(QUEUE_LIMIT):
        response = display.post("/schedule", json={"content-item": f"http://example.org/{index}"})
        assert response.json() == {"request-status": "scheduling"}, index
    response = display.post("/schedule", json={"content-item": "http://example.org/one-too-many"})
    assert response.status_code == 202
    assert response.json()["request-status"] == "rejected"
    assert "full" in response.json()["reason"]
    assert display.playback()["set"] == "alarm"  # highest is never interrupted


# POST /schedule, CDS


def test_cds_schedules_and_replaces_by_name(display: Display) -> None:
    response = display.post("/schedule", data=cds("lobby", "http://example.org/one"), headers=XML)
    assert response.status_code == 202
    assert response.json() == {"request-status": "scheduling"}
    record = display.wait_playback(lambda r: r["content-item"] == "http://example.org/one")
    assert record["origin"] == "schedule"
    assert record["set"] == "lobby"
    assert record["content-type"] == "text/html"
    assert record["duration"] == 15.0
    # Same root name: replaces; the old item is no longer eligible.
    display.post("/schedule", data=cds("lobby", "http://example.org/two"), headers=XML)
    display.wait_playback(lambda r: r["content-item"] == "http://example.org/two")
    assert display.service.document_names() == ["lobby"]
    # Another name: added beside it.
    display.post("/schedule", data=cds("news", "http://example.org/news"), headers=XML)
    assert display.service.document_names() == ["lobby", "news"]
    stored = {name for name, _xml, _at in display.store.cds_documents()}
    assert stored == {"lobby", "news"}


def test_cds_is_read_labelled_or_unlabelled_and_application_xml_is_one(display: Display) -> None:
    from_a_page = display.post(
        "/schedule", data=cds("a", "http://example.org/a"), headers={"Origin": "null"}
    )
    assert from_a_page.status_code in (403, 415)
    assert display.service.document_names() == []
    unlabelled = display.post("/schedule", data=cds("a", "http://example.org/a"))
    assert unlabelled.status_code == 202, unlabelled.text
    assert display.post("/schedule", data=cds("a", "http://example.org/a"), headers=XML).ok
    response = display.post(
        "/schedule",
        data=cds("b", "http://example.org/b"),
        headers={"Content-Type": "application/xml"},
    )
    assert response.status_code == 202
    assert display.service.document_names() == ["a", "b"]


def test_empty_cds_removes_the_set(display: Display) -> None:
    display.post("/schedule", data=cds("lobby", "http://example.org/one"), headers=XML)
    display.wait_playback(lambda r: r["set"] == "lobby")
    response = display.post("/schedule", data=b'<content-set name="lobby"/>', headers=XML)
    assert response.status_code == 202
    record = display.wait_playback(lambda r: r["origin"] == "idle")
    assert record["content-item"] is None and record["duration"] is None
    assert display.store.cds_documents() == []


def test_invalid_cds_is_400_with_line_and_changes_nothing(display: Display) -> None:
    display.post("/schedule", data=cds("lobby", "http://example.org/one"), headers=XML)
    bad = b'<content-set name="lobby">\n<content-item>\n<requires-file>\n</content-set>'
    body = assert_error(display.post("/schedule", data=bad, headers=XML), 400, "invalid-cds")
    assert isinstance(body["line"], int)
    assert body["problems"] and body["problems"][0]["message"]
    assert "line" in body["message"]
    legacy = (
        b'<content-set name="lobby">\n<content-item><time><play-on/></time></content-item>\n'
        b"</content-set>"
    )
    assert_error(display.post("/schedule", data=legacy, headers=XML), 400, "invalid-cds")
    assert [n for n, _x, _t in display.store.cds_documents()] == ["lobby"]
    assert display.store.cds_documents()[0][1] == cds("lobby", "http://example.org/one")


def test_cds_with_dtd_or_entities_is_refused(display: Display) -> None:
    hostile = (
        b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">]>'
        b'<content-set name="x">&lol;</content-set>'
    )
    assert_error(display.post("/schedule", data=hostile, headers=XML), 400, "invalid-cds")
    assert display.store.cds_documents() == []


def test_cds_refused_when_display_takes_single_items_only(
    make_display: Callable[..., Display],
) -> None:
    display = make_display(accept_cds=False)
    response = display.post("/schedule", data=cds("lobby", "http://example.org/one"), headers=XML)
    assert_error(response, 415, "unsupported-media-type")
    assert display.store.cds_documents() == []
    ok = display.post("/schedule", json={"content-item": "http://example.org/one"})
    assert ok.json() == {"request-status": "scheduling"}


def test_cds_is_stored_raw(display: Display) -> None:
    raw = (
        b"<?xml version='1.0' encoding='utf-8'?>\n" + cds("lobby", "http://example.org/one") + b"\n"
    )
    display.post("/schedule", data=raw, headers=XML)
    assert display.store.cds_documents()[0][1] == raw


# Sensors


def test_sensing_first_message_needs_type(display: Display) -> None:
    body = assert_error(
        display.post("/sensing", json={"sensor-id": "t1", "data": 21.5}),
        400,
        "invalid-field",
        "sensor-type",
    )
    assert "first" in body["message"]
    assert display.get("/sensing").json() == []
    ok = display.post(
        "/sensing", json={"sensor-id": "t1", "sensor-type": "air temperature", "data": 21.5}
    )
    assert ok.status_code == 200 and ok.json() == {}
    later = display.post("/sensing", json={"sensor-id": "t1", "data": 22})
    assert later.status_code == 200 and later.json() == {}
    display.post(
        "/sensing",
        json={
            "sensor-id": "cam",
            "sensor-type": "video stream",
            "data-source": "rtsp://cam.local/1",
        },
    )
    assert display.get("/sensing").json() == [
        {"sensor-id": "t1", "sensor-type": "air temperature"},
        {"sensor-id": "cam", "sensor-type": "video stream"},
    ]
    context = display.service.context()
    assert context["t1"]["data"] == 22
    assert context["cam"]["data-source"] == "rtsp://cam.local/1"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"sensor-type": "light", "data": 1}, "sensor-id"),
        ({"sensor-id": "", "sensor-type": "light", "data": 1}, "sensor-id"),
        ({"sensor-id": 5, "sensor-type": "light", "data": 1}, "sensor-id"),
        ({"sensor-id": "s", "sensor-type": "light"}, "data"),
        ({"sensor-id": "s", "sensor-type": "light", "data": 1, "data-source": "http://x/"}, "data"),
        ({"sensor-id": "s", "sensor-type": "light", "data-source": "not a uri"}, "data-source"),
        ({"sensor-id": "s", "sensor-type": 7, "data": 1}, "sensor-type"),
    ],
)
def test_sensing_invalid(display: Display, body: dict[str, Any], field: str) -> None:
    assert_error(display.post("/sensing", json=body), 400, "invalid-field", field)
    assert display.get("/sensing").json() == []


def test_sensing_any_json_value(display: Display) -> None:
    for index, value in enumerate([1, 2.5, "text", [1, 2], {"lux": 300}, False]):
        response = display.post(
            "/sensing", json={"sensor-id": f"s{index}", "sensor-type": "x", "data": value}
        )
        assert response.status_code == 200
        assert display.service.context()[f"s{index}"]["data"] == value


def test_sensors_persist(make_display: Callable[..., Display], tmp_path) -> None:
    display = make_display(data_dir=tmp_path / "keep")
    display.post(
        "/sensing", json={"sensor-id": "t1", "sensor-type": "air temperature", "data": 21.5}
    )
    store = DisplayStore(tmp_path / "keep" / "display.db")
    [reading] = store.sensors()
    store.close()
    assert (reading.sensor_id, reading.sensor_type, reading.data) == ("t1", "air temperature", 21.5)


# Playback and subscriptions


def test_playback_record_shape(display: Display) -> None:
    record = display.playback()
    assert set(record) == {
        "content-item",
        "content-type",
        "origin",
        "set",
        "started",
        "duration",
        "layout",
        "zones",
        "zone",
        "sequence",
    }
    # A screen without a layout: one zone, main, whose fields are the record's top.
    top = {name: record[name] for name in ZONE_FIELDS}
    assert (record["layout"], record["zones"], record["zone"]) == (None, {"main": top}, "main")
    assert display.get("/playback").status_code == 200


def test_subscribe_is_idempotent_and_unsubscribe_404s(display: Display) -> None:
    body = {"subscriber-uri": "http://127.0.0.1:9/hook"}
    for _ in range(2):
        response = display.post("/playback/subscribe/", json=body)
        assert response.status_code == 201
        assert response.json() == {}
    assert display.outbox.subscribers("playback") == ["http://127.0.0.1:9/hook"]
    response = display.post("/playback/unsubscribe/", json=body)
    assert response.status_code == 200 and response.json() == {}
    assert display.outbox.subscribers("playback") == []
    assert_error(display.post("/playback/unsubscribe/", json=body), 404, "not-subscribed")
    # Without the trailing slash too.
    assert display.post("/playback/subscribe", json=body).status_code == 201


@pytest.mark.parametrize(
    "uri", [None, 3, "", "mailto:a@example.org", "ftp://example.org/", "/relative", "http://"]
)
def test_subscribe_invalid_uri(display: Display, uri: object) -> None:
    path = "/playback/subscribe/"
    assert_error(
        display.post(path, json={"subscriber-uri": uri}), 400, "invalid-field", "subscriber-uri"
    )
    assert_error(
        display.post("/playback/unsubscribe/", json={"subscriber-uri": uri}),
        400,
        "invalid-field",
        "subscriber-uri",
    )
    assert display.outbox.subscribers("playback") == []


def test_subscribe_bad_bodies(display: Display) -> None:
    assert_error(display.post("/playback/subscribe/", data=b"", headers=JSON), 400, "missing-body")
    assert_error(
        display.post("/playback/subscribe/", data=b"[]", headers=JSON), 400, "invalid-json"
    )
    assert_error(
        display.post("/playback/subscribe/", data=b"<x/>", headers=XML),
        415,
        "unsupported-media-type",
    )


# Token, unknown paths and methods


def test_token_guards_changes_only(make_display: Callable[..., Display]) -> None:
    display = make_display(api_token="s3cret")
    item = {"content-item": "http://example.org/"}
    assert_error(display.post("/schedule", json=item), 401, "unauthorized")
    assert_error(
        display.post("/schedule", json=item, headers={"Authorization": "Bearer wrong"}),
        401,
        "unauthorized",
    )
    assert_error(
        display.post("/playback/subscribe/", json={"subscriber-uri": "http://x/"}),
        401,
        "unauthorized",
    )
    assert_error(
        display.post("/sensing", json={"sensor-id": "a", "sensor-type": "b", "data": 1}),
        401,
        "unauthorized",
    )
    assert display.service.engine.queue_length() == 0
    ok = display.post("/schedule", json=item, headers={"Authorization": "Bearer s3cret"})
    assert ok.json() == {"request-status": "scheduling"}
    for path in ("/", "/sensing", "/playback/", "/x/health"):
        assert display.get(path).status_code in (200, 503)


def test_unknown_path_and_method_are_json(display: Display) -> None:
    assert_error(display.get("/nope"), 404, "not-found")
    assert_error(display.get("/schedule"), 405, "method-not-allowed")
    assert_error(display.post("/"), 405, "method-not-allowed")


# Extensions


def test_health_without_a_screen_is_degraded(display: Display) -> None:
    response = display.get("/x/health")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "degraded"
    assert body["renderer"]["alive"] is False
    assert body["disk"]["free"] > 0
    assert body["webhooks"]["subscriptions"] == 0


def test_screenshot_without_a_screen_is_503(display: Display) -> None:
    assert_error(display.get("/x/screenshot"), 503, "no-screen")


def test_remote_set_content_plugged_in_plays(display: Display) -> None:
    remote = (
        b'<content-set name="feed" type="remote"><requires-file><sources>'
        b"<uri>http://example.org/feed.xml</uri></sources></requires-file></content-set>"
    )
    assert display.post("/schedule", data=remote, headers=XML).status_code == 202
    fetched = parse(cds("inner", "http://example.org/from-feed")).root
    display.service.set_remote("http://example.org/feed.xml", fetched)
    record = display.wait_playback(lambda r: r["content-item"] == "http://example.org/from-feed")
    assert record["set"] == "feed"
    display.service.set_remote("http://example.org/feed.xml", None)
    display.wait_playback(lambda r: r["origin"] == "idle")
