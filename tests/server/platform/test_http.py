"""The conventions every segment shares, through a real waitress server on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests
from flask import Flask, Response

from server.platform.http import (
    JSON_LIMIT,
    ApiError,
    body_kind,
    create_base_app,
    json_bytes,
    json_response,
    read_json_object,
    read_xml_body,
    require_token,
)
from server.platform.validation import (
    HTTP,
    Duration,
    Field,
    Location,
    Schema,
    Uri,
    ValidationError,
    parse_coordinate,
)
from server.platform.wsgi import WsgiServer

SCHEMA = Schema(
    Field("subscriber-uri", Uri(schemes=HTTP), required=True),
    Field("preferred-duration", Duration()),
    Field("location", Location()),
)


def make_app(token: str | None) -> Flask:
    app = create_base_app("test")
    require_token(app, lambda: token, service="widget")

    @app.post("/echo")
    def echo() -> Response:
        if body_kind() == "xml":
            return json_response({"xml-bytes": len(read_xml_body())})
        return json_response(SCHEMA.validate(read_json_object()), 201)

    @app.get("/boom")
    def boom() -> Response:
        raise RuntimeError("a bug")

    return app


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    server = WsgiServer(make_app(None), "127.0.0.1", 0).start()
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def locked_url() -> Iterator[str]:
    server = WsgiServer(make_app("s3cret"), "127.0.0.1", 0).start()
    yield server.url
    server.stop()


def post(
    url: str, body: bytes | str, content_type: str | None = None, origin: str | None = None
) -> requests.Response:
    headers = {"Content-Type": content_type} if content_type else {}
    if origin is not None:
        headers["Origin"] = origin
    return requests.post(url, data=body, headers=headers, timeout=5)


def test_json_is_read_when_labelled_so_or_unlabelled_from_a_client_that_is_no_browser(
    base_url: str,
) -> None:
    body = '{"subscriber-uri": "http://127.0.0.1:9/hook", "preferred-duration": "PT1M"}'
    # No header is required (the spec's rule 3): an unlabelled body is judged by its content.
    for content_type in ("application/json", "Application/JSON; charset=utf-8", None):
        response = post(base_url + "/echo", body, content_type)
        assert response.status_code == 201, response.text
        assert response.json() == {
            "subscriber-uri": "http://127.0.0.1:9/hook",
            "preferred-duration": 60.0,
        }
    # What a web page may send anywhere without asking first: never read. A page's unlabelled
    # body comes with the Origin every browser sends with a POST.
    refused: list[tuple[str | None, str | None]] = [
        ("text/plain", None),
        ("application/x-www-form-urlencoded", None),
        ("multipart/form-data; boundary=x", None),
        ("application/vnd.pdn+json", None),
        (None, "http://evil.example"),
        (None, "null"),
    ]
    for refused_type, origin in refused:
        answer = post(base_url + "/echo", body, refused_type, origin)
        assert answer.status_code == 415, (refused_type, answer.text)
        assert answer.json()["error"] == "unsupported-media-type"
        assert "Content-Type: application/json" in answer.json()["message"]


def test_xml_is_read_when_labelled_so_or_unlabelled_from_a_client_that_is_no_browser(
    base_url: str,
) -> None:
    assert post(base_url + "/echo", "<a/>", "text/xml").json() == {"xml-bytes": 4}
    assert post(base_url + "/echo", "<a/>", "application/xml").json() == {"xml-bytes": 4}
    assert post(base_url + "/echo", "  <a/>").json() == {"xml-bytes": 6}
    assert post(base_url + "/echo", "<a/>", origin="http://evil.example").status_code == 415


@pytest.mark.parametrize(
    ("body", "content_type", "status", "error", "field"),
    [
        ("{not json", "application/json", 400, "invalid-json", None),
        ("[1, 2]", None, 400, "invalid-json", None),
        ("", "application/json", 400, "missing-body", None),
        ("{}", None, 400, "invalid-field", "subscriber-uri"),
        ('{"subscriber-uri": "ftp://x/y"}', None, 400, "invalid-field", "subscriber-uri"),
        ('{"subscriber-uri": "/relative"}', None, 400, "invalid-field", "subscriber-uri"),
        ('{"subscriber-uri": 5}', None, 400, "invalid-field", "subscriber-uri"),
        (
            '{"subscriber-uri": "http://a", "preferred-duration": "0 s"}',
            None,
            400,
            "invalid-field",
            "preferred-duration",
        ),
        (
            '{"subscriber-uri": "http://a", "location": {"latitude": "Q1", "longitude": "E1"}}',
            None,
            400,
            "invalid-field",
            "location.latitude",
        ),
        ('{"subscriber-uri": "http://a"}', "text/plain", 415, "unsupported-media-type", None),
    ],
)
def test_bad_input_gets_the_json_error_body(
    base_url: str,
    body: str,
    content_type: str | None,
    status: int,
    error: str,
    field: str | None,
) -> None:
    response = post(base_url + "/echo", body, content_type or "application/json")
    assert response.status_code == status
    assert response.headers["Content-Type"].startswith("application/json")
    payload = response.json()
    assert payload["error"] == error
    assert payload["message"]
    assert payload.get("field") == field


def test_oversized_json_is_413(base_url: str) -> None:
    response = post(base_url + "/echo", b" " * (JSON_LIMIT + 10) + b"{}", "application/json")
    assert response.status_code == 413
    assert response.json()["error"] == "payload-too-large"


def test_404_405_and_500_are_json(base_url: str) -> None:
    missing = requests.get(base_url + "/nowhere", timeout=5)
    assert (missing.status_code, missing.json()["error"]) == (404, "not-found")
    wrong = requests.get(base_url + "/echo", timeout=5)
    assert (wrong.status_code, wrong.json()["error"]) == (405, "method-not-allowed")
    assert "POST" in wrong.headers["Allow"]
    broken = requests.get(base_url + "/boom", timeout=5)
    assert broken.status_code == 500
    assert broken.json() == {
        "error": "internal-error",
        "message": "The server failed; the error is logged.",
    }


def test_token_guards_changes_only(locked_url: str) -> None:
    body = '{"subscriber-uri": "http://a"}'
    assert post(locked_url + "/echo", body).status_code == 401
    wrong = requests.post(
        locked_url + "/echo", data=body, timeout=5, headers={"Authorization": "Bearer nope"}
    )
    assert wrong.status_code == 401
    assert wrong.json()["error"] == "unauthorized"
    assert wrong.json() == {
        "error": "unauthorized",
        "message": "This widget needs 'Authorization: Bearer <token>' for changes.",
    }
    right = requests.post(
        locked_url + "/echo",
        data=body,
        timeout=5,
        headers={"Authorization": "Bearer s3cret", "Content-Type": "application/json"},
    )
    assert right.status_code == 201
    # Reads stay open.
    assert requests.get(locked_url + "/nowhere", timeout=5).status_code == 404


def test_wrong_tokens_lock_out_one_address_of_every_segment() -> None:
    """The scheduler's, content server's and sensor's token check (require_token) has the
    display's brute-force guard: 10 wrong tokens a minute, then 429 for that address only."""
    server = WsgiServer(make_app("s3cret"), "0.0.0.0", 0).start()
    body = {"subscriber-uri": "http://a"}
    clients = [
        httpx.Client(
            base_url=f"http://127.0.0.1:{server.port}",
            transport=httpx.HTTPTransport(local_address=source),
            timeout=5,
        )
        for source in ("127.0.0.2", "127.0.0.3")
    ]
    try:
        guesser, other = clients
        for attempt in range(10):
            wrong = guesser.post("/echo", json=body, headers={"Authorization": f"Bearer {attempt}"})
            assert wrong.status_code == 401
        locked = guesser.post("/echo", json=body, headers={"Authorization": "Bearer s3cret"})
        assert locked.status_code == 429 and locked.json()["error"] == "too-many-attempts"
        assert 50 <= int(locked.headers["Retry-After"]) <= 60
        right = other.post("/echo", json=body, headers={"Authorization": "Bearer s3cret"})
        assert right.status_code == 201
    finally:
        for client in clients:
            client.close()
        server.stop()


@pytest.mark.parametrize(
    ("text", "axis", "value"),
    [
        ("N54.0104", "latitude", 54.0104),
        ("S 33.5", "latitude", -33.5),
        ("N 54 00.624", "latitude", 54.0104),
        ("W2 47.1", "longitude", -2.785),
        ("E179.9", "longitude", 179.9),
        ("-2.5", "longitude", -2.5),
    ],
)
def test_both_location_notations(text: str, axis: str, value: float) -> None:
    assert parse_coordinate(text, axis) == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "axis"),
    [
        ("E54", "latitude"),
        ("N91", "latitude"),
        ("N 54 61.0", "latitude"),
        ("W181", "longitude"),
        ("north", "latitude"),
        ("", "longitude"),
    ],
)
def test_bad_coordinates(text: str, axis: str) -> None:
    with pytest.raises(ValueError):
        parse_coordinate(text, axis)


def test_validation_does_not_import_flask() -> None:
    """The display reads its configuration through server.platform.validation: no Flask for that."""
    code = (
        "import sys, server.platform.validation; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('flask', 'werkzeug') or m == 'server.platform.http'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert result.stdout.strip() == "[]"


def test_validation_error_and_api_error_answer_the_same_body() -> None:
    app = create_base_app("test")

    @app.get("/validation")
    def validation() -> Response:
        raise ValidationError(400, "invalid-field", "'x' is wrong.", field="x")

    @app.get("/api")
    def api() -> Response:
        raise ApiError(400, "invalid-field", "'x' is wrong.", field="x")

    client = app.test_client()
    by_validation = client.get("/validation")
    by_api = client.get("/api")
    assert by_validation.status_code == by_api.status_code == 400
    assert by_validation.headers["Content-Type"] == by_api.headers["Content-Type"]
    assert by_validation.data == by_api.data
    assert (
        by_validation.data == b'{"error":"invalid-field","message":"\'x\' is wrong.","field":"x"}\n'
    )


def test_json_bytes_is_what_json_response_sends() -> None:
    app = create_base_app("test")
    body = {"text": "Grüße ☃", "n": [1, 2.5, None], "ok": True}

    @app.get("/")
    def index() -> Response:
        return json_response(body)

    answer = app.test_client().get("/")
    assert answer.data == json_bytes(body)
    assert json_bytes(body).endswith(b"\n")
    assert "Grüße ☃".encode() in json_bytes(body)
    assert json.loads(json_bytes(body)) == body


def test_openapi_document_is_served_when_named() -> None:
    app = create_base_app("test", openapi="sensor")
    served = app.test_client().get("/x/openapi.json")
    assert served.status_code == 200
    assert served.headers["Content-Type"] == "application/json"
    assert served.json is not None
    assert served.json["openapi"].startswith("3.1")
    plain = create_base_app("test").test_client().get("/x/openapi.json")
    assert plain.status_code == 404
